import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

const errorShape = {
  statusCode: expect.any(Number),
  statusText: expect.any(String),
  errorCode: expect.any(String),
  message: expect.any(String),
};

describeEachDatabase('authentication over HTTP', (provider) => {
  const t = useTestApp(provider);

  it('accepts the raw key and the Bearer form, with any header-name case', async () => {
    const p = await t.app.createProject();
    const raw = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
    expect(raw.status).toBe(200);
    expect(raw.body.key).toMatchObject({ kind: 'key', projectID: p.projectID, workspaceID: p.workspaceID });
    expect(raw.body.key.scopes).toEqual([
      'analytics:read',
      'kb:read',
      'kb:write',
      'runtime:interact',
      'transcripts:read',
      'transcripts:write',
    ]);
    const bearer = await t.app.http('GET', '/v1/whoami', { headers: { AUTHORIZATION: `Bearer ${p.apiKey}` } });
    expect(bearer.status).toBe(200);
    const lower = await t.app.http('GET', '/v1/whoami', { headers: { authorization: `bearer ${p.apiKey}` } });
    expect(lower.status).toBe(200);
  });

  it('answers a missing, malformed or unknown key with 401 and the documented body', async () => {
    const p = await t.app.createProject();
    const [keyId] = p.apiKey.split('.').slice(1);
    const cases: [string | undefined, RegExp][] = [
      [undefined, /Missing Authorization/],
      ['', /Missing Authorization/],
      ['not-a-key', /Malformed/],
      ['Bearer ', /Missing|Malformed/],
      [`ak.${keyId}.${'x'.repeat(43)}`, /Unknown API key/],
      [`ak.${'0'.repeat(24)}.${'x'.repeat(43)}`, /Unknown API key/],
    ];
    for (const [key, message] of cases) {
      const res = await t.app.http('GET', '/v1/whoami', { key });
      expect(res.status, String(key)).toBe(401);
      expect(res.body).toEqual({
        ...errorShape,
        statusCode: 401,
        statusText: 'Unauthorized',
        errorCode: 'UNAUTHENTICATED',
      });
      expect(res.body.message).toMatch(message);
    }
    // GraphQL answers the same way.
    const gql = await t.app.gql('{ viewer { kind } }', {}, 'not-a-key');
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'UNAUTHENTICATED', http: { status: 401 } });
  });

  it('authenticates before it validates: no key and a bad body learn nothing about the body rules', async () => {
    const p = await t.app.createProject();
    const attempts: [string, string, unknown][] = [
      // Unknown members, wrong types, missing members.
      ['POST', '/v1/transcript-property', { name: 7, extra: true }],
      ['POST', '/v2/query/usage', { data: { name: 'nope', filter: 3 } }],
      // Not JSON at all; a query string and a path that break their rules.
      ['POST', '/v1/transcript-property', '{"projectID": '],
      ['POST', `/v1/transcript/project/${p.projectID}?take=5000`, { sessionID: 1, nonsense: true }],
      ['GET', '/v1/transcript/not-an-id?unredacted=perhaps', undefined],
    ];
    for (const key of [undefined, 'not-a-key', `ak.${'0'.repeat(24)}.${'x'.repeat(43)}`]) {
      for (const [method, path, body] of attempts) {
        const res = await t.app.http(method, path, { key, body });
        const what = `${method} ${path} with key ${String(key)}`;
        expect(res.status, what).toBe(401);
        expect(res.body, what).toEqual({
          ...errorShape,
          statusCode: 401,
          statusText: 'Unauthorized',
          errorCode: 'UNAUTHENTICATED',
        });
        expect(res.body.details, what).toBeUndefined();
        expect(res.body.message, what).not.toMatch(/projectID|name|filter|JSON|take|unredacted/);
      }
    }
    // Nothing was stored by the refused requests.
    expect(await t.app.services.db.prisma.transcriptProperty.count({ where: { projectId: p.projectID } })).toBe(0);
    // With a valid key the same body gets its validation details.
    const keyed = await t.app.http('POST', '/v1/transcript-property', {
      key: p.apiKey,
      body: { name: 7, extra: true },
    });
    expect(keyed.status).toBe(400);
    expect(keyed.body.details.length).toBeGreaterThan(0);
    const malformed = await t.app.http('POST', '/v1/transcript-property', { key: p.apiKey, body: '{"projectID": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.errorCode).toBe('MALFORMED_JSON');
  });

  it('stops a revoked key at once', async () => {
    const p = await t.app.createProject();
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);
    const keyId = p.apiKey.split('.')[1];
    const revoked = await t.app.gql('mutation($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }', { id: keyId });
    expect(revoked.body.data.revokeApiKey.revokedAt).toMatch(/Z$/);
    const after = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
    expect(after.status).toBe(401);
    expect(after.body.message).toMatch(/revoked/);
  });

  it("keeps another project's resources hidden: 404, never 401 or the resource", async () => {
    const mine = await t.app.createProject();
    const theirs = await t.app.createProject();
    const res = await t.app.http('GET', `/v1/environment/project/${theirs.projectID}`, { key: mine.apiKey });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ errorCode: 'NOT_FOUND' });
    const own = await t.app.http('GET', `/v1/environment/project/${mine.projectID}`, { key: mine.apiKey });
    expect(own.status).toBe(200);
    expect(own.body.environments.map((e: { alias: string }) => e.alias)).toEqual(['development', 'production']);
  });

  it('lets a workspace key reach every project of its workspace and no other', async () => {
    const first = await t.app.createProject({ name: 'first' });
    const second = await t.app.createProject({ name: 'second', workspaceId: first.workspaceID });
    const other = await t.app.createProject({ name: 'elsewhere' });
    const created = await t.app.gql(
      'mutation($ws: ID!) { createApiKey(input: { workspaceID: $ws, scopes: ["analytics:read"] }) { apiKey key { projectID workspaceID scopes } } }',
      { ws: first.workspaceID },
    );
    expect(created.body.data.createApiKey.key).toEqual({
      projectID: null,
      workspaceID: first.workspaceID,
      scopes: ['analytics:read'],
    });
    const wsKey = created.body.data.createApiKey.apiKey;
    for (const p of [first, second]) {
      expect((await t.app.http('GET', `/v1/environment/project/${p.projectID}`, { key: wsKey })).status).toBe(200);
    }
    expect((await t.app.http('GET', `/v1/environment/project/${other.projectID}`, { key: wsKey })).status).toBe(404);
    const listed = await t.app.gql('{ projects { id } }', {}, wsKey);
    expect(listed.body.data.projects.map((p: { id: string }) => p.id).sort()).toEqual(
      [first.projectID, second.projectID].sort(),
    );
  });

  it('refuses an operation whose scope the key lacks with 401 naming the scope', async () => {
    const p = await t.app.createProject({ scopes: ['analytics:read'] });
    const res = await t.app.http('POST', '/v1/environment', {
      key: p.apiKey,
      body: { projectID: p.projectID, alias: 'staging' },
    });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ errorCode: 'INSUFFICIENT_SCOPE', message: expect.stringContaining('"admin"') });
    // Nothing was created.
    const envs = await t.app.http('GET', `/v1/environment/project/${p.projectID}`, { key: p.apiKey });
    expect(envs.body.environments).toHaveLength(2);
  });

  it('rotates a key: the new one works, the old one works during its grace period, then not', async () => {
    const p = await t.app.createProject();
    const keyId = p.apiKey.split('.')[1]!;
    const rotate = await t.app.gql(
      'mutation($id: ID!, $g: Int) { rotateApiKey(id: $id, graceSeconds: $g) { apiKey key { id rotatedFromID scopes } previous { id expiresAt revokedAt } } }',
      { id: keyId, g: 3600 },
    );
    const out = rotate.body.data.rotateApiKey;
    expect(out.key.rotatedFromID).toBe(keyId);
    expect(out.previous.revokedAt).toBeNull();
    expect(new Date(out.previous.expiresAt).getTime()).toBeGreaterThan(Date.now() + 3500_000);
    expect((await t.app.http('GET', '/v1/whoami', { key: out.apiKey })).status).toBe(200);
    expect((await t.app.http('GET', '/v1/whoami', { key: p.apiKey })).status).toBe(200);

    // Rotating with no grace revokes the old key at once.
    const again = await t.app.gql(
      'mutation($id: ID!) { rotateApiKey(id: $id, graceSeconds: 0) { apiKey previous { revokedAt } } }',
      {
        id: out.key.id,
      },
    );
    expect(again.body.data.rotateApiKey.previous.revokedAt).toMatch(/Z$/);
    expect((await t.app.http('GET', '/v1/whoami', { key: out.apiKey })).status).toBe(401);
    expect((await t.app.http('GET', '/v1/whoami', { key: again.body.data.rotateApiKey.apiKey })).status).toBe(200);

    // A grace period that has ended stops the key.
    await t.app.services.db.prisma.apiKey.update({
      where: { id: keyId },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    t.app.services.auth.invalidate(keyId);
    const expired = await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
    expect(expired.status).toBe(401);
    expect(expired.body.message).toMatch(/grace period/);
  });

  it('records when a key was last used', async () => {
    const p = await t.app.createProject();
    const keyId = p.apiKey.split('.')[1]!;
    await t.app.http('GET', '/v1/whoami', { key: p.apiKey });
    await expect
      .poll(async () => (await t.app.services.db.prisma.apiKey.findUnique({ where: { id: keyId } }))?.lastUsedAt)
      .toBeInstanceOf(Date);
  });
});

describe('the operator token', () => {
  it('is compared in full: a prefix of it is not the operator', async () => {
    const { createAuthenticator } = await import('../../src/auth/authenticate');
    const { createLogger } = await import('../../src/lib/logger');
    const auth = createAuthenticator({
      db: {} as never,
      adminToken: 'operator-token-0123456789',
      cacheTtlMs: 0,
      logger: createLogger('silent'),
    });
    expect(await auth.authenticate('operator-token-0123456789')).toEqual({ kind: 'operator' });
    expect(await auth.authenticate('Bearer operator-token-0123456789')).toEqual({ kind: 'operator' });
    expect((await auth.authenticate('operator-token-012345678')).kind).toBe('anonymous');
  });
});
