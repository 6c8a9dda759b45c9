import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, conversation, errorBody, ingestTranscript } from '../transcripts/helpers';

const unknownId = 'ffffffffffffffffffffffff';

/** Prices of the judge model: 1 per million input tokens, 2 per million output tokens. */
const JUDGE_MODEL = 'judge-model';
const judgeEnv = (fake: FakeOpenAiServer) => ({
  LLM_BASE_URL: fake.baseUrl,
  LLM_DEFAULT_MODEL: JUDGE_MODEL,
  LLM_PRICES: JSON.stringify({ [JUDGE_MODEL]: { input: 1_000_000, output: 2_000_000 } }),
  LLM_MAX_RETRIES: '0',
  EVALUATION_QUEUE_LIMIT: '6',
  JOB_POLL_MS: '50',
});

const booleanEvaluation = (projectID: string, name = 'Resolved') => ({
  projectID,
  name,
  description: 'Was the problem solved?',
  type: 'boolean',
  prompt: "Did the agent solve the user's problem?",
  truePrompt: 'the problem was solved',
  falsePrompt: 'it was not',
  settings: { model: JUDGE_MODEL, temperature: 0.2, maxTokens: 200 },
});

const numberEvaluation = (projectID: string, name = 'Politeness') => ({
  projectID,
  name,
  type: 'number',
  prompt: 'How polite was the agent?',
  minimumValue: 1,
  minimumPrompt: 'rude',
  maximumValue: 5,
  maximumPrompt: 'very polite',
});

/** A judge reply in stream pieces, with usage: 100 input and 20 output tokens. */
const reply = (text: string) => ({
  type: 'chat' as const,
  chunks: [text.slice(0, 5), text.slice(5)],
  usage: { prompt_tokens: 100, completion_tokens: 20 },
});

describeEachDatabase('evaluations over REST', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, { env: judgeEnv(fake) });
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  const create = (p: TestProject, body: unknown) =>
    app.http('POST', '/v1/transcript-evaluation', { key: p.apiKey, body });

  it('creates each type, gets, lists, updates and deletes evaluations', async () => {
    const p = await adminProject(app);
    const boolean = await create(p, booleanEvaluation(p.projectID));
    expect(boolean.status).toBe(201);
    expect(boolean.body).toEqual({
      evaluation: {
        id: expect.stringMatching(/^[0-9a-f]{24}$/),
        projectID: p.projectID,
        name: 'Resolved',
        description: 'Was the problem solved?',
        default: false,
        enabled: true,
        averageCost: null,
        prompt: "Did the agent solve the user's problem?",
        settings: { model: JUDGE_MODEL, temperature: 0.2, maxTokens: 200 },
        type: 'boolean',
        truePrompt: 'the problem was solved',
        falsePrompt: 'it was not',
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    });
    const number = await create(p, numberEvaluation(p.projectID));
    expect(number.body.evaluation).toMatchObject({
      type: 'number',
      minimumValue: 1,
      minimumPrompt: 'rude',
      maximumValue: 5,
      maximumPrompt: 'very polite',
      description: null,
      settings: {},
    });
    expect(number.body.evaluation).not.toHaveProperty('truePrompt');
    const string = await create(p, {
      projectID: p.projectID,
      name: 'Topic',
      type: 'string',
      prompt: 'Topic?',
      enabled: false,
    });
    expect(string.body.evaluation).toMatchObject({ type: 'string', enabled: false });
    expect(string.body.evaluation).not.toHaveProperty('minimumValue');

    const id = boolean.body.evaluation.id;
    expect((await app.http('GET', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).body).toEqual(boolean.body);
    const list = await app.http('GET', `/v1/transcript-evaluation/project/${p.projectID}`, { key: p.apiKey });
    expect(list.body.evaluations.map((e: { name: string }) => e.name)).toEqual(['Resolved', 'Politeness', 'Topic']);

    const patch = await app.http('PATCH', `/v1/transcript-evaluation/${id}`, {
      key: p.apiKey,
      body: { name: 'Solved', enabled: false, truePrompt: 'solved', description: null, settings: { model: 'other' } },
    });
    expect(patch.status).toBe(204);
    const after = (await app.http('GET', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).body.evaluation;
    expect(after).toMatchObject({
      name: 'Solved',
      enabled: false,
      truePrompt: 'solved',
      description: null,
      settings: { model: 'other' },
    });

    expect((await app.http('DELETE', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).status).toBe(204);
    expect((await app.http('GET', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).status).toBe(404);
    expect((await app.http('DELETE', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).status).toBe(404);
  });

  it('refuses bad definitions (400), duplicate names (409), other projects (404) and keys without admin (401)', async () => {
    const p = await adminProject(app);
    const base = booleanEvaluation(p.projectID, 'Base');
    const bad: [unknown, string][] = [
      [{ ...base, projectID: p.projectID.slice(1) }, 'projectID'],
      [{ ...base, name: '' }, 'name'],
      [{ ...base, name: 'n'.repeat(101) }, 'name'],
      [{ ...base, type: 'date' }, 'type'],
      [{ ...base, enabled: 'yes' }, 'enabled'],
      [{ ...base, prompt: 5 }, 'prompt'],
      [{ ...base, truePrompt: undefined }, 'truePrompt'],
      [{ ...base, settings: { temperature: 3 } }, 'settings.temperature'],
      [{ ...numberEvaluation(p.projectID), minimumValue: 5, maximumValue: 5 }, 'maximumValue'],
      [{ ...numberEvaluation(p.projectID), minimumValue: 1.5 }, 'minimumValue'],
      // Fields Parley knows, of another type: refused rather than dropped.
      [{ ...base, minimumValue: 1 }, 'minimumValue'],
      [{ projectID: p.projectID, name: 'x', type: 'string', prompt: 'p', truePrompt: 'no' }, 'truePrompt'],
    ];
    for (const [body, path] of bad) {
      const res = await create(p, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject(errorBody(400, 'VALIDATION_FAILED'));
      expect(
        res.body.details.map((d: { path: string }) => d.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    // SPEC.md does not close this body: members Parley does not know are ignored.
    const tolerant = await create(p, {
      projectID: p.projectID,
      name: 'Tolerant',
      type: 'string',
      prompt: 'p',
      settings: { seed: 1, temperature: 0.5 },
      extra: 1,
    });
    expect(tolerant.status, JSON.stringify(tolerant.body)).toBe(201);
    expect(tolerant.body.evaluation).toMatchObject({
      name: 'Tolerant',
      type: 'string',
      settings: { temperature: 0.5 },
    });
    expect(tolerant.body.evaluation).not.toHaveProperty('extra');
    expect(tolerant.body.evaluation.settings).not.toHaveProperty('seed');
    expect((await create(p, base)).status).toBe(201);
    const dup = await create(p, { ...numberEvaluation(p.projectID), name: 'Base' });
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject(errorBody(409, 'CONFLICT'));

    const other = await adminProject(app);
    expect((await create(p, booleanEvaluation(other.projectID))).status).toBe(404);
    const theirs = (await create(other, booleanEvaluation(other.projectID))).body.evaluation.id;
    for (const id of [theirs, unknownId]) {
      expect((await app.http('GET', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).status).toBe(404);
      expect(
        (await app.http('PATCH', `/v1/transcript-evaluation/${id}`, { key: p.apiKey, body: { name: 'x' } })).status,
      ).toBe(404);
      expect((await app.http('DELETE', `/v1/transcript-evaluation/${id}`, { key: p.apiKey })).status).toBe(404);
    }
    expect(
      (await app.http('GET', `/v1/transcript-evaluation/project/${other.projectID}`, { key: p.apiKey })).status,
    ).toBe(404);

    const mine = (await app.http('GET', `/v1/transcript-evaluation/project/${p.projectID}`, { key: p.apiKey })).body
      .evaluations[0].id;
    for (const [body, status] of [
      [{ type: 'number' }, 400],
      [{ projectID: p.projectID }, 400],
      [{ minimumValue: 0 }, 400],
      [{ minimumPrompt: 'x' }, 400],
      [{ name: '' }, 400],
      [{ name: 'z'.repeat(101) }, 400],
    ] as const) {
      const res = await app.http('PATCH', `/v1/transcript-evaluation/${mine}`, { key: p.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(status);
    }
    await create(p, { projectID: p.projectID, name: 'Second', type: 'string', prompt: 'p' });
    expect(
      (await app.http('PATCH', `/v1/transcript-evaluation/${mine}`, { key: p.apiKey, body: { name: 'Second' } }))
        .status,
    ).toBe(409);

    // A default project key has no admin scope: it may read evaluations, not define them.
    const plain = await app.createProject();
    const denied = await create(plain, booleanEvaluation(plain.projectID));
    expect(denied.status).toBe(401);
    expect(denied.body).toMatchObject({ errorCode: 'INSUFFICIENT_SCOPE', message: expect.stringContaining('"admin"') });
    expect(
      (await app.http('GET', `/v1/transcript-evaluation/project/${plain.projectID}`, { key: plain.apiKey })).status,
    ).toBe(200);
  });

  it('runs an evaluation now through the judge model, storing value, reason, cost and accounting', async () => {
    const p = await adminProject(app);
    const resolved = (await create(p, booleanEvaluation(p.projectID))).body.evaluation.id;
    const polite = (await create(p, numberEvaluation(p.projectID))).body.evaluation.id;
    const transcript = await ingestTranscript(t(), p, {
      logs: [...conversation('I need a refund, my mail is ann@example.com', 'Done, refund issued.')],
    });
    fake.reset();
    fake.script(reply('Sure. {"value": true, "reason": "The refund was issued."} Hope that helps.'));
    const run = await app.http('POST', `/v1/transcript-evaluation/${resolved}/transcript/${transcript}`, {
      key: p.apiKey,
      body: { projectID: p.projectID },
    });
    expect(run.status, run.text).toBe(201);
    expect(run.body).toEqual({
      result: {
        transcriptID: transcript,
        evaluationID: resolved,
        value: true,
        reason: 'The refund was issued.',
        cost: 140,
      },
    });
    // The judge got the JSON mode, the evaluation's settings and the redacted conversation.
    const request = fake.requests.at(-1)!;
    expect(request.body).toMatchObject({
      model: JUDGE_MODEL,
      temperature: 0.2,
      response_format: { type: 'json_object' },
    });
    const prompt = request.body.messages.map((m: { content: string }) => m.content).join('\n');
    expect(prompt).toContain('User: I need a refund, my mail is [email]');
    expect(prompt).toContain('Agent: Done, refund issued.');
    expect(prompt).not.toContain('called the API');
    expect(prompt).toContain('Answer true when: the problem was solved');

    fake.script(reply('{"value": 12, "reason": "Very polite."}'));
    const number = await app.http('POST', `/v1/transcript-evaluation/${polite}/transcript/${transcript}`, {
      key: p.apiKey,
      body: { projectID: p.projectID },
    });
    expect(number.body.result).toMatchObject({ value: 5, reason: 'Very polite.', cost: 140 });

    // A reply that is not a verdict is a failure the client hears about (503), recorded as failed.
    fake.script(reply('{"value": "yes", "reason": "?"}'));
    const failed = await app.http('POST', `/v1/transcript-evaluation/${resolved}/transcript/${transcript}`, {
      key: p.apiKey,
      body: { projectID: p.projectID },
    });
    expect(failed.status).toBe(503);
    // REST lists only results with a value unless asked for all (docs/evaluations.md).
    const valued = await app.http('GET', `/v1/transcript/${transcript}`, { key: p.apiKey });
    expect(valued.body.transcript.evaluations.map((r: { id: string }) => r.id)).toEqual([polite]);
    const got = await app.http('GET', `/v1/transcript/${transcript}`, {
      key: p.apiKey,
      query: { allEvaluations: 'true' },
    });
    const results = got.body.transcript.evaluations;
    expect(results.find((r: { id: string }) => r.id === resolved)).toMatchObject({
      name: 'Resolved',
      type: 'boolean',
      status: 'failed',
      value: null,
      error: expect.stringContaining('not true or false'),
    });
    expect(results.find((r: { id: string }) => r.id === resolved)).not.toHaveProperty('minimumValue');
    expect(results.find((r: { id: string }) => r.id === polite)).toMatchObject({
      name: 'Politeness',
      type: 'number',
      value: 5,
      reason: 'Very polite.',
      cost: 140,
      status: 'done',
      minimumValue: 1,
      maximumValue: 5,
      default: false,
      description: null,
    });
    const row = await app.services.db.prisma.evaluationResult.findFirstOrThrow({ where: { evaluationId: polite } });
    expect(row).toMatchObject({ model: JUDGE_MODEL, inputTokens: 100, outputTokens: 20, cost: 140 });
    // The average cost counts finished runs only (the first run and the failed one of Resolved).
    const definition = (await app.http('GET', `/v1/transcript-evaluation/${polite}`, { key: p.apiKey })).body
      .evaluation;
    expect(definition.averageCost).toBe(140);

    for (const [evaluation, transcriptID, body, status] of [
      [resolved, transcript, {}, 400],
      [resolved, transcript, { projectID: 'short' }, 400],
      [unknownId, transcript, { projectID: p.projectID }, 404],
      [resolved, unknownId, { projectID: p.projectID }, 404],
    ] as const) {
      const res = await app.http('POST', `/v1/transcript-evaluation/${evaluation}/transcript/${transcriptID}`, {
        key: p.apiKey,
        body,
      });
      expect(res.status, JSON.stringify(body)).toBe(status);
    }
  });

  it('queues runs as durable jobs, answers 429 with Retry-After when the queue is full, and estimates cost', async () => {
    const p = await adminProject(app);
    const transcripts = [await ingestTranscript(app, p), await ingestTranscript(app, p)];
    // Ended before the evaluations exist, so ending queues nothing here.
    await app.http('POST', `/v1/transcript/${transcripts[0]}/project/${p.projectID}/end`, { key: p.apiKey });
    const resolved = (await create(p, booleanEvaluation(p.projectID))).body.evaluation.id;
    const polite = (await create(p, numberEvaluation(p.projectID))).body.evaluation.id;

    const queue = (body: unknown) => app.http('POST', '/v1/transcript-evaluation/queue', { key: p.apiKey, body });
    fake.reset();
    for (let i = 0; i < 2; i++) fake.script(reply('{"value": "true", "reason": "fine"}'));
    const queued = await queue({ projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: transcripts });
    expect(queued.status).toBe(201);
    // Notes other than the quota go in `notes`; `warning` is the documented quota_exceeded object only.
    expect(queued.body).toEqual({
      transcriptCount: 2,
      evaluationCount: 2,
      notes: [expect.stringContaining('1 of the transcripts have not ended')],
    });
    await app.services.jobs.drain();
    const results = await app.services.db.prisma.evaluationResult.findMany({
      where: { evaluationId: resolved },
      orderBy: { transcriptId: 'asc' },
    });
    expect(results.map((r) => [r.status, r.valueBoolean])).toEqual([
      ['done', true],
      ['done', true],
    ]);

    // Full: 4 jobs would pass the limit of 6 once 3 are pending.
    app.services.jobs.abandon();
    try {
      const three = await queue({ projectID: p.projectID, evaluationIDs: [polite], transcriptIDs: transcripts });
      expect(three.status).toBe(201);
      await queue({ projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: [transcripts[0]] });
      // Room for 3 runs: the first transcript's 2 are queued, the second is named as skipped.
      const partial = await queue({
        projectID: p.projectID,
        evaluationIDs: [resolved, polite],
        transcriptIDs: transcripts,
      });
      expect(partial.status).toBe(201);
      expect(partial.body).toEqual({
        transcriptCount: 1,
        evaluationCount: 2,
        warning: {
          type: 'quota_exceeded',
          message: expect.stringContaining('room for 1 of the 2 transcripts'),
          skippedTranscriptIDs: [transcripts[1]],
        },
      });
      const queuedJobs = await app.services.db.prisma.job.count({
        where: { projectId: p.projectID, queue: 'evaluation', status: 'queued' },
      });
      expect(queuedJobs).toBe(5);
      // Room for 1 run, and a transcript needs 2: nothing fits, 429.
      const full = await queue({
        projectID: p.projectID,
        evaluationIDs: [resolved, polite],
        transcriptIDs: transcripts,
      });
      expect(full.status).toBe(429);
      expect(full.headers.get('retry-after')).toBe('30');
      expect(full.body).toMatchObject(errorBody(429, 'RATE_LIMITED'));
    } finally {
      await app.services.db.prisma.job.deleteMany({ where: { projectId: p.projectID, status: 'queued' } });
      app.services.jobs.start();
    }

    for (const [body, path] of [
      [{ projectID: p.projectID, evaluationIDs: [], transcriptIDs: transcripts }, 'evaluationIDs'],
      [
        { projectID: p.projectID, evaluationIDs: Array(11).fill(resolved), transcriptIDs: transcripts },
        'evaluationIDs',
      ],
      [
        { projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: Array(101).fill(transcripts[0]) },
        'transcriptIDs',
      ],
      [{ projectID: p.projectID, evaluationIDs: [resolved] }, 'transcriptIDs'],
    ] as const) {
      const res = await queue(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect(
      (await queue({ projectID: p.projectID, evaluationIDs: [unknownId], transcriptIDs: transcripts })).status,
    ).toBe(404);
    expect(
      (await queue({ projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: [unknownId] })).status,
    ).toBe(404);

    // Estimate: each evaluation's average cost times the matching transcripts.
    const estimate = await app.http('POST', '/v1/transcript-evaluation/estimate', {
      key: p.apiKey,
      body: { projectID: p.projectID, evaluationIDs: [resolved, polite], ended: true },
    });
    expect(estimate.status).toBe(200);
    expect(estimate.body).toEqual({
      totalCost: 140,
      breakdown: {
        transcriptCount: 1,
        evaluations: [
          { id: resolved, cost: 140 },
          { id: polite, cost: 0 },
        ],
      },
    });
    expect(
      (
        await app.http('POST', '/v1/transcript-evaluation/estimate', {
          key: p.apiKey,
          body: { projectID: p.projectID, evaluationIDs: [resolved], sessionID: 5 },
        })
      ).status,
    ).toBe(400);
    // A member the estimate does not know is ignored (SPEC.md does not close the body).
    const tolerant = await app.http('POST', '/v1/transcript-evaluation/estimate', {
      key: p.apiKey,
      body: { projectID: p.projectID, evaluationIDs: [resolved, polite], ended: true, sessionId: 'x' },
    });
    expect(tolerant.body).toEqual(estimate.body);
    // The documented body names no project: it is the evaluations'.
    const documented = await app.http('POST', '/v1/transcript-evaluation/estimate', {
      key: p.apiKey,
      body: { evaluationIDs: [resolved, polite], ended: true },
    });
    expect(documented.status, documented.text).toBe(200);
    expect(documented.body).toEqual(estimate.body);
    // Evaluations of a project the key does not reach, or of two projects, are not found.
    const other = await adminProject(app);
    const theirs = (await create(other, booleanEvaluation(other.projectID))).body.evaluation.id;
    for (const evaluationIDs of [[theirs], [resolved, theirs], [unknownId]]) {
      const res = await app.http('POST', '/v1/transcript-evaluation/estimate', {
        key: p.apiKey,
        body: { evaluationIDs },
      });
      expect(res.status, JSON.stringify(evaluationIDs)).toBe(404);
      expect(res.body.errorCode).toBe('NOT_FOUND');
    }
  });

  it('filters a search by evaluation results', async () => {
    const p = await adminProject(app);
    const resolved = (await create(p, booleanEvaluation(p.projectID))).body.evaluation.id;
    const polite = (await create(p, numberEvaluation(p.projectID))).body.evaluation.id;
    const ids = [await ingestTranscript(app, p), await ingestTranscript(app, p), await ingestTranscript(app, p)];
    fake.reset();
    const verdicts: [string, string, string][] = [
      [ids[0]!, resolved, '{"value": true, "reason": "a"}'],
      [ids[0]!, polite, '{"value": 4, "reason": "a"}'],
      [ids[1]!, resolved, '{"value": false, "reason": "b"}'],
      [ids[1]!, polite, '{"value": 2, "reason": "b"}'],
    ];
    for (const [transcript, evaluation, text] of verdicts) {
      fake.script(reply(text));
      const res = await app.http('POST', `/v1/transcript-evaluation/${evaluation}/transcript/${transcript}`, {
        key: p.apiKey,
        body: { projectID: p.projectID },
      });
      expect(res.status).toBe(201);
    }
    const search = async (filter: unknown) =>
      (
        await app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, body: { filters: [filter] } })
      ).body.transcripts
        .map((x: { id: string }) => x.id)
        .sort();
    expect(await search({ id: resolved, op: 'eq', value: true })).toEqual([ids[0]]);
    expect(await search({ id: polite, op: 'gte', value: 3 })).toEqual([ids[0]]);
    expect(await search({ id: polite, op: 'between', value: [1, 5] })).toEqual([ids[0], ids[1]].sort());
    expect(await search({ id: polite, op: 'not_exists' })).toEqual([ids[2]]);
    expect(await search({ id: resolved, op: 'neq', value: true })).toEqual([ids[1], ids[2]].sort());
  });

  it('aggregates results over time by the day the conversations started, over every transcript of the range', {
    timeout: 120_000,
  }, async () => {
    const p = await adminProject(app);
    const resolved = (await create(p, booleanEvaluation(p.projectID))).body.evaluation.id;
    const polite = (await create(p, numberEvaluation(p.projectID))).body.evaluation.id;
    // Four conversations: two on 3 March (Berlin), one on 5 March, one outside the range.
    const days = ['2026-03-03T08:00:00Z', '2026-03-03T21:30:00Z', '2026-03-05T12:00:00Z', '2026-02-20T12:00:00Z'];
    const ids: string[] = [];
    for (const day of days) {
      const id = await ingestTranscript(app, p);
      await app.services.db.prisma.transcript.update({ where: { id }, data: { createdAt: new Date(day) } });
      ids.push(id);
    }
    fake.reset();
    const verdicts: [number, string, string][] = [
      [0, resolved, '{"value": true, "reason": "a"}'],
      [1, resolved, '{"value": false, "reason": "b"}'],
      [2, resolved, '{"value": true, "reason": "c"}'],
      [3, resolved, '{"value": false, "reason": "d"}'],
      [0, polite, '{"value": 4, "reason": "a"}'],
      [1, polite, '{"value": 2, "reason": "b"}'],
    ];
    for (const [i, evaluation, text] of verdicts) {
      fake.script(reply(text));
      const res = await app.http('POST', `/v1/transcript-evaluation/${evaluation}/transcript/${ids[i]}`, {
        key: p.apiKey,
        body: { projectID: p.projectID },
      });
      expect(res.status).toBe(201);
    }
    const query = `query($e: ID!, $s: String!, $t: String!, $g: UsageGranularity, $z: String) {
      transcriptEvaluationResultsOverTime(evaluationID: $e, startTime: $s, endTime: $t, granularity: $g, timeZone: $z) {
        evaluationID type granularity timeZone total
        points { start end count trueCount average }
        values { value count }
      }
    }`;
    const range = { s: '2026-03-02T00:00:00+01:00', t: '2026-03-06T00:00:00+01:00', g: 'day', z: 'Europe/Berlin' };
    const res = await app.gql(query, { e: resolved, ...range }, p.apiKey);
    expect(res.body.errors).toBeUndefined();
    const series = res.body.data.transcriptEvaluationResultsOverTime;
    expect(series).toMatchObject({ evaluationID: resolved, type: 'boolean', granularity: 'day', total: 3 });
    expect(series.points).toEqual([
      { start: '2026-03-01T23:00:00.000Z', end: '2026-03-02T23:00:00.000Z', count: 0, trueCount: 0, average: null },
      { start: '2026-03-02T23:00:00.000Z', end: '2026-03-03T23:00:00.000Z', count: 2, trueCount: 1, average: 0.5 },
      { start: '2026-03-03T23:00:00.000Z', end: '2026-03-04T23:00:00.000Z', count: 0, trueCount: 0, average: null },
      { start: '2026-03-04T23:00:00.000Z', end: '2026-03-05T23:00:00.000Z', count: 1, trueCount: 1, average: 1 },
    ]);
    expect(series.values).toEqual([
      { value: true, count: 2 },
      { value: false, count: 1 },
    ]);
    // In UTC the 21:30 conversation of 3 March is still on the 3rd; a number evaluation averages.
    const numbers = await app.gql(query, { e: polite, ...range, z: 'UTC', g: 'week' }, p.apiKey);
    expect(numbers.body.data.transcriptEvaluationResultsOverTime.points).toEqual([
      { start: '2026-02-23T00:00:00.000Z', end: '2026-03-02T00:00:00.000Z', count: 0, trueCount: 0, average: null },
      { start: '2026-03-02T00:00:00.000Z', end: '2026-03-09T00:00:00.000Z', count: 2, trueCount: 0, average: 3 },
    ]);
    // Bad input: an unknown zone, a reversed range, too many buckets; another project's evaluation.
    for (const [vars, path] of [
      [{ ...range, z: 'Mars/Olympus' }, 'timeZone'],
      [{ ...range, s: range.t, t: range.s }, 'endTime'],
      [{ s: '2020-01-01T00:00:00Z', t: '2026-01-01T00:00:00Z', g: 'hour' }, 'granularity'],
    ] as const) {
      const bad = await app.gql(query, { e: resolved, ...vars }, p.apiKey);
      expect(bad.body.errors?.[0]?.extensions?.code, JSON.stringify(bad.body)).toBe('VALIDATION_FAILED');
      expect(JSON.stringify(bad.body.errors[0].extensions)).toContain(path);
    }
    const other = await adminProject(app);
    const foreign = await app.gql(query, { e: resolved, ...range }, other.apiKey);
    expect(foreign.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  function t(): TestApp {
    return app;
  }
});

describeEachDatabase('evaluations without a language model', (provider) => {
  const t = useTestApp(provider, { env: { JOB_POLL_MS: '50' } });

  it('records evaluations as skipped when only the built-in provider is configured', async () => {
    const p = await adminProject(t.app);
    await t.app.http('POST', '/v1/transcript-evaluation', { key: p.apiKey, body: booleanEvaluation(p.projectID) });
    const id = await ingestTranscript(t.app, p);
    await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
    await t.app.services.jobs.drain();
    // Without a value the result stays out of the REST arrays (their schema requires one)…
    const plain = await t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey });
    expect(plain.body.transcript.evaluations).toEqual([]);
    const search = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey });
    expect(search.body.transcripts[0].evaluations).toEqual([]);
    // …and run-now says why instead of answering nulls.
    const evaluationID = (
      await t.app.http('GET', `/v1/transcript-evaluation/project/${p.projectID}`, { key: p.apiKey })
    ).body.evaluations[0].id;
    const now = await t.app.http('POST', `/v1/transcript-evaluation/${evaluationID}/transcript/${id}`, {
      key: p.apiKey,
      body: { projectID: p.projectID },
    });
    expect(now.status).toBe(503);
    expect(now.body).toMatchObject({
      errorCode: 'SERVICE_UNAVAILABLE',
      message: expect.stringMatching(/skipped.*No language model/),
    });
    // The status is visible on request, and over GraphQL.
    const got = await t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey, query: { allEvaluations: 'true' } });
    expect(got.body.transcript.evaluations).toEqual([
      expect.objectContaining({
        status: 'skipped',
        value: null,
        cost: null,
        reason: expect.stringContaining('No language model'),
      }),
    ]);
  });
});
