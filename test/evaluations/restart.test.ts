import { afterAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { helpedEvaluation } from '../helpers/fixtures';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, ingestTranscript } from '../transcripts/helpers';

/**
 * Issue #4's acceptance test: end a transcript, kill the job runner while the judge is still
 * answering, start an instance again on the same database, and see exactly one result per enabled
 * evaluation, produced through the fake OpenAI-compatible server.
 */
describeEachDatabase('evaluation jobs across a crash', (provider) => {
  let fake: FakeOpenAiServer;
  const apps: TestApp[] = [];
  afterAll(async () => {
    for (const app of [...apps].reverse()) await app.close();
    await fake?.close();
  });

  it('resumes the evaluations of an ended transcript after the runner dies, producing one result each', async () => {
    fake = await startFakeOpenAiServer();
    const env = {
      LLM_BASE_URL: fake.baseUrl,
      LLM_DEFAULT_MODEL: 'judge',
      LLM_MAX_RETRIES: '0',
      JOB_CONCURRENCY: '2',
      JOB_POLL_MS: '50',
      // A dead worker's jobs are taken over once their lease runs out.
      JOB_LEASE_MS: '600',
    };
    const first = await startTestApp(provider, { env });
    apps.push(first);
    const p = await adminProject(first);
    const define = (name: string, enabled: boolean) =>
      first.http('POST', '/v1/transcript-evaluation', {
        key: p.apiKey,
        body: { ...helpedEvaluation(p.projectID, name), enabled },
      });
    const enabled = [
      (await define('helped', true)).body.evaluation.id,
      (await define('polite', true)).body.evaluation.id,
    ];
    const disabled = (await define('off', false)).body.evaluation.id;
    const transcript = await ingestTranscript(first, p);

    // The judge accepts both requests and never answers: the runner is mid-job when it dies.
    fake.script({ type: 'hang' }, { type: 'hang' });
    const end = await first.http('POST', `/v1/transcript/${transcript}/project/${p.projectID}/end`, { key: p.apiKey });
    expect(end.body.evaluationsQueued).toBe(2);
    await expect.poll(() => fake.requests.length, { timeout: 10_000 }).toBe(2);
    first.services.jobs.abandon();

    const db = first.services.db.prisma;
    const jobs = await db.job.findMany({ where: { projectId: p.projectID, queue: 'evaluation' } });
    expect(jobs.map((j) => j.status)).toEqual(['running', 'running']);
    expect((await db.evaluationResult.findMany({ where: { transcriptId: transcript } })).map((r) => r.status)).toEqual([
      'pending',
      'pending',
    ]);

    // A new instance on the same database: its runner claims the jobs once their lease has run out.
    fake.script(
      { type: 'chat', chunks: ['{"value": true, ', '"reason": "helped"}'] },
      { type: 'chat', chunks: ['{"value": true, ', '"reason": "helped"}'] },
    );
    const second = await startTestApp(provider, { env, database: first.database });
    apps.push(second);
    await expect
      .poll(async () => db.evaluationResult.count({ where: { transcriptId: transcript, status: 'done' } }), {
        timeout: 20_000,
      })
      .toBe(2);
    await second.services.jobs.drain();

    const results = await db.evaluationResult.findMany({ where: { transcriptId: transcript } });
    expect(results.map((r) => r.evaluationId).sort()).toEqual([...enabled].sort());
    expect(results.every((r) => r.status === 'done' && r.valueBoolean === true && r.reason === 'helped')).toBe(true);
    expect(results.some((r) => r.evaluationId === disabled)).toBe(false);
    const after = await db.job.findMany({ where: { projectId: p.projectID, queue: 'evaluation' } });
    expect(after.map((j) => [j.status, j.attempts])).toEqual([
      ['done', 2],
      ['done', 2],
    ]);
    expect(fake.requests).toHaveLength(4);
    const got = await second.http('GET', `/v1/transcript/${transcript}`, { key: p.apiKey });
    expect(got.body.transcript.evaluations.map((e: { name: string; value: boolean }) => [e.name, e.value])).toEqual([
      ['helped', true],
      ['polite', true],
    ]);
  });

  it('records failed on the result when the worker of the job stopped on its last attempt', async () => {
    fake ??= await startFakeOpenAiServer();
    const env = {
      LLM_BASE_URL: fake.baseUrl,
      LLM_DEFAULT_MODEL: 'judge',
      LLM_MAX_RETRIES: '0',
      JOB_POLL_MS: '50',
      JOB_LEASE_MS: '600',
    };
    const first = await startTestApp(provider, { env });
    apps.push(first);
    const p = await adminProject(first);
    const created = await first.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'killer', enabled: true, type: 'string', prompt: 'Summarise.' },
    });
    const transcript = await ingestTranscript(first, p);
    fake.script({ type: 'hang' });
    const requestsBefore = fake.requests.length;
    await first.http('POST', `/v1/transcript/${transcript}/project/${p.projectID}/end`, { key: p.apiKey });
    await expect.poll(() => fake.requests.length, { timeout: 10_000 }).toBe(requestsBefore + 1);
    first.services.jobs.abandon();
    const db = first.services.db.prisma;
    // That was its last attempt (as if the four before had taken their worker down too).
    await db.job.updateMany({ where: { projectId: p.projectID, queue: 'evaluation' }, data: { maxAttempts: 1 } });

    const second = await startTestApp(provider, { env, database: first.database });
    apps.push(second);
    await expect
      .poll(async () => (await db.evaluationResult.findFirst({ where: { transcriptId: transcript } }))?.status, {
        timeout: 20_000,
      })
      .toBe('failed');
    const result = await db.evaluationResult.findFirstOrThrow({ where: { transcriptId: transcript } });
    expect(result).toMatchObject({
      evaluationId: created.body.evaluation.id,
      error: 'The evaluation job failed: the worker running it stopped once (lease expired)',
    });
    expect(await db.job.findFirst({ where: { projectId: p.projectID, queue: 'evaluation' } })).toMatchObject({
      status: 'failed',
      attempts: 1,
    });
    expect(fake.requests.length).toBe(requestsBefore + 1);
  });
});
