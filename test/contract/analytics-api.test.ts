import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, conversation, ingestTranscript } from '../transcripts/helpers';
import { conforms, uncovered, uncoveredStatuses } from './harness';
import { notYetImplemented } from './pending';

/**
 * analytics-api.json: every documented route, success and error, through real HTTP, each response
 * validated against the document (test/contract/harness.ts). The v1 usage query too (docs/usage.md).
 */

const DOCUMENT = 'analytics-api.json';
const unknownId = 'ffffffffffffffffffffffff';
const JUDGE = 'judge-model';

const reply = (text: string) => ({
  type: 'chat' as const,
  chunks: [text],
  usage: { prompt_tokens: 100, completion_tokens: 20 },
});

describeEachDatabase('analytics-api.json contract', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  let p: TestProject;
  let other: TestProject;
  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, {
      env: {
        LLM_BASE_URL: fake.baseUrl,
        LLM_DEFAULT_MODEL: JUDGE,
        LLM_PRICES: JSON.stringify({ [JUDGE]: { input: 1_000_000, output: 2_000_000 } }),
        LLM_MAX_RETRIES: '0',
        // Queued runs stay queued, so the per-project limit is reached deterministically.
        JOBS_ENABLED: 'false',
        EVALUATION_QUEUE_LIMIT: '3',
      },
    });
    p = await adminProject(app);
    other = await adminProject(app);
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  const call = (
    method: string,
    path: string,
    opts: { key?: string | null; body?: unknown; query?: Record<string, string> } = {},
  ) =>
    app.http(method, path, {
      key: opts.key === null ? undefined : (opts.key ?? p.apiKey),
      body: opts.body,
      query: opts.query,
    });

  it('transcript properties: create, list, get, update, delete; 400, 401, 404, 409', { timeout: 180_000 }, async () => {
    const CREATE = 'POST /v1/transcript-property';
    const created = conforms(
      CREATE,
      await call('POST', '/v1/transcript-property', { body: { projectID: p.projectID, name: 'plan', type: 'string' } }),
      201,
    );
    const id = created.property.id as string;
    conforms(
      CREATE,
      await call('POST', '/v1/transcript-property', { body: { projectID: p.projectID, name: 'plan', type: 'string' } }),
      409,
    );
    conforms(
      CREATE,
      await call('POST', '/v1/transcript-property', { body: { projectID: p.projectID, name: 'x', type: 'date' } }),
      400,
    );
    // Authentication before validation: no key and a malformed body learn nothing about the body rules.
    const anonymous = conforms(
      CREATE,
      await call('POST', '/v1/transcript-property', { key: null, body: { bad: 1 } }),
      401,
    );
    expect(anonymous.details).toBeUndefined();

    const LIST = 'GET /v1/transcript-property/project/{projectID}';
    const list = conforms(LIST, await call('GET', `/v1/transcript-property/project/${p.projectID}`), 200);
    expect(list.properties.map((x: { id: string }) => x.id)).toContain(id);
    conforms(LIST, await call('GET', `/v1/transcript-property/project/${p.projectID}`, { key: other.apiKey }), 404);
    conforms(LIST, await call('GET', `/v1/transcript-property/project/${p.projectID}`, { key: null }), 401);

    const GET = 'GET /v1/transcript-property/{propertyID}';
    expect(conforms(GET, await call('GET', `/v1/transcript-property/${id}`), 200).property.name).toBe('plan');
    conforms(GET, await call('GET', `/v1/transcript-property/${unknownId}`), 404);
    conforms(GET, await call('GET', `/v1/transcript-property/${id}`, { key: 'ak.nope' }), 401);

    const PATCH = 'PATCH /v1/transcript-property/{propertyID}';
    conforms(PATCH, await call('PATCH', `/v1/transcript-property/${id}`, { body: { name: 'tier' } }), 204);
    conforms(PATCH, await call('PATCH', `/v1/transcript-property/${id}`, { body: { name: '' } }), 400);
    conforms(PATCH, await call('PATCH', `/v1/transcript-property/${unknownId}`, { body: { name: 'z' } }), 404);
    conforms(PATCH, await call('PATCH', `/v1/transcript-property/${id}`, { key: null, body: { name: 'z' } }), 401);
    const second = conforms(
      CREATE,
      await call('POST', '/v1/transcript-property', { body: { projectID: p.projectID, name: 'plan', type: 'number' } }),
      201,
    );
    conforms(
      PATCH,
      await call('PATCH', `/v1/transcript-property/${second.property.id}`, { body: { name: 'tier' } }),
      409,
    );

    const DELETE = 'DELETE /v1/transcript-property/{propertyID}';
    conforms(DELETE, await call('DELETE', `/v1/transcript-property/${second.property.id}`), 204);
    conforms(DELETE, await call('DELETE', `/v1/transcript-property/${second.property.id}`), 404);
    conforms(DELETE, await call('DELETE', `/v1/transcript-property/${id}`, { key: null }), 401);
  });

  it('property values: set, list, delete; 400, 401, 404', { timeout: 180_000 }, async () => {
    const property = (
      await call('POST', '/v1/transcript-property', { body: { projectID: p.projectID, name: 'score', type: 'number' } })
    ).body.property.id as string;
    const transcript = await ingestTranscript(app, p, { logs: conversation('hello') });

    const SET = 'POST /v1/transcript-property-value';
    const set = conforms(
      SET,
      await call('POST', '/v1/transcript-property-value', {
        body: { propertyID: property, transcriptID: transcript, value: '42', metadata: { by: 'test' } },
      }),
      201,
    );
    expect(set.propertyValue.value).toBe('42');
    conforms(
      SET,
      await call('POST', '/v1/transcript-property-value', {
        body: { propertyID: property, transcriptID: transcript, value: 'many' },
      }),
      400,
    );
    conforms(
      SET,
      await call('POST', '/v1/transcript-property-value', {
        body: { propertyID: property, transcriptID: unknownId, value: '1' },
      }),
      404,
    );
    conforms(SET, await call('POST', '/v1/transcript-property-value', { key: null, body: {} }), 401);

    const LIST = 'GET /v1/transcript-property-value/transcript/{transcriptID}';
    expect(
      conforms(LIST, await call('GET', `/v1/transcript-property-value/transcript/${transcript}`), 200).propertyValues,
    ).toHaveLength(1);
    conforms(LIST, await call('GET', `/v1/transcript-property-value/transcript/${unknownId}`), 404);
    conforms(LIST, await call('GET', `/v1/transcript-property-value/transcript/${transcript}`, { key: null }), 401);

    const DELETE = 'DELETE /v1/transcript-property-value/transcript/{transcriptID}/property/{propertyID}';
    const path = `/v1/transcript-property-value/transcript/${transcript}/property/${property}`;
    conforms(DELETE, await call('DELETE', path), 204);
    conforms(DELETE, await call('DELETE', path), 404);
    conforms(DELETE, await call('DELETE', path, { key: null }), 401);
  });

  it('evaluations: create, get, list, update, run now, queue (429 when full), estimate, delete', {
    timeout: 180_000,
  }, async () => {
    const CREATE = 'POST /v1/transcript-evaluation';
    const body = {
      projectID: p.projectID,
      name: 'Resolved',
      description: 'Was the problem solved?',
      type: 'boolean',
      prompt: 'Did the agent solve the problem?',
      truePrompt: 'solved',
      falsePrompt: 'not solved',
      settings: { model: JUDGE },
    };
    const resolved = conforms(CREATE, await call('POST', '/v1/transcript-evaluation', { body }), 201).evaluation
      .id as string;
    const polite = conforms(
      CREATE,
      await call('POST', '/v1/transcript-evaluation', {
        body: {
          projectID: p.projectID,
          name: 'Politeness',
          type: 'number',
          prompt: 'How polite?',
          minimumValue: 1,
          minimumPrompt: 'rude',
          maximumValue: 5,
          maximumPrompt: 'polite',
        },
      }),
      201,
    ).evaluation.id as string;
    const summary = conforms(
      CREATE,
      await call('POST', '/v1/transcript-evaluation', {
        body: { projectID: p.projectID, name: 'Summary', type: 'string', prompt: 'Summarise.' },
      }),
      201,
    ).evaluation.id as string;
    conforms(CREATE, await call('POST', '/v1/transcript-evaluation', { body }), 409);
    conforms(
      CREATE,
      await call('POST', '/v1/transcript-evaluation', { body: { ...body, name: 'n', type: 'date' } }),
      400,
    );
    conforms(CREATE, await call('POST', '/v1/transcript-evaluation', { key: null, body: { nope: true } }), 401);
    conforms(
      CREATE,
      await call('POST', '/v1/transcript-evaluation', { key: other.apiKey, body: { ...body, name: 'elsewhere' } }),
      404,
    );

    const GET = 'GET /v1/transcript-evaluation/{evaluationID}';
    expect(conforms(GET, await call('GET', `/v1/transcript-evaluation/${polite}`), 200).evaluation.maximumValue).toBe(
      5,
    );
    conforms(GET, await call('GET', `/v1/transcript-evaluation/${resolved}`), 200);
    conforms(GET, await call('GET', `/v1/transcript-evaluation/${summary}`), 200);
    conforms(GET, await call('GET', `/v1/transcript-evaluation/${unknownId}`), 404);
    conforms(GET, await call('GET', `/v1/transcript-evaluation/${polite}`, { key: null }), 401);

    const LIST = 'GET /v1/transcript-evaluation/project/{projectID}';
    expect(
      conforms(LIST, await call('GET', `/v1/transcript-evaluation/project/${p.projectID}`), 200).evaluations,
    ).toHaveLength(3);
    conforms(LIST, await call('GET', `/v1/transcript-evaluation/project/${p.projectID}`, { key: other.apiKey }), 404);
    conforms(LIST, await call('GET', `/v1/transcript-evaluation/project/${p.projectID}`, { key: null }), 401);

    const PATCH = 'PATCH /v1/transcript-evaluation/{evaluationID}';
    conforms(
      PATCH,
      await call('PATCH', `/v1/transcript-evaluation/${summary}`, { body: { description: 'In a line.' } }),
      204,
    );
    conforms(PATCH, await call('PATCH', `/v1/transcript-evaluation/${summary}`, { body: { name: 'Resolved' } }), 409);
    conforms(PATCH, await call('PATCH', `/v1/transcript-evaluation/${summary}`, { body: { type: 'number' } }), 400);
    conforms(PATCH, await call('PATCH', `/v1/transcript-evaluation/${unknownId}`, { body: { description: 'x' } }), 404);
    conforms(PATCH, await call('PATCH', `/v1/transcript-evaluation/${summary}`, { key: null, body: {} }), 401);

    const transcript = await ingestTranscript(app, p, { logs: conversation('My order is late', 'It ships today.') });
    const RUN = 'POST /v1/transcript-evaluation/{evaluationID}/transcript/{transcriptID}';
    fake.reset();
    fake.script(reply('{"value": true, "reason": "It ships today."}'));
    const run = conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${resolved}/transcript/${transcript}`, {
        body: { projectID: p.projectID },
      }),
      201,
    );
    expect(run.result).toMatchObject({ value: true, evaluationID: resolved, transcriptID: transcript });
    fake.script(reply('{"value": 4, "reason": "Courteous."}'));
    conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${polite}/transcript/${transcript}`, {
        body: { projectID: p.projectID },
      }),
      201,
    );
    fake.script(reply('{"value": "Late order; ships today.", "reason": "What was said."}'));
    conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${summary}/transcript/${transcript}`, {
        body: { projectID: p.projectID },
      }),
      201,
    );
    conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${resolved}/transcript/${transcript}`, { body: {} }),
      400,
    );
    conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${resolved}/transcript/${unknownId}`, {
        body: { projectID: p.projectID },
      }),
      404,
    );
    conforms(
      RUN,
      await call('POST', `/v1/transcript-evaluation/${resolved}/transcript/${transcript}`, { key: null, body: {} }),
      401,
    );

    const QUEUE = 'POST /v1/transcript-evaluation/queue';
    const more = [await ingestTranscript(app, p), await ingestTranscript(app, p), await ingestTranscript(app, p)];
    conforms(
      QUEUE,
      await call('POST', '/v1/transcript-evaluation/queue', {
        body: { projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: [transcript, unknownId] },
      }),
      404,
    );
    // The queue limit is 3 and this request wants 4 runs: what fits is queued, the rest named in the documented warning.
    const queued = conforms(
      QUEUE,
      await call('POST', '/v1/transcript-evaluation/queue', {
        body: { projectID: p.projectID, evaluationIDs: [resolved], transcriptIDs: [transcript, ...more] },
      }),
      201,
    );
    expect(queued).toMatchObject({
      transcriptCount: 3,
      warning: { type: 'quota_exceeded', skippedTranscriptIDs: [more[2]] },
    });
    // Nothing fits any more: 429.
    const over = conforms(
      QUEUE,
      await call('POST', '/v1/transcript-evaluation/queue', {
        body: { projectID: p.projectID, evaluationIDs: [polite], transcriptIDs: [transcript] },
      }),
      429,
    );
    expect(over.errorCode).toBeTruthy();
    conforms(
      QUEUE,
      await call('POST', '/v1/transcript-evaluation/queue', {
        body: { projectID: p.projectID, evaluationIDs: [], transcriptIDs: [transcript] },
      }),
      400,
    );
    conforms(QUEUE, await call('POST', '/v1/transcript-evaluation/queue', { key: null, body: {} }), 401);

    const ESTIMATE = 'POST /v1/transcript-evaluation/estimate';
    const estimate = conforms(
      ESTIMATE,
      await call('POST', '/v1/transcript-evaluation/estimate', { body: { evaluationIDs: [resolved, polite] } }),
      200,
    );
    expect(estimate.breakdown.evaluations).toHaveLength(2);
    conforms(ESTIMATE, await call('POST', '/v1/transcript-evaluation/estimate', { body: { evaluationIDs: [] } }), 400);
    conforms(
      ESTIMATE,
      await call('POST', '/v1/transcript-evaluation/estimate', { body: { evaluationIDs: [unknownId] } }),
      404,
    );
    conforms(ESTIMATE, await call('POST', '/v1/transcript-evaluation/estimate', { key: null, body: {} }), 401);

    // Transcripts with evaluation results of every type.
    const SEARCH = 'POST /v1/transcript/project/{projectID}';
    const found = conforms(SEARCH, await call('POST', `/v1/transcript/project/${p.projectID}`, { body: {} }), 200);
    const withResults = found.transcripts.find((x: { id: string }) => x.id === transcript);
    // Resolved was queued again (pending): only the results with a value are in the array (docs/evaluations.md).
    expect(withResults.evaluations.map((e: { id: string }) => e.id).sort()).toEqual([polite, summary].sort());
    conforms(
      SEARCH,
      await call('POST', `/v1/transcript/project/${p.projectID}`, { body: {}, query: { encode: 'true', take: '2' } }),
      200,
    );
    conforms(SEARCH, await call('POST', `/v1/transcript/project/${p.projectID}`, { body: { ended: 'yes' } }), 400);
    conforms(SEARCH, await call('POST', `/v1/transcript/project/${p.projectID}`, { key: other.apiKey, body: {} }), 404);
    conforms(
      SEARCH,
      await call('POST', `/v1/transcript/project/${p.projectID}`, { key: null, body: { ended: 'yes' } }),
      401,
    );

    const GET_T = 'GET /v1/transcript/{transcriptID}';
    const got = conforms(GET_T, await call('GET', `/v1/transcript/${transcript}`), 200);
    expect(got.transcript.logs.length).toBeGreaterThan(0);
    conforms(
      GET_T,
      await call('GET', `/v1/transcript/${transcript}`, { query: { filterConversation: 'true', encode: 'true' } }),
      200,
    );
    conforms(
      GET_T,
      await call('GET', `/v1/transcript/${transcript}`, { query: { take: 'x', filterConversation: 'maybe' } }),
      400,
    );
    conforms(GET_T, await call('GET', `/v1/transcript/${unknownId}`), 404);
    conforms(GET_T, await call('GET', `/v1/transcript/${transcript}`, { key: null }), 401);

    const DELETE_E = 'DELETE /v1/transcript-evaluation/{evaluationID}';
    conforms(DELETE_E, await call('DELETE', `/v1/transcript-evaluation/${summary}`), 204);
    conforms(DELETE_E, await call('DELETE', `/v1/transcript-evaluation/${summary}`), 404);
    conforms(DELETE_E, await call('DELETE', `/v1/transcript-evaluation/${polite}`, { key: null }), 401);

    const DELETE_T = 'DELETE /v1/transcript/{transcriptID}';
    conforms(DELETE_T, await call('DELETE', `/v1/transcript/${transcript}`), 204);
    conforms(DELETE_T, await call('DELETE', `/v1/transcript/${transcript}`), 404);
    conforms(DELETE_T, await call('DELETE', `/v1/transcript/${more[0]}`, { key: null }), 401);
  });

  it('the v1 usage query: every documented query name; 400 for a bad body, 401 for a foreign project or no key', {
    timeout: 180_000,
  }, async () => {
    const USAGE = 'POST /v1/query/usage';
    // A fresh project: the tests above recorded usage (transcripts, the judge's tokens) in theirs.
    p = await adminProject(app);
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000);
    const at = (minutes: number) => new Date(hour.getTime() + minutes * 60_000).toISOString();
    const event = (e: Record<string, unknown>, minutes = 5) => ({
      projectID: p.projectID,
      environment: 'production',
      timestamp: at(minutes),
      ...e,
    });
    const ingested = await app.http('POST', '/v1/usage/events', {
      key: app.operatorToken,
      body: {
        events: [
          event({ kind: 'interaction', type: 'launch', userID: 'u1' }),
          event({ kind: 'interaction', type: 'text', userID: 'u1' }),
          event({ kind: 'interaction', type: 'text', userID: 'u2' }, 40),
          event({ kind: 'transcript' }),
          event({ kind: 'transcript' }, 40),
          event({ kind: 'intent', name: 'order' }),
          event({ kind: 'intent', name: 'order' }),
          event({ kind: 'intent', name: 'order' }, 40),
          event({ kind: 'intent', name: 'refund' }),
          event({ kind: 'credit', type: 'llm-input', model: 'gpt-4o-mini', tokens: 100 }),
          event({ kind: 'credit', type: 'llm-output', model: 'gpt-4o-mini', tokens: 50 }),
          event({ kind: 'credit', type: 'llm-input', model: 'llama3', tokens: 30 }, 40),
          // Before the range asked for: not counted.
          event({ kind: 'interaction', type: 'text', userID: 'u3' }, -300),
        ],
      },
    });
    expect(ingested.status, ingested.text).toBe(201);
    // The original's v1 filter: a platform member (accepted and ignored), one project ID or a list.
    const filter = { projectID: p.projectID, startTime: hour.toISOString(), platform: { not: 'voice' } };
    const names = ['interactions', 'sessions', 'top_intents', 'unique_users', 'token_usage'];
    const res = conforms(
      USAGE,
      await call('POST', '/v1/query/usage', { body: { query: names.map((name) => ({ name, filter })) } }),
      200,
    );
    expect(res.result).toEqual([
      { count: 3 },
      { count: 2 },
      {
        intents: [
          { name: 'order', count: 3 },
          { name: 'refund', count: 1 },
        ],
      },
      { count: 2 },
      {
        tokens: [
          { model: 'gpt-4o-mini', count: 150 },
          { model: 'llama3', count: 30 },
        ],
      },
    ]);
    const paged = conforms(
      USAGE,
      await call('POST', '/v1/query/usage', {
        body: { query: [{ name: 'top_intents', filter: { projectID: [p.projectID], limit: 1, offset: 1 } }] },
      }),
      200,
    );
    expect(paged.result).toEqual([{ intents: [{ name: 'refund', count: 1 }] }]);
    const before = conforms(
      USAGE,
      await call('POST', '/v1/query/usage', {
        body: { query: [{ name: 'interactions', filter: { projectID: p.projectID, endTime: hour.toISOString() } }] },
      }),
      200,
    );
    expect(before.result).toEqual([{ count: 1 }]);

    const bad = async (body: unknown, path: string) => {
      const answer = conforms(USAGE, await call('POST', '/v1/query/usage', { body }), 400);
      expect(answer.details.map((d: { path: string }) => d.path)).toContain(path);
      return answer;
    };
    await bad({ query: [] }, 'query');
    await bad({}, 'query');
    await bad({ query: [{ name: 'calls', filter }] }, 'query.0.name');
    const slots = await bad(
      {
        query: [
          { name: 'sessions', filter },
          { name: 'top_slots', filter },
        ],
      },
      'query.1.name',
    );
    expect(slots.details[0].message).toMatch(/slot/);
    await bad({ query: [{ name: 'understood_messages', filter }] }, 'query.0.name');
    await bad({ query: [{ name: 'sessions', filter: { startTime: hour.toISOString() } }] }, 'query.0.filter.projectID');
    await bad({ query: [{ name: 'sessions', filter: { projectID: [] } }] }, 'query.0.filter.projectID');
    await bad(
      { query: [{ name: 'sessions', filter: { ...filter, startTime: '2026-01-01T00:00:00' } }] },
      'query.0.filter.startTime',
    );
    await bad({ query: [{ name: 'top_intents', filter: { ...filter, limit: 0 } }] }, 'query.0.filter.limit');
    await bad({ query: [{ name: 'top_intents', filter: { ...filter, offset: -1 } }] }, 'query.0.filter.offset');

    // A project the key does not reach, alone or in a list, and a missing key: 401 (SPEC.md "Errors").
    conforms(
      USAGE,
      await call('POST', '/v1/query/usage', { key: other.apiKey, body: { query: [{ name: 'sessions', filter }] } }),
      401,
    );
    conforms(
      USAGE,
      await call('POST', '/v1/query/usage', {
        body: { query: [{ name: 'sessions', filter: { projectID: [p.projectID, other.projectID] } }] },
      }),
      401,
    );
    conforms(
      USAGE,
      await call('POST', '/v1/query/usage', {
        body: { query: [{ name: 'sessions', filter: { projectID: unknownId } }] },
      }),
      401,
    );
    const anonymous = conforms(USAGE, await call('POST', '/v1/query/usage', { key: null, body: { query: [] } }), 401);
    expect(anonymous.details).toBeUndefined();
  });
});

it(`drives every documented route and status of ${DOCUMENT} (or lists it as not yet implemented)`, () => {
  expect(uncovered(DOCUMENT, notYetImplemented)).toEqual([]);
  expect(uncoveredStatuses(DOCUMENT, notYetImplemented)).toEqual([]);
});
