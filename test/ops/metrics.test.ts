import { describe, expect, it } from 'vitest';
import { enqueueJob } from '../../src/jobs/queue';
import { newId } from '../../src/lib/ids';
import { useTestApp } from '../helpers/app';
import { helpedEvaluation } from '../helpers/fixtures';
import { databaseLanes } from '../helpers/lanes';
import { publish, v2StreamPath } from '../helpers/runtime';
import { ingestTranscript } from '../transcripts/helpers';
import { useAppWithFakeModel } from './helpers';

/**
 * GET /metrics over real HTTP: the token, and every family of docs/operations.md moving with real
 * traffic: HTTP by route pattern, GraphQL by operation, open SSE streams, turns, jobs, database,
 * LLM calls (through the fake OpenAI-compatible server) and ingested usage events.
 */

const provider = databaseLanes()[0] ?? 'sqlite';
const metricsToken = 'metrics-token-0123456789';

/** The value of one sample: `name{labels}` where every given label matches; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (.+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries(
      [...(match[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      total += Number(match[4]);
      found = true;
    }
  }
  return found ? total : 0;
}

describe(`metrics [${provider}]`, () => {
  const t = useAppWithFakeModel(provider, {
    METRICS_TOKEN: metricsToken,
    RATE_LIMIT_ENABLED: 'false',
    LLM_DEFAULT_MODEL: 'judge',
    LLM_MAX_RETRIES: '0',
    LLM_PRICES: '{"judge": {"input": 1, "output": 2}}',
    JOB_POLL_MS: '50',
  });

  const scrape = async () => {
    const res = await t.app.http('GET', '/metrics', { headers: { authorization: `Bearer ${metricsToken}` } });
    expect(res.status).toBe(200);
    return res.text;
  };

  it('serves the Prometheus text format behind METRICS_TOKEN', async () => {
    const anonymous = await t.app.http('GET', '/metrics');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toMatchObject({ statusCode: 401, errorCode: 'UNAUTHENTICATED' });
    expect(
      (await t.app.http('GET', '/metrics', { headers: { authorization: 'Bearer wrong-token-0000000' } })).status,
    ).toBe(401);
    const res = await t.app.http('GET', '/metrics', { headers: { authorization: `Bearer ${metricsToken}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toContain('# TYPE parley_http_requests_total counter');
    expect(res.text).toContain('parley_process_cpu_user_seconds_total');
  });

  it('counts HTTP requests by route pattern and status, never by raw path', async () => {
    const missing = newId();
    expect((await t.app.http('GET', `/v1/transcript/${missing}`, { key: t.project.apiKey })).status).toBe(404);
    // Refused before routing (malformed JSON), still counted under its route.
    expect(
      (await t.app.http('POST', '/v1/environment', { key: t.project.apiKey, body: '{"projectID": ' })).status,
    ).toBe(400);
    expect((await t.app.http('GET', `/nothing/${missing}`)).status).toBe(404);
    const text = await scrape();
    expect(
      sample(text, 'parley_http_requests_total', {
        method: 'GET',
        route: '/v1/transcript/:transcriptID',
        status: '404',
      }),
    ).toBe(1);
    expect(
      sample(text, 'parley_http_requests_total', { method: 'POST', route: '/v1/environment', status: '400' }),
    ).toBe(1);
    expect(sample(text, 'parley_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'parley_http_request_duration_seconds_count', { route: '/v1/transcript/:transcriptID' })).toBe(
      1,
    );
    expect(text).not.toContain(missing);
  });

  it('counts GraphQL operations by name, type and outcome, and database operations by model', async () => {
    await t.app.gql('query MetricsProbe { projects { id } }');
    await t.app.gql('query MetricsProbe { project(id: "000000000000000000000000") { id } }');
    await t.app.http('GET', `/v1/environment/project/${t.project.projectID}`, { key: t.project.apiKey });
    const text = await scrape();
    expect(
      sample(text, 'parley_graphql_operations_total', {
        operation_name: 'MetricsProbe',
        operation_type: 'query',
        outcome: 'ok',
      }),
    ).toBe(1);
    expect(sample(text, 'parley_graphql_operations_total', { operation_name: 'MetricsProbe', outcome: 'error' })).toBe(
      1,
    );
    // REST routes run named operations through the same pipeline.
    expect(sample(text, 'parley_graphql_operations_total', { operation_name: 'Environments' })).toBe(1);
    expect(sample(text, 'parley_graphql_operation_duration_seconds_count', { operation_name: 'MetricsProbe' })).toBe(2);
    expect(
      sample(text, 'parley_db_query_duration_seconds_count', { model: 'Project', operation: 'findMany' }),
    ).toBeGreaterThan(0);
    // Statements on the driver (here the job runner's claim, each poll) by their call's label.
    expect(
      sample(text, 'parley_db_query_duration_seconds_count', { model: 'driver', operation: 'jobs.claim' }),
    ).toBeGreaterThan(0);
  });

  it('gauges open SSE streams while they are open, and counts turns with their duration', async () => {
    await publish(t.app, t.project.projectID, {
      name: 'Slow',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          name: 'Main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'one moment', next: 'pause' },
            { id: 'pause', type: 'wait', ms: 1500, next: 'bye' },
            { id: 'bye', type: 'message', message: 'done' },
          ],
        },
      ],
    });
    const subscription = new AbortController();
    const sub = await fetch(`${t.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: t.app.operatorToken, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription { auditEvents { action } }' }),
      signal: subscription.signal,
    });
    expect(sub.status).toBe(200);
    const turn = await fetch(new URL(v2StreamPath(t.project.projectID, 'metrics-user'), t.app.url), {
      method: 'POST',
      headers: { authorization: t.app.operatorToken, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ action: { type: 'launch' } }),
    });
    const reader = turn.body!.getReader();
    expect(turn.status).toBe(200);
    await reader.read();
    const during = await scrape();
    expect(sample(during, 'parley_sse_streams_open', { kind: 'rest' })).toBe(1);
    expect(sample(during, 'parley_sse_streams_open', { kind: 'graphql' })).toBe(1);
    while (!(await reader.read()).done) {}
    subscription.abort();
    await expect.poll(async () => sample(await scrape(), 'parley_sse_streams_open', { kind: 'graphql' })).toBe(0);
    const after = await scrape();
    expect(sample(after, 'parley_sse_streams_open', { kind: 'rest' })).toBe(0);
    expect(sample(after, 'parley_runtime_turns_total', { outcome: 'completed' })).toBe(1);
    expect(sample(after, 'parley_runtime_turn_duration_seconds_count', { outcome: 'completed' })).toBe(1);
    expect(sample(after, 'parley_runtime_turn_duration_seconds_sum', { outcome: 'completed' })).toBeGreaterThanOrEqual(
      1.4,
    );
    expect(
      sample(after, 'parley_http_requests_total', {
        route: '/v2/project/:projectID/user/:userID/interact/stream',
        status: '200',
      }),
    ).toBe(1);
  });

  it('reports job queue depth, age and failures from the database, and this instance’s job runs', async () => {
    const db = t.app.services.db.prisma;
    await enqueueJob(db, { queue: 'metrics-probe', payload: {}, runAt: new Date(Date.now() + 3_600_000) });
    await db.job.create({
      data: {
        id: newId(),
        queue: 'metrics-probe',
        payload: {},
        status: 'failed',
        runAt: new Date(),
        finishedAt: new Date(),
      },
    });
    // A cached reading may be up to 5 s old.
    await expect
      .poll(
        async () => sample(await scrape(), 'parley_job_queue_depth', { queue: 'metrics-probe', status: 'queued' }),
        { timeout: 10_000 },
      )
      .toBe(1);
    const text = await scrape();
    expect(sample(text, 'parley_jobs_failed', { queue: 'metrics-probe' })).toBe(1);
    expect(sample(text, 'parley_job_oldest_queued_age_seconds', { queue: 'metrics-probe' })).toBeGreaterThanOrEqual(0);
  });

  it('counts LLM calls, tokens and cost per model, and the evaluation job that made them', async () => {
    const evaluation = await t.app.http('POST', '/v1/transcript-evaluation', {
      key: t.project.apiKey,
      body: helpedEvaluation(t.project.projectID, 'helped'),
    });
    expect(evaluation.status).toBe(201);
    const transcript = await ingestTranscript(t.app, t.project);
    t.fake.script({
      type: 'chat',
      chunks: ['{"value": true, ', '"reason": "yes"}'],
      usage: { prompt_tokens: 100, completion_tokens: 20 },
    });
    const end = await t.app.http('POST', `/v1/transcript/${transcript}/project/${t.project.projectID}/end`, {
      key: t.project.apiKey,
    });
    expect(end.body.evaluationsQueued).toBe(1);
    await expect
      .poll(async () => sample(await scrape(), 'parley_llm_calls_total', { model: 'judge', outcome: 'ok' }), {
        timeout: 15_000,
      })
      .toBe(1);
    const text = await scrape();
    const labels = { provider: 'openai-compatible', model: 'judge' };
    expect(sample(text, 'parley_llm_tokens_total', { ...labels, direction: 'input' })).toBe(100);
    expect(sample(text, 'parley_llm_tokens_total', { ...labels, direction: 'output' })).toBe(20);
    expect(sample(text, 'parley_llm_cost_total', labels)).toBeCloseTo((100 * 1 + 20 * 2) / 1_000_000, 10);
    expect(sample(text, 'parley_llm_call_duration_seconds_count', { ...labels, kind: 'chat' })).toBe(1);
    await expect
      .poll(async () => sample(await scrape(), 'parley_job_runs_total', { queue: 'evaluation', outcome: 'ok' }))
      .toBe(1);
  });

  it('counts ingested usage events, recorded and duplicate', async () => {
    const key = (await t.app.createProject({ scopes: ['analytics:write'] })).apiKey;
    const ingestor = await t.app.services.db.prisma.apiKey.findFirst({ orderBy: { createdAt: 'desc' } });
    expect(ingestor).toBeTruthy();
    const project = ingestor!.projectId!;
    const event = (eventID: string) => ({
      projectID: project,
      environment: 'production',
      kind: 'intent',
      name: 'x',
      eventID,
    });
    const first = await t.app.http('POST', '/v1/usage/events', { key, body: { events: [event('e1'), event('e2')] } });
    expect(first.status).toBe(201);
    await t.app.http('POST', '/v1/usage/events', { key, body: { events: [event('e2')] } });
    const text = await scrape();
    expect(sample(text, 'parley_usage_events_ingested_total', { result: 'recorded' })).toBe(2);
    expect(sample(text, 'parley_usage_events_ingested_total', { result: 'duplicate' })).toBe(1);
  });
});

describe(`metrics switched off [${provider}]`, () => {
  const t = useTestApp(provider, { env: { METRICS_ENABLED: 'false' } });
  it('has no /metrics route', async () => {
    expect((await t.app.http('GET', '/metrics')).status).toBe(404);
  });
});
