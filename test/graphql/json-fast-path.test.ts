import { request as httpRequest, type Server } from 'node:http';
import { connect } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createGraphQLJsonHandler, fastPathBlockers, isPlainJsonOperation } from '../../src/graphql/json-fast-path';
import { operationHash } from '../../src/graphql/plugins/protection';
import { routes } from '../../src/rest/routes';
import { type TestApp, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

/**
 * The JSON fast path of POST /graphql (src/graphql/json-fast-path.ts) against Yoga's own handler, on
 * the same Yoga instance: every request is sent to two small servers, one that serves it as
 * src/app.ts does (the fast path, falling back to Yoga for what fails before the operation runs)
 * and one that hands everything to Yoga, and the answers must be the same: status, media type,
 * rate-limit headers and body. Each case also says whether it must take the fast path or fall back.
 */

interface Answer {
  status: number;
  headers: Record<string, string | null>;
  body: unknown;
}

const comparedHeaders = ['content-type', 'accept', 'retry-after', 'x-ratelimit-limit', 'x-ratelimit-remaining'];

async function send(url: string, init: { headers: Record<string, string>; body: string }): Promise<Answer> {
  const res = await fetch(`${url}/graphql`, { method: 'POST', headers: init.headers, body: init.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (an empty 406): compared as text.
  }
  return {
    status: res.status,
    headers: Object.fromEntries(comparedHeaders.map((name) => [name, res.headers.get(name)])),
    body,
  };
}

/** Two servers over the app's Yoga instance: the fast path (counting fallbacks) and Yoga alone. */
function useTwoServers(holder: { app: TestApp }) {
  const state = { fastUrl: '', yogaUrl: '', fallbacks: 0, servers: [] as Server[] };
  beforeAll(async () => {
    const yoga = holder.app.running.parley.yoga;
    const raw = express.raw({ type: () => true, limit: '1mb' });
    const handler = createGraphQLJsonHandler(yoga, (req, res) => {
      state.fallbacks++;
      return yoga(req, res);
    });
    const fast = express();
    fast.use(raw, (req, res, next) => {
      if (isPlainJsonOperation(req, yoga.graphqlEndpoint) && Buffer.isBuffer(req.body))
        void handler(req, res, req.body, next);
      else yoga(req, res);
    });
    const plain = express();
    plain.use(raw, (req, res) => yoga(req, res));
    for (const [app, key] of [
      [fast, 'fastUrl'],
      [plain, 'yogaUrl'],
    ] as const) {
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      state[key] = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      state.servers.push(server);
    }
  });
  afterAll(async () => {
    await Promise.all(state.servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });
  /** Sends one request to both; returns both answers and whether the fast server fell back to Yoga. */
  const both = async (headers: Record<string, string>, body: string) => {
    const before = state.fallbacks;
    const viaFast = await send(state.fastUrl, { headers, body });
    const fellBack = state.fallbacks > before;
    const viaYoga = await send(state.yogaUrl, { headers, body });
    return { viaFast, viaYoga, fellBack };
  };
  return Object.assign(both, { state });
}

/**
 * The bytes of the answer to a POST /graphql sent on a socket of its own, as they arrive, but for
 * the `Date` line (the one header whose value depends on when it is answered).
 */
function rawAnswer(url: string, headers: Record<string, string>, body: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const head = [
    'POST /graphql HTTP/1.1',
    `Host: ${hostname}:${port}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ].join('\r\n');
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname, () => socket.write(`${head}\r\n\r\n${body}`));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () =>
      resolve(
        Buffer.concat(chunks)
          .toString('latin1')
          .replace(/\r\nDate: [^\r]*/i, ''),
      ),
    );
  });
}

const viewer = '{ viewer { kind projectID } }';
const json = (value: unknown) => JSON.stringify(value);

describeEachDatabase('POST /graphql JSON fast path', (provider) => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_ENABLED: 'false' } });
  const both = useTwoServers(t);
  let key = '';
  beforeAll(async () => {
    key = (await t.app.createProject()).apiKey;
  });

  it('is on for the application pipeline with GraphiQL', () => {
    expect(t.app.config.GRAPHIQL).toBe(true);
    expect(fastPathBlockers(t.app.running.parley.yoga, { graphiql: t.app.config.GRAPHIQL })).toBeNull();
  });

  const cases: { name: string; headers?: Record<string, string>; body: () => string; fallsBack: boolean }[] = [
    { name: 'a query', body: () => json({ query: viewer }), fallsBack: false },
    {
      name: 'a query with variables and an operation name',
      body: () =>
        json({
          query: 'query A { viewer { kind } } query B($n: Int) { viewer { projectID } }',
          operationName: 'A',
          variables: {},
        }),
      fallsBack: false,
    },
    {
      name: 'JSON with a charset parameter',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: () => json({ query: viewer }),
      fallsBack: false,
    },
    { name: 'a field that does not exist', body: () => json({ query: '{ nope }' }), fallsBack: false },
    {
      name: 'a field that does not exist, for a graphql-response+json client',
      headers: { accept: 'application/graphql-response+json' },
      body: () => json({ query: '{ nope }' }),
      fallsBack: false,
    },
    { name: 'a syntax error', body: () => json({ query: '{ viewer { ' }), fallsBack: false },
    {
      name: 'a variable of the wrong type',
      body: () =>
        json({
          query: 'query ($n: Int!) { knowledgeBaseDocuments(limit: $n) { __typename } }',
          variables: { n: 'ten' },
        }),
      fallsBack: false,
    },
    {
      name: 'an unknown operation name',
      body: () => json({ query: viewer, operationName: 'Nope' }),
      fallsBack: false,
    },
    {
      name: 'a mutation with a missing argument',
      body: () => json({ query: 'mutation { createProject { id } }' }),
      fallsBack: false,
    },
    { name: 'introspection', body: () => json({ query: '{ __schema { queryType { name } } }' }), fallsBack: false },
    {
      name: 'an Accept that no result processor serves',
      headers: { accept: 'text/html' },
      body: () => json({ query: viewer }),
      fallsBack: false,
    },
    { name: 'a body that is not JSON', body: () => '{"query": ', fallsBack: true },
    { name: 'a JSON null body', body: () => 'null', fallsBack: true },
    { name: 'a JSON string body', body: () => '"{ viewer { kind } }"', fallsBack: true },
    { name: 'a batch (batching is off)', body: () => json([{ query: viewer }, { query: viewer }]), fallsBack: true },
    {
      name: 'a parameter GraphQL over HTTP does not know',
      body: () => json({ query: viewer, foo: 1 }),
      fallsBack: true,
    },
    { name: 'variables that are not an object', body: () => json({ query: viewer, variables: 'x' }), fallsBack: true },
    { name: 'no query at all', body: () => json({ variables: {} }), fallsBack: true },
  ];

  for (const c of cases) {
    it(`answers ${c.name} as Yoga does`, async () => {
      const headers = {
        'content-type': 'application/json',
        authorization: key,
        'x-request-id': 'fast-path-test',
        ...c.headers,
      };
      const { viaFast, viaYoga, fellBack } = await both(headers, c.body());
      expect(viaFast).toEqual(viaYoga);
      expect(fellBack).toBe(c.fallsBack);
    });
  }

  it('answers a request without a key, and with a wrong key, as Yoga does', async () => {
    for (const authorization of [undefined, 'pk_nope.nope.nope']) {
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'fast-path-test' };
      if (authorization) headers.authorization = authorization;
      const { viaFast, viaYoga, fellBack } = await both(headers, json({ query: viewer }));
      expect(viaFast).toEqual(viaYoga);
      expect(fellBack).toBe(false);
    }
  });

  it('returns the data of a query', async () => {
    const { viaFast } = await both({ 'content-type': 'application/json', authorization: key }, json({ query: viewer }));
    expect(viaFast.status).toBe(200);
    expect(viaFast.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(viaFast.body).toEqual({ data: { viewer: { kind: 'key', projectID: expect.any(String) } } });
  });

  it('writes a successful result itself, without a Fetch Response, in the bytes Yoga writes', async () => {
    const yoga = t.app.running.parley.yoga;
    const fetchAPI = yoga.fetchAPI as { Response: typeof Response };
    const FetchResponse = fetchAPI.Response;
    let made = 0;
    const Counting = class extends FetchResponse {
      constructor(...args: ConstructorParameters<typeof Response>) {
        super(...args);
        made++;
      }
    };
    const successes: { headers: Record<string, string>; body: string }[] = [
      { headers: {}, body: json({ query: viewer }) },
      { headers: { Accept: 'application/graphql-response+json' }, body: json({ query: viewer }) },
      { headers: { Accept: 'application/json' }, body: json({ query: '{ viewer { kind } }', variables: {} }) },
    ];
    for (const c of successes) {
      const headers = { 'Content-Type': 'application/json', Authorization: key, ...c.headers };
      fetchAPI.Response = Counting;
      let viaFast: string;
      try {
        viaFast = await rawAnswer(both.state.fastUrl, headers, c.body);
      } finally {
        fetchAPI.Response = FetchResponse;
      }
      expect(made, c.body).toBe(0);
      expect(viaFast).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(viaFast).toBe(await rawAnswer(both.state.yogaUrl, headers, c.body));
    }
    // A result with errors is still answered through the result processor's Response, as Yoga answers it.
    const failing = { 'Content-Type': 'application/json', Authorization: key };
    fetchAPI.Response = Counting;
    let viaFast: string;
    try {
      viaFast = await rawAnswer(both.state.fastUrl, failing, json({ query: '{ nope }' }));
    } finally {
      fetchAPI.Response = FetchResponse;
    }
    expect(made).toBeGreaterThan(0);
    expect(viaFast).toBe(await rawAnswer(both.state.yogaUrl, failing, json({ query: '{ nope }' })));
  });

  it('takes only POSTs of JSON to the endpoint itself, without a stream in Accept or a compressed body', () => {
    const req = (method: string, path: string, headers: Record<string, string>) =>
      ({ method, path, headers }) as unknown as express.Request;
    const jsonType = { 'content-type': 'application/json' };
    expect(isPlainJsonOperation(req('POST', '/graphql', jsonType), '/graphql')).toBe(true);
    expect(
      isPlainJsonOperation(req('POST', '/graphql', { 'content-type': 'application/graphql+json' }), '/graphql'),
    ).toBe(true);
    expect(isPlainJsonOperation(req('GET', '/graphql', jsonType), '/graphql')).toBe(false);
    expect(isPlainJsonOperation(req('POST', '/graphql/stream', jsonType), '/graphql')).toBe(false);
    expect(isPlainJsonOperation(req('POST', '/graphql', { 'content-type': 'text/plain' }), '/graphql')).toBe(false);
    expect(
      isPlainJsonOperation(req('POST', '/graphql', { 'content-type': 'multipart/form-data; boundary=x' }), '/graphql'),
    ).toBe(false);
    expect(
      isPlainJsonOperation(req('POST', '/graphql', { ...jsonType, accept: 'text/event-stream' }), '/graphql'),
    ).toBe(false);
    expect(isPlainJsonOperation(req('POST', '/graphql', { ...jsonType, accept: 'multipart/mixed' }), '/graphql')).toBe(
      false,
    );
    expect(isPlainJsonOperation(req('POST', '/graphql', { ...jsonType, 'content-encoding': 'gzip' }), '/graphql')).toBe(
      false,
    );
  });

  it('leaves GET with a query string, other media types and oversized bodies to the rest of the application', async () => {
    const get = await t.app.http('GET', '/graphql', { key, query: { query: viewer } });
    expect(get.status).toBe(200);
    expect(get.body.data.viewer.kind).toBe('key');
    const text = await t.app.http('POST', '/graphql', {
      key,
      body: json({ query: viewer }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    const large = await t.app.http('POST', '/graphql', {
      key,
      body: json({ query: viewer, variables: { pad: 'x'.repeat(t.app.config.BODY_LIMIT_BYTES) } }),
    });
    expect(large.status).toBe(413);
    expect(large.body).toMatchObject({ statusCode: 413, errorCode: 'PAYLOAD_TOO_LARGE' });
    const malformed = await t.app.http('POST', '/graphql', { key, body: '{"query": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.errors[0].extensions.code).toBe('MALFORMED_JSON');
  });
});

describeEachDatabase('POST /graphql JSON fast path, introspection off', (provider) => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_ENABLED: 'false', GRAPHQL_INTROSPECTION: 'false' } });
  const both = useTwoServers(t);

  it('refuses introspection as Yoga does (the hook that turns it off runs while the request is parsed)', async () => {
    const { apiKey } = await t.app.createProject();
    const headers = { 'content-type': 'application/json', authorization: apiKey, 'x-request-id': 'fast-path-test' };
    const { viaFast, viaYoga, fellBack } = await both(headers, json({ query: '{ __schema { queryType { name } } }' }));
    expect(fellBack).toBe(false);
    expect(viaFast).toEqual(viaYoga);
    expect(viaFast.status).toBe(200);
    expect(JSON.stringify(viaFast.body)).toMatch(/introspection/i);
    expect((viaFast.body as { data?: unknown }).data).toBeUndefined();
  });
});

describeEachDatabase('POST /graphql JSON fast path, persisted operations only', (provider) => {
  const t = useTestApp(provider, {
    env: { RATE_LIMIT_ENABLED: 'false', GRAPHQL_PERSISTED_ONLY: 'true', NODE_ENV: 'production' },
  });
  const both = useTwoServers(t);

  it('is on in production, where GraphiQL is off', () => {
    expect(t.app.config.GRAPHIQL).toBe(false);
    expect(fastPathBlockers(t.app.running.parley.yoga, { graphiql: false })).toBeNull();
  });

  it('runs a persisted operation by its hash and refuses what is not one, as Yoga does', async () => {
    const { apiKey } = await t.app.createProject();
    const headers = { 'content-type': 'application/json', authorization: apiKey, 'x-request-id': 'fast-path-test' };
    const route = routes.find((r) => r.operation.startsWith('query Viewer'));
    if (!route) throw new Error('the Viewer route is gone');
    const persisted = (hash: string) => json({ extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });

    const byHash = await both(headers, persisted(operationHash(route.operation)));
    expect(byHash.fellBack).toBe(false);
    expect(byHash.viaFast).toEqual(byHash.viaYoga);
    expect(byHash.viaFast.status).toBe(200);
    expect((byHash.viaFast.body as { data: { viewer: { kind: string } } }).data.viewer.kind).toBe('key');

    const arbitrary = await both(headers, json({ query: viewer }));
    expect(arbitrary.fellBack).toBe(true);
    expect(arbitrary.viaFast).toEqual(arbitrary.viaYoga);
    expect(arbitrary.viaFast.status).toBe(400);

    const unknown = await both(headers, persisted('0'.repeat(64)));
    expect(unknown.fellBack).toBe(true);
    expect(unknown.viaFast).toEqual(unknown.viaYoga);
    expect(unknown.viaFast.status).toBe(400);
  });
});

describeEachDatabase('POST /graphql JSON fast path, rate limited', (provider) => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_DEFAULT: '2/60' } });
  const both = useTwoServers(t);

  it('answers an operation over its limit with 429 and the rate-limit headers, as Yoga does', async () => {
    const { apiKey } = await t.app.createProject();
    const headers = { 'content-type': 'application/json', authorization: apiKey, 'x-request-id': 'fast-path-test' };
    // Both servers spend from the same budget: the first pair uses it up, the second is over it.
    await both(headers, json({ query: viewer }));
    const { viaFast, viaYoga, fellBack } = await both(headers, json({ query: viewer }));
    expect(fellBack).toBe(false);
    expect(viaFast.status).toBe(429);
    expect(viaYoga.status).toBe(429);
    expect(viaFast.headers['retry-after']).toMatch(/^\d+$/);
    expect(viaFast.headers['x-ratelimit-limit']).toBe(viaYoga.headers['x-ratelimit-limit']);
    expect(viaFast.headers['content-type']).toBe(viaYoga.headers['content-type']);
    // The message counts the seconds to wait, which may differ by one between the two requests.
    const codeOf = (a: typeof viaFast) =>
      (a.body as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code;
    expect(codeOf(viaFast)).toBe('RATE_LIMITED');
    expect(codeOf(viaYoga)).toBe('RATE_LIMITED');
  });
});

/** Sends a raw POST /graphql: the body with its length declared, or chunked; `abortAfter` bytes, then the socket is cut. */
function rawPost(
  url: string,
  headers: Record<string, string>,
  body: string,
  mode: 'declared' | 'chunked' | { abortAfter: number },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string } | null> {
  return new Promise((resolve, reject) => {
    const target = new URL('/graphql', url);
    const req = httpRequest(target, {
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        ...headers,
        ...(mode === 'chunked' ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
      },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    if (typeof mode === 'object') {
      req.on('error', () => resolve(null));
      req.write(body.slice(0, mode.abortAfter), () => {
        req.destroy();
        resolve(null);
      });
      return;
    }
    req.on('error', reject);
    if (mode === 'chunked') {
      // Two writes without a declared length: Node sends them with Transfer-Encoding: chunked.
      const half = Math.floor(body.length / 2);
      req.write(body.slice(0, half));
      req.end(body.slice(half));
    } else req.end(body);
  });
}

describeEachDatabase('POST /graphql JSON bodies through the whole application', (provider) => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_ENABLED: 'false', BODY_LIMIT_BYTES: '4096' } });
  let key = '';
  beforeAll(async () => {
    key = (await t.app.createProject()).apiKey;
  });
  const counted = async (status: string): Promise<number> => {
    const metrics = await t.app.http('GET', '/metrics');
    const line = (metrics.text as string)
      .split('\n')
      .find(
        (l) =>
          l.startsWith('parley_http_requests_total{') &&
          l.includes('route="/graphql"') &&
          l.includes(`status="${status}"`) &&
          l.includes('method="POST"'),
      );
    return line ? Number(line.split(' ').pop()) : 0;
  };

  it('reads a body of declared length or chunked, runs the edge middleware, and answers the same', async () => {
    const body = json({ query: viewer });
    const before = await counted('200');
    const answers = [];
    for (const mode of ['declared', 'chunked'] as const) {
      const res = await rawPost(t.app.url, { authorization: key, 'x-request-id': `req-${mode}` }, body, mode);
      expect(res, mode).not.toBeNull();
      expect(res!.status, mode).toBe(200);
      // The request ID, the security headers and the metrics are the edge's, on either path.
      expect(res!.headers['x-request-id'], mode).toBe(`req-${mode}`);
      expect(res!.headers['content-security-policy'], mode).toMatch(/default-src 'none'/);
      expect(res!.headers['x-content-type-options'], mode).toBe('nosniff');
      answers.push(JSON.parse(res!.text));
    }
    expect(answers[0]).toEqual({ data: { viewer: { kind: 'key', projectID: expect.any(String) } } });
    expect(answers[1]).toEqual(answers[0]);
    expect(await counted('200')).toBe(before + 2);
  });

  it("answers before Express's router, and leaves every other request to it", async () => {
    const router = (t.app.running.parley.app as unknown as { router: { handle: (...args: unknown[]) => unknown } })
      .router;
    const handle = vi.spyOn(router, 'handle');
    try {
      const res = await rawPost(
        t.app.url,
        { authorization: key, 'x-request-id': 'before-router' },
        json({ query: viewer }),
        'declared',
      );
      expect(res!.status).toBe(200);
      expect(res!.headers['x-request-id']).toBe('before-router');
      expect(res!.headers['content-security-policy']).toMatch(/default-src 'none'/);
      expect(handle).not.toHaveBeenCalled();
      // Not the fast path's: a GET, another media type, another path.
      expect((await t.app.http('GET', '/healthz')).status).toBe(200);
      const text = await rawPost(t.app.url, { authorization: key, 'content-type': 'text/plain' }, 'x', 'declared');
      expect(text!.status).toBe(415);
      expect((await t.app.http('POST', '/v1/nope')).status).toBe(404);
      expect(handle).toHaveBeenCalledTimes(3);
    } finally {
      handle.mockRestore();
    }
  });

  // Also the fast path's error route: the 413 is body-parser's error, handed to the application's error handler.
  it('answers a body over the limit with 413, declared or chunked, and a body of exactly the limit', async () => {
    const over = json({ query: viewer, variables: { pad: 'x'.repeat(4096) } });
    for (const mode of ['declared', 'chunked'] as const) {
      const res = await rawPost(t.app.url, { authorization: key }, over, mode);
      expect(res!.status, mode).toBe(413);
      expect(JSON.parse(res!.text), mode).toMatchObject({ statusCode: 413, errorCode: 'PAYLOAD_TOO_LARGE' });
    }
    const bare = json({ query: viewer, variables: { pad: '' } });
    const exact = json({ query: viewer, variables: { pad: 'x'.repeat(4096 - Buffer.byteLength(bare)) } });
    expect(Buffer.byteLength(exact)).toBe(4096);
    const res = await rawPost(t.app.url, { authorization: key }, exact, 'declared');
    expect(res!.status).toBe(200);
    expect(JSON.parse(res!.text).data.viewer.kind).toBe('key');
  });

  it('counts a request whose client goes away mid-body as 499, and goes on serving', async () => {
    const before = await counted('499');
    const body = json({ query: viewer, variables: { pad: 'x'.repeat(1000) } });
    await rawPost(t.app.url, { authorization: key }, body, { abortAfter: 100 });
    await expect.poll(() => counted('499'), { timeout: 10_000, interval: 50 }).toBe(before + 1);
    const after = await t.app.gql(viewer, {}, key);
    expect(after.status).toBe(200);
    expect(after.body.data.viewer.kind).toBe('key');
  });
});
