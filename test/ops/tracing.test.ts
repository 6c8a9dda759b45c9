import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { helpedEvaluation } from '../helpers/fixtures';
import { createTestDatabase, databaseLanes } from '../helpers/lanes';
import { publish, v2StreamPath } from '../helpers/runtime';
import { startServeProcess, waitUntilReady } from '../helpers/serve-process';
import { useInMemorySpans } from '../helpers/spans';
import { ingestTranscript } from '../transcripts/helpers';
import { useAppWithFakeModel } from './helpers';

/**
 * Tracing: spans of this process go to an in-memory exporter (registered while this test file
 * runs), so their names, attributes and parents can be checked; and a real `parley serve`
 * exports its spans over OTLP/HTTP to a local receiver once OTEL_EXPORTER_OTLP_ENDPOINT is set.
 */

const provider = databaseLanes()[0] ?? 'sqlite';
const exporter = useInMemorySpans();

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const callerSpanId = '00f067aa0ba902b7';
const traceparent = `00-${traceId}-${callerSpanId}-01`;

const spansOf = (id: string) => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === id);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe(`spans [${provider}]`, () => {
  const t = useAppWithFakeModel(provider, {
    RATE_LIMIT_ENABLED: 'false',
    LLM_DEFAULT_MODEL: 'judge',
    LLM_MAX_RETRIES: '0',
    JOB_POLL_MS: '50',
  });

  it('continues the caller’s trace: HTTP request, GraphQL operation and database calls, parent to child', async () => {
    const res = await t.app.http('GET', `/v1/environment/project/${t.project.projectID}`, {
      key: t.project.apiKey,
      headers: { traceparent },
    });
    expect(res.status).toBe(200);
    await expect.poll(() => spansOf(traceId).some((s) => s.kind === SpanKind.SERVER)).toBe(true);
    const spans = spansOf(traceId);
    const http = spans.find((s) => s.kind === SpanKind.SERVER)!;
    expect(http.name).toBe('GET /v1/environment/project/:projectID');
    expect(parentOf(http)).toBe(callerSpanId);
    expect(http.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/v1/environment/project/:projectID',
      'http.response.status_code': 200,
    });
    const operation = spans.find((s) => s.name === 'graphql.query Environments')!;
    expect(operation.attributes).toMatchObject({
      'graphql.operation.type': 'query',
      'graphql.operation.name': 'Environments',
      'parley.rest.route': 'GET /v1/environment/project/:projectID',
    });
    expect(parentOf(operation)).toBe(http.spanContext().spanId);
    const query = spans.find((s) => s.name === 'prisma Environment.findMany')!;
    expect(query.attributes).toMatchObject({ 'db.system.name': provider, 'db.operation.name': 'findMany' });
    expect(parentOf(query)).toBe(operation.spanContext().spanId);
  });

  it('traces a runtime turn and each step it runs, inside the request that started it', async () => {
    await publish(t.app, t.project.projectID, {
      name: 'Traced',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          name: 'Main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'hello', next: 'pause' },
            { id: 'pause', type: 'wait', ms: 10 },
          ],
        },
      ],
    });
    const turnTrace = 'a'.repeat(32);
    const response = await fetch(new URL(v2StreamPath(t.project.projectID, 'traced-user'), t.app.url), {
      method: 'POST',
      headers: {
        authorization: t.app.operatorToken,
        'content-type': 'application/json',
        traceparent: `00-${turnTrace}-${'b'.repeat(16)}-01`,
      },
      body: JSON.stringify({ action: { type: 'launch' } }),
    });
    expect(response.status).toBe(200);
    await response.text();
    await expect.poll(() => spansOf(turnTrace).some((s) => s.name === 'runtime.turn')).toBe(true);
    const spans = spansOf(turnTrace);
    const turn = spans.find((s) => s.name === 'runtime.turn')!;
    expect(turn.attributes).toMatchObject({ 'parley.project.id': t.project.projectID, 'parley.action.type': 'launch' });
    const steps = spans.filter((s) => s.name.startsWith('runtime.step '));
    expect(steps.map((s) => [s.name, s.attributes['parley.step.id']])).toEqual([
      ['runtime.step message', 'hi'],
      ['runtime.step wait', 'pause'],
    ]);
    expect(steps.every((s) => parentOf(s) === turn.spanContext().spanId)).toBe(true);
    expect(spans.some((s) => s.name === 'POST /v2/project/:projectID/user/:userID/interact/stream')).toBe(true);
  });

  it('traces a job attempt as its own trace, with the LLM call it made, model and tokens', async () => {
    const evaluation = await t.app.http('POST', '/v1/transcript-evaluation', {
      key: t.project.apiKey,
      body: helpedEvaluation(t.project.projectID, 'traced'),
    });
    expect(evaluation.status).toBe(201);
    const transcript = await ingestTranscript(t.app, t.project);
    t.fake.script({
      type: 'chat',
      chunks: ['{"value": true, "reason": "ok"}'],
      usage: { prompt_tokens: 50, completion_tokens: 9 },
    });
    await t.app.http('POST', `/v1/transcript/${transcript}/project/${t.project.projectID}/end`, {
      key: t.project.apiKey,
    });
    await expect
      .poll(() => exporter.getFinishedSpans().some((s) => s.name === 'job evaluation'), { timeout: 15_000 })
      .toBe(true);
    const job = exporter.getFinishedSpans().find((s) => s.name === 'job evaluation')!;
    expect(parentOf(job)).toBeUndefined();
    expect(job.attributes).toMatchObject({ 'parley.job.queue': 'evaluation', 'parley.job.attempt': 1 });
    const llm = spansOf(job.spanContext().traceId).find((s) => s.name === 'chat judge')!;
    expect(llm.kind).toBe(SpanKind.CLIENT);
    expect(llm.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai-compatible',
      'gen_ai.request.model': 'judge',
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 50,
      'gen_ai.usage.output_tokens': 9,
    });
  });
});

interface OtlpRequest {
  path: string;
  body: {
    resourceSpans: {
      resource: { attributes: { key: string; value: { stringValue?: string } }[] };
      scopeSpans: { spans: { name: string; traceId: string }[] }[];
    }[];
  };
}

describe(`OTLP export from parley serve [${provider}]`, () => {
  let database: ScratchDatabase;
  let receiver: Server;
  const received: OtlpRequest[] = [];
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        received.push({ path: req.url ?? '', body: JSON.parse(body) });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
  });
  afterAll(async () => {
    receiver?.close();
    await database?.drop();
  });

  it('posts the spans of a served request to <endpoint>/v1/traces as OTLP JSON, flushed at shutdown', async () => {
    const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const server = await startServeProcess({
      DATABASE_URL: database.url,
      LOG_LEVEL: 'warn',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_SERVICE_NAME: 'parley-otlp-test',
      JOBS_ENABLED: 'false',
    });
    const { child } = server;
    try {
      const { url } = server;
      await waitUntilReady(server, '/healthz');
      const exportTrace = 'c'.repeat(32);
      await fetch(`${url}/v1/whoami`, { headers: { traceparent: `00-${exportTrace}-${'d'.repeat(16)}-01` } });
      child.kill('SIGTERM');
      await server.exited;
      const spans = received.flatMap((r) =>
        r.body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)),
      );
      expect(
        received.every((r) => r.path === '/v1/traces'),
        server.stderr(),
      ).toBe(true);
      expect(spans.find((s) => s.name === 'GET /v1/whoami')).toMatchObject({ traceId: exportTrace });
      const serviceNames = received.flatMap((r) =>
        r.body.resourceSpans.flatMap((rs) => rs.resource.attributes.filter((a) => a.key === 'service.name')),
      );
      expect(serviceNames[0]?.value.stringValue).toBe('parley-otlp-test');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
