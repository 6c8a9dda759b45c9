import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { usageRest } from '../helpers/usage';
import { adminProject, ingestTranscript } from '../transcripts/helpers';

/** Transcripts and the judge's tokens in usage analytics (DECISIONS.md §4). */
describeEachDatabase('transcripts and evaluations in usage analytics', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, {
      env: { LLM_BASE_URL: fake.baseUrl, LLM_DEFAULT_MODEL: 'judge-model', LLM_MAX_RETRIES: '0', JOB_POLL_MS: '50' },
    });
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  it('counts created transcripts, and the judge call as llm-input and llm-output credit', async () => {
    const p = await adminProject(app);
    const first = await ingestTranscript(app, p, { userID: 'u1' });
    await ingestTranscript(app, p, { userID: 'u2', environment: 'production' });
    // A refused duplicate session does not count.
    const dup = await app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'same', logs: [] },
    });
    expect(dup.status).toBe(201);
    const again = await app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'same', logs: [] },
    });
    expect(again.status).toBe(409);

    const evaluation = await app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: {
        projectID: p.projectID,
        name: 'Resolved',
        type: 'boolean',
        prompt: 'Was it solved?',
        truePrompt: 'yes',
        falsePrompt: 'no',
      },
    });
    expect(evaluation.status).toBe(201);
    fake.script({
      type: 'chat',
      chunks: ['{"value": true, ', '"reason": "ok"}'],
      usage: { prompt_tokens: 321, completion_tokens: 12 },
    });
    const run = await app.http(
      'POST',
      `/v1/transcript-evaluation/${evaluation.body.evaluation.id}/transcript/${first}`,
      {
        key: p.apiKey,
        body: { projectID: p.projectID },
      },
    );
    expect(run.status, run.text).toBe(201);

    const transcripts = await usageRest(app, p.apiKey, { name: 'transcripts', filter: { projectID: p.projectID } });
    expect(transcripts.status).toBe(200);
    const byEnv = (items: { environmentID: string; count: number }[], alias: string) => {
      const env = p.environments.find((e) => e.alias === alias)!.id;
      return items.filter((i) => i.environmentID === env).reduce((n, i) => n + i.count, 0);
    };
    expect(byEnv(transcripts.body.result.items, 'development')).toBe(2);
    expect(byEnv(transcripts.body.result.items, 'production')).toBe(1);

    const credit = await usageRest(app, p.apiKey, { name: 'credit_usage', filter: { projectID: p.projectID } });
    const items = credit.body.result.items as {
      type: string;
      model: string;
      count: number;
      diagramID: string;
      nodeID: string;
    }[];
    expect(
      items
        .map(({ type, model, count, diagramID, nodeID }) => ({ type, model, count, diagramID, nodeID }))
        .sort((a, b) => a.type.localeCompare(b.type)),
    ).toEqual([
      { type: 'llm-input', model: 'judge-model', count: 321, diagramID: '', nodeID: '' },
      { type: 'llm-output', model: 'judge-model', count: 12, diagramID: '', nodeID: '' },
    ]);
  });

  it('counts the credit of every attempt of a run, the unreadable and the cut ones too, once each', async () => {
    const p = await adminProject(app);
    const evaluation = await app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'Mood', type: 'string', prompt: 'How did the user feel?' },
    });
    expect(evaluation.status).toBe(201);
    const transcript = await ingestTranscript(app, p);
    fake.script(
      // Attempt 1: paid for, but no JSON in it.
      { type: 'chat', chunks: ['I think ', 'they were happy'], usage: { prompt_tokens: 100, completion_tokens: 5 } },
      // Attempt 2: text had started when the connection was cut (partial accounting, from the tokenizer).
      { type: 'chat', chunks: ['{"value": ', '"hap', 'py"}'], cutAfterChunks: 2 },
      // Attempt 3: an error before any text: nothing to count.
      { type: 'error', status: 500 },
      // Attempt 4: the answer.
      {
        type: 'chat',
        chunks: ['{"value": "happy", ', '"reason": "thanks"}'],
        usage: { prompt_tokens: 200, completion_tokens: 10 },
      },
    );
    const end = await app.http('POST', `/v1/transcript/${transcript}/project/${p.projectID}/end`, { key: p.apiKey });
    expect(end.body.evaluationsQueued).toBe(1);
    const db = app.services.db.prisma;
    await expect
      .poll(async () => (await db.evaluationResult.findFirst({ where: { transcriptId: transcript } }))?.status, {
        timeout: 30_000,
      })
      .toBe('done');
    const result = await db.evaluationResult.findFirstOrThrow({ where: { transcriptId: transcript } });
    expect(result).toMatchObject({ valueString: 'happy', inputTokens: 200, outputTokens: 10 });
    expect((await db.job.findFirstOrThrow({ where: { projectId: p.projectID } })).attempts).toBe(4);

    const events = await db.usageEvent.findMany({
      where: { projectId: p.projectID, kind: 'credit' },
      select: { idempotencyKey: true, quantity: true },
    });
    const quantity = (suffix: string) =>
      Number(events.find((e) => e.idempotencyKey === `evaluation:${result.runId}:${suffix}`)?.quantity);
    expect(events.map((e) => e.idempotencyKey).sort()).toEqual(
      ['1:in', '1:out', '2:in', '2:out', '4:in', '4:out'].map((k) => `evaluation:${result.runId}:${k}`),
    );
    expect([quantity('1:in'), quantity('1:out'), quantity('4:in'), quantity('4:out')]).toEqual([100, 5, 200, 10]);
    const cutIn = quantity('2:in');
    const cutOut = quantity('2:out');
    expect(cutIn).toBeGreaterThan(0);
    expect(cutOut).toBeGreaterThan(0);

    const credit = await usageRest(app, p.apiKey, { name: 'credit_usage', filter: { projectID: p.projectID } });
    const total = (type: string) =>
      (credit.body.result.items as { type: string; count: number }[])
        .filter((i) => i.type === type)
        .reduce((n, i) => n + i.count, 0);
    expect([total('llm-input'), total('llm-output')]).toEqual([300 + cutIn, 15 + cutOut]);
  });
});
