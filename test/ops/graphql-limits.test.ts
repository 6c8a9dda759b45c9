import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-sse';
import { beforeAll, describe, expect, it } from 'vitest';
import { operationHash, restPersistedOperations } from '../../src/graphql/plugins/protection';
import { routes } from '../../src/rest/routes';
import { type TestProject, useTestApp } from '../helpers/app';
import { databaseLanes } from '../helpers/lanes';

/**
 * GraphQL limits over real HTTP: each refusal names its limit and setting, with extensions.code;
 * list arguments are capped with variables applied; introspection and field suggestions follow
 * GRAPHQL_INTROSPECTION; persisted operations can be made mandatory while REST keeps working.
 */

const provider = databaseLanes()[0] ?? 'sqlite';

function expectLimit(body: { errors?: { message: string; extensions?: Record<string, unknown> }[] }, name: string) {
  const error = body.errors?.find((e) => (e.extensions?.limit as { name?: string } | undefined)?.name === name);
  expect(error, JSON.stringify(body.errors)).toBeDefined();
  expect(error!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 }, limit: { name } });
  expect(error!.message).toContain(name);
  expect(error!.message).toMatch(/GRAPHQL_MAX_[A-Z_]+=\d+/);
}

describe(`GraphQL limits [${provider}]`, () => {
  const t = useTestApp(provider, {
    env: {
      GRAPHQL_MAX_DEPTH: '3',
      GRAPHQL_MAX_COST: '60',
      GRAPHQL_MAX_ALIASES: '2',
      GRAPHQL_MAX_TOKENS: '60',
      GRAPHQL_MAX_DIRECTIVES: '2',
      GRAPHQL_MAX_PAGE_SIZE: '50',
      GRAPHQL_MAX_LIST_LENGTH: '3',
      RATE_LIMIT_ENABLED: 'false',
    },
  });
  let p: TestProject;
  beforeAll(async () => {
    p = await t.app.createProject({ scopes: ['analytics:read', 'analytics:write', 'transcripts:read'] });
  });

  it('refuses an operation deeper than GRAPHQL_MAX_DEPTH', async () => {
    const ok = await t.app.gql('{ projects { environments { id } } }');
    expect(ok.body.errors).toBeUndefined();
    const res = await t.app.gql(
      'query($p: ID!) { transcripts(projectID: $p) { edges { node { properties { name } } } } }',
      { p: p.projectID },
    );
    expectLimit(res.body, 'maxDepth');
    expect(res.body.errors[0].extensions.limit).toEqual({ name: 'maxDepth', setting: 'GRAPHQL_MAX_DEPTH', max: 3 });
  });

  it('refuses an operation over GRAPHQL_MAX_COST', async () => {
    const res = await t.app.gql(
      'query($p: ID!) { transcripts(projectID: $p, first: 10) { edges { node { id sessionID } } } }',
      { p: p.projectID },
    );
    expectLimit(res.body, 'maxCost');
  });

  it('refuses more aliases than GRAPHQL_MAX_ALIASES', async () => {
    expectLimit((await t.app.gql('{ a: viewer { kind } b: viewer { kind } c: viewer { kind } }')).body, 'maxAliases');
  });

  it('refuses a document of more tokens than GRAPHQL_MAX_TOKENS, before parsing it whole', async () => {
    const res = await t.app.gql(`{ viewer { ${'kind '.repeat(80)} } }`);
    expectLimit(res.body, 'maxTokens');
  });

  it('refuses more directives than GRAPHQL_MAX_DIRECTIVES', async () => {
    const res = await t.app.gql('{ viewer { kind @include(if: true) @skip(if: false) @include(if: true) } }');
    expectLimit(res.body, 'maxDirectives');
  });

  it('caps page sizes and list lengths, with variables applied, over GraphQL and REST alike', async () => {
    const page = await t.app.gql('query($p: ID!, $n: Int) { transcripts(projectID: $p, first: $n) { totalCount } }', {
      p: p.projectID,
      n: 51,
    });
    expectLimit(page.body, 'maxPageSize');
    expect(page.body.errors[0].extensions.details).toEqual([
      { path: 'transcripts.first', message: 'transcripts.first is 51' },
    ]);

    const event = { projectID: p.projectID, environment: 'production', kind: 'intent', name: 'x' };
    const list = await t.app.gql(
      'mutation($e: [UsageEventInput!]!) { recordUsageEvents(events: $e) { recorded } }',
      { e: [event, event, event, event] },
      p.apiKey,
    );
    expectLimit(list.body, 'maxListLength');
    // The REST route runs the same field: its caller gets the limit as a REST error body.
    const rest = await t.app.http('POST', '/v1/usage/events', {
      key: p.apiKey,
      body: { events: [event, event, event, event] },
    });
    expect(rest.status).toBe(400);
    expect(rest.body).toMatchObject({
      statusCode: 400,
      errorCode: 'VALIDATION_FAILED',
      message: expect.stringContaining('maxListLength'),
    });
    const few = await t.app.http('POST', '/v1/usage/events', { key: p.apiKey, body: { events: [event] } });
    expect(few.status).toBe(201);
  });
});

describe(`GraphQL limits at their defaults [${provider}]`, () => {
  const t = useTestApp(provider, { env: { RATE_LIMIT_ENABLED: 'false' } });

  it('let every built-in REST document through, with room to spare', async () => {
    for (const route of routes) {
      // Without variables an operation fails validation, but a limit would be reported beside it.
      const res = await t.app.gql(route.operation);
      const limits = (res.body.errors ?? []).filter((e: { extensions?: { limit?: unknown } }) => e.extensions?.limit);
      expect(limits, `${route.method} ${route.path}`).toEqual([]);
    }
  });

  it('keep introspection and field suggestions on outside production', async () => {
    const res = await t.app.gql('{ __schema { queryType { name } } }');
    expect(res.body.data.__schema.queryType.name).toBe('Query');
    const typo = await t.app.gql('{ viewer { kin } }');
    expect(typo.body.errors[0].message).toContain('Did you mean "kind"?');
  });
});

describe(`GraphQL introspection off [${provider}]`, () => {
  const t = useTestApp(provider, { env: { GRAPHQL_INTROSPECTION: 'false' } });

  it('refuses introspection and hides field suggestions', async () => {
    const res = await t.app.gql('{ __schema { queryType { name } } }');
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors[0].message).toMatch(/introspection/i);
    expect(res.body.errors[0].extensions.code).toBeTruthy();
    const typo = await t.app.gql('{ viewer { kin } }');
    expect(typo.body.errors[0].message).not.toContain('kind');
    expect((await t.app.gql('{ viewer { kind } }')).body.data.viewer.kind).toBe('operator');
  });
});

describe(`persisted operations only [${provider}]`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-persisted-'));
  const file = join(dir, 'operations.json');
  const viewer = 'query Viewer { viewer { kind } }';
  writeFileSync(file, JSON.stringify({ ...restPersistedOperations(routes), [operationHash(viewer)]: viewer }));
  const t = useTestApp(provider, {
    env: { GRAPHQL_PERSISTED_OPERATIONS_FILE: file, GRAPHQL_PERSISTED_ONLY: 'true', NODE_ENV: 'production' },
  });

  it('runs a persisted operation by its hash and refuses any other document', async () => {
    const byHash = await t.app.http('POST', '/graphql', {
      key: t.app.operatorToken,
      body: { extensions: { persistedQuery: { version: 1, sha256Hash: operationHash(viewer) } } },
    });
    expect(byHash.body).toEqual({ data: { viewer: { kind: 'operator' } } });
    const arbitrary = await t.app.gql('{ viewer { kind scopes } }');
    expect(arbitrary.status).toBe(400);
    expect(arbitrary.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_ONLY');
    const unknown = await t.app.http('POST', '/graphql', {
      key: t.app.operatorToken,
      body: { extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } } },
    });
    expect(unknown.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  });

  it('on the graphql-sse single-connection endpoint, runs persisted documents and refuses others', async () => {
    const run = async (query: string) => {
      const client = createClient({
        url: `${t.app.url}/graphql/stream`,
        singleConnection: true,
        headers: { authorization: t.app.operatorToken },
        retryAttempts: 0,
      });
      const results: unknown[] = [];
      const error = await new Promise<unknown>((resolve) => {
        client.subscribe(
          { query },
          { next: (value) => results.push(value), error: (err) => resolve(err), complete: () => resolve(null) },
        );
      });
      client.dispose();
      return { results, error };
    };
    // That endpoint sends whole documents: one equal to a persisted operation runs.
    const persisted = await run(viewer);
    expect(persisted).toEqual({ results: [{ data: { viewer: { kind: 'operator' } } }], error: null });
    // Any other is refused before it runs (graphql-sse answers the refusal with a bare 400).
    const other = await run('{ viewer { kind scopes } }');
    expect(other.results).toEqual([]);
    expect(other.error).toBeTruthy();
  });

  it('keeps every REST route working: their documents are built in', async () => {
    const p = await t.app.createProject();
    const whoami = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
    expect(whoami.status).toBe(200);
    expect(whoami.body.key.projectID).toBe(p.projectID);
    const envs = await t.app.http('GET', `/v1/environment/project/${p.projectID}`, { key: p.apiKey });
    expect(envs.body.environments).toHaveLength(2);
  });
});

describe(`persisted operations only, with no exported file [${provider}]`, () => {
  const t = useTestApp(provider, { env: { GRAPHQL_PERSISTED_ONLY: 'true', NODE_ENV: 'production' } });

  it("runs a REST route's document by its hash over /graphql: the composition root hands the route table's documents to Yoga", async () => {
    const p = await t.app.createProject();
    const whoami = routes.find((r) => r.method === 'GET' && r.path === '/v1/whoami');
    expect(whoami).toBeDefined();
    const byHash = await t.app.http('POST', '/graphql', {
      key: p.apiKey,
      body: { extensions: { persistedQuery: { version: 1, sha256Hash: operationHash(whoami!.operation) } } },
    });
    expect(byHash.status).toBe(200);
    expect(JSON.stringify(byHash.body.data)).toContain(p.projectID);
    // Any other document is still refused, and an unknown hash is not found.
    const arbitrary = await t.app.gql('{ viewer { kind } }');
    expect(arbitrary.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_ONLY');
    const unknown = await t.app.http('POST', '/graphql', {
      key: p.apiKey,
      body: { extensions: { persistedQuery: { version: 1, sha256Hash: 'e'.repeat(64) } } },
    });
    expect(unknown.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  });
});
