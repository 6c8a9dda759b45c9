import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fieldGroupsOf, groupOfPath } from '../../src/ops/route-groups';
import { routes } from '../../src/rest/routes';
import { startTestApp, type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { createTestDatabase, databaseLanes, describeWithRedis } from '../helpers/lanes';

/**
 * Rate limits over real HTTP: per key and group, per client address without a valid key, GraphQL
 * operations in the group of their fields, the headers and body of a 429, what is never limited,
 * and two instances sharing one Redis that together enforce one limit.
 */

const provider = databaseLanes()[0] ?? 'sqlite';

const limitedEnv = {
  RATE_LIMIT_DEFAULT: '4/60',
  RATE_LIMIT_USAGE: '3/60',
  RATE_LIMIT_RUNTIME: '2/60',
};

const usageBody = (projectID: string) => ({ data: { name: 'interactions', filter: { projectID } } });

function expectRateLimited(res: { status: number; headers: Headers; body: unknown }, limit: number) {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({
    statusCode: 429,
    statusText: 'Too Many Requests',
    errorCode: 'RATE_LIMITED',
    message: expect.stringMatching(/^Too many requests/),
  });
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(res.headers.get('x-ratelimit-limit')).toBe(String(limit));
  expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
  const reset = Number(res.headers.get('x-ratelimit-reset'));
  expect(reset).toBeGreaterThan(Date.now() / 1000 - 1);
  expect(reset).toBeLessThanOrEqual(Date.now() / 1000 + 61);
}

describe(`rate limits in memory [${provider}]`, () => {
  const t = useTestApp(provider, { env: limitedEnv });

  it('groups routes by path pattern, and GraphQL fields by the routes that run them', () => {
    expect(groupOfPath('/v2/query/usage')).toBe('usage');
    expect(groupOfPath('/v2/project/abc/user/u1/interact/stream')).toBe('runtime');
    expect(groupOfPath('/v2beta1/interact/abc/production/stream')).toBe('runtime');
    expect(groupOfPath('/v1/knowledge-base/docs/upload')).toBe('kb-upload');
    expect(groupOfPath('/v1/knowledge-base/docs/upload/table')).toBe('kb-upload');
    expect(groupOfPath('/v1/knowledge-base/query')).toBe('kb-query');
    expect(groupOfPath('/knowledge-base/query')).toBe('kb-query');
    expect(groupOfPath('/v1/knowledge-base/docs/0123456789abcdef01234567/upload')).toBe('kb-upload');
    expect(groupOfPath('/v1/knowledge-base/docs/0123456789abcdef01234567/upload/url')).toBe('kb-upload');
    expect(groupOfPath('/v1/knowledge-base/docs/upload/url')).toBe('kb-upload');
    expect(groupOfPath('/v1/knowledge-base/docs/0123456789abcdef01234567')).toBe('default');
    expect(groupOfPath('/v1/transcript/abc')).toBe('default');
    const fields = fieldGroupsOf(routes);
    expect(fields.get('usage')).toBe('usage');
    expect(fields.get('interact')).toBe('runtime');
    expect(fields.get('uploadKnowledgeBaseFile')).toBe('kb-upload');
    expect(fields.get('uploadKnowledgeBaseUrl')).toBe('kb-upload');
    expect(fields.get('replaceKnowledgeBaseDocument')).toBe('kb-upload');
    expect(fields.get('replaceKnowledgeBaseUrl')).toBe('kb-upload');
    expect(fields.get('knowledgeBaseQuery')).toBe('kb-query');
    expect(fields.get('knowledgeBaseAnswer')).toBe('kb-query');
    expect(fields.get('transcripts')).toBeUndefined();
  });

  it('answers 429 with Retry-After, the X-RateLimit headers and the error body once a key used its budget', async () => {
    const p = await t.app.createProject();
    const other = await t.app.createProject();
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
      statuses.push(res.status);
      expect(res.headers.get('x-ratelimit-limit')).toBe('4');
      expect(res.headers.get('x-ratelimit-remaining')).toBe(String(3 - i));
    }
    expect(statuses).toEqual([200, 200, 200, 200]);
    expectRateLimited(await t.app.http('GET', '/v1/whoami', { key: p.apiKey }), 4);
    // Every route of the group shares the budget; another key has its own.
    expectRateLimited(await t.app.http('GET', `/v1/environment/project/${p.projectID}`, { key: p.apiKey }), 4);
    expect((await t.app.http('GET', '/v1/whoami', { key: other.apiKey })).status).toBe(200);
  });

  it('keeps a budget per group: usage queries and runtime turns count apart from the rest', async () => {
    const p = await t.app.createProject();
    for (let i = 0; i < 3; i++) {
      const res = await t.app.http('POST', '/v2/query/usage', { key: p.apiKey, body: usageBody(p.projectID) });
      expect(res.status).toBe(200);
    }
    expectRateLimited(await t.app.http('POST', '/v2/query/usage', { key: p.apiKey, body: usageBody(p.projectID) }), 3);
    // The default group is untouched.
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
    // Runtime turns: refused by the limiter before any turn starts (no agent is even published).
    const turn = (user: string) =>
      t.app.http('POST', `/v2/project/${p.projectID}/user/${user}/interact`, {
        key: p.apiKey,
        body: { action: { type: 'launch' } },
      });
    expect((await turn('a')).status).toBe(404);
    expect((await turn('b')).status).toBe(404);
    expectRateLimited(await turn('c'), 2);
  });

  it('counts a GraphQL operation in the group of its fields, together with the REST routes of that group', async () => {
    const p = await t.app.createProject();
    const usageQuery = `query($p: String!) { usage(name: interactions, filter: { projectID: $p }) { __typename } }`;
    for (let i = 0; i < 2; i++) {
      expect(
        (await t.app.http('POST', '/v2/query/usage', { key: p.apiKey, body: usageBody(p.projectID) })).status,
      ).toBe(200);
    }
    const viaGraphql = await t.app.gql(usageQuery, { p: p.projectID }, p.apiKey);
    expect(viaGraphql.status).toBe(200);
    expect(viaGraphql.body.errors).toBeUndefined();
    const refused = await t.app.gql(usageQuery, { p: p.projectID }, p.apiKey);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
    expect(refused.body.errors[0]).toMatchObject({
      message: expect.stringMatching(/^Too many requests/),
      extensions: { code: 'RATE_LIMITED', http: { status: 429 } },
    });
    expect(refused.body.data).toBeUndefined();
    // The same key's other operations are in the default group.
    expect((await t.app.gql('{ viewer { kind } }', {}, p.apiKey)).body.data.viewer.kind).toBe('key');
  });

  it('puts requests without a valid key in one budget per client address, however many keys they make up', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const madeUp = `ak.${randomBytes(12).toString('hex')}.${randomBytes(32).toString('base64url')}`;
      statuses.push((await t.app.http('GET', '/v1/whoami', { key: i % 2 ? madeUp : 'garbage' })).status);
    }
    expect(statuses.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(statuses.slice(4)).toEqual([429, 429]);
    // A request with a valid key from the same address still has its key's own budget.
    const p = await t.app.createProject();
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
  });

  it('never limits health, readiness, metrics, the operator token or CORS preflights', async () => {
    for (let i = 0; i < 8; i++) {
      expect((await t.app.http('GET', '/healthz')).status).toBe(200);
      expect((await t.app.http('GET', '/readyz')).status).toBe(200);
      expect((await t.app.http('GET', '/metrics')).status).toBe(200);
      expect((await t.app.http('GET', '/v1/whoami', { key: t.app.operatorToken })).status).toBe(200);
      expect((await t.app.gql('{ viewer { kind } }')).status).toBe(200);
    }
  });
});

describe(`rate limits behind a proxy [${provider}]`, () => {
  const direct = useTestApp(provider, { env: { RATE_LIMIT_DEFAULT: '2/60' } });
  const proxied = useTestApp(provider, { env: { RATE_LIMIT_DEFAULT: '2/60', TRUST_PROXY: 'loopback' } });

  const from = (app: TestApp, address: string) =>
    app.http('GET', '/v1/whoami', { headers: { 'x-forwarded-for': address } });

  it('ignores X-Forwarded-For unless TRUST_PROXY trusts the proxy, then limits each forwarded client apart', async () => {
    // Not trusted: the header is the client's word, and every request counts against the socket address.
    expect([(await from(direct.app, '10.0.0.1')).status, (await from(direct.app, '10.0.0.2')).status]).toEqual([
      401, 401,
    ]);
    expect((await from(direct.app, '10.0.0.3')).status).toBe(429);
    // Trusted loopback proxy: the forwarded address is the client.
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) {
      expect((await from(proxied.app, address)).status).toBe(401);
      expect((await from(proxied.app, address)).status).toBe(401);
      expect((await from(proxied.app, address)).status).toBe(429);
    }
  });
});

describe(`rate limits switched off [${provider}]`, () => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_ENABLED: 'false', RATE_LIMIT_DEFAULT: '1/60' } });

  it('sends no rate-limit headers and refuses nothing', async () => {
    const p = await t.app.createProject();
    for (let i = 0; i < 3; i++) {
      const res = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBeNull();
    }
  });
});

describeWithRedis('rate limits shared through Redis', (redisUrl) => {
  const apps: TestApp[] = [];
  let p: TestProject;
  beforeAll(async () => {
    // Two instances of one deployment: one database, one Redis, one prefix.
    const database = await createTestDatabase(provider);
    const env = {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `parley-test-rl-${randomBytes(4).toString('hex')}:`,
      ...limitedEnv,
    };
    apps.push(await startTestApp(provider, { env, database }));
    apps.push(await startTestApp(provider, { env, database }));
    p = await apps[0]!.createProject();
    apps.push(
      // A third instance of another deployment (its own prefix) on the same Redis.
      await startTestApp(provider, {
        env: { ...env, REDIS_PREFIX: `parley-test-rl-other-${randomBytes(4).toString('hex')}:` },
        database,
      }),
    );
    (apps as TestApp[] & { database?: typeof database }).database = database;
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await (apps as TestApp[] & { database?: { drop(): Promise<void> } }).database?.drop();
  });

  it('enforces one limit across two instances sharing one Redis, apart from another deployment', async () => {
    const [a, b, other] = apps as [TestApp, TestApp, TestApp];
    for (const app of apps) await expect.poll(() => app.services.ops.rateLimiter.store()).toBe('redis');
    const order = [a, b, a, b];
    const statuses: number[] = [];
    for (const app of order) statuses.push((await app.http('GET', '/v1/whoami', { key: p.apiKey })).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
    const refusedA = await a.http('GET', '/v1/whoami', { key: p.apiKey });
    const refusedB = await b.http('GET', '/v1/whoami', { key: p.apiKey });
    expectRateLimited(refusedA, 4);
    expectRateLimited(refusedB, 4);
    // Another deployment's counters live under its own REDIS_PREFIX.
    expect((await other.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
  });
});

describe(`rate limits while Redis is unreachable [${provider}]`, () => {
  // Nothing listens on port 1: every Redis command fails at once.
  const t = useTestApp(provider, { env: { REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_DEFAULT: '2/60' } });

  it('falls back to a limit per instance in memory instead of letting everything through or refusing everything', async () => {
    const p = await t.app.createProject();
    expect(t.app.services.ops.rateLimiter.store()).toBe('fallback');
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
    expectRateLimited(await t.app.http('GET', '/v1/whoami', { key: p.apiKey }), 2);
  });
});
