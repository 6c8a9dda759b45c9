import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { QueryEvent } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { startTestApp, type TestApp, useTestApp } from '../helpers/app';
import { createTestDatabase, databaseLanes, describeEachDatabase, describeWithRedis } from '../helpers/lanes';

/**
 * Verified API keys are kept in memory with their project (src/auth/authenticate.ts): an operation
 * on the key's own project reads neither the key nor the project, and a key that is revoked or
 * rotated is dropped at once on the instance that changed it and, through the `apiKeyChanged`
 * announcement, on every other instance.
 */

/** The Prisma models an instance reads while `fn` runs (its own background work left out). */
async function modelsRead(app: TestApp, fn: () => Promise<void>): Promise<(string | undefined)[]> {
  const models: (string | undefined)[] = [];
  const listener = (e: QueryEvent) => {
    if (!e.background) models.push(e.model);
  };
  app.services.db.queryListeners.add(listener);
  try {
    await fn();
  } finally {
    app.services.db.queryListeners.delete(listener);
  }
  return models;
}

describeEachDatabase('API keys kept in memory with their project', (provider) => {
  // An hour: within these tests a key is read again only when it is dropped.
  const t = useTestApp(provider, { env: { KEY_CACHE_TTL_MS: '3600000' } });

  it("checks an operation on the key's own project without reading the key or the project", async () => {
    const p = await t.app.createProject();
    const path = `/v1/environment/project/${p.projectID}`;
    expect((await t.app.http('GET', path, { key: p.apiKey })).status).toBe(200);
    // That first use stamps the key's lastUsedAt without the request waiting for it (once a minute
    // per key): let the stamp land before counting, or on a loaded machine it lands in the count.
    await expect
      .poll(
        async () =>
          (await t.app.services.db.prisma.apiKey.count({
            where: { projectId: p.projectID, lastUsedAt: { not: null } },
          })) > 0,
        { timeout: 10_000 },
      )
      .toBe(true);
    const models = await modelsRead(t.app, async () => {
      for (let i = 0; i < 3; i++) {
        const res = await t.app.http('GET', path, { key: p.apiKey });
        expect(res.status).toBe(200);
        expect(res.body.environments.map((e: { alias: string }) => e.alias)).toEqual(['development', 'production']);
        const gql = await t.app.gql(
          'query($id: ID!) { environments(projectID: $id) { alias } }',
          { id: p.projectID },
          p.apiKey,
        );
        expect(gql.body.errors).toBeUndefined();
      }
    });
    expect(models).toContain('Environment');
    expect(models).not.toContain('ApiKey');
    expect(models).not.toContain('Project');

    // Another project is still checked, and still hidden.
    const theirs = await t.app.createProject();
    const hidden = await modelsRead(t.app, async () => {
      const res = await t.app.http('GET', `/v1/environment/project/${theirs.projectID}`, { key: p.apiKey });
      expect(res.status).toBe(404);
    });
    expect(hidden).toContain('Project');
  });

  it("reads the project for a workspace key, which has none of its own, and the key's own at once after a revocation", async () => {
    const first = await t.app.createProject();
    const created = await t.app.gql(
      'mutation($ws: ID!) { createApiKey(input: { workspaceID: $ws, scopes: ["admin"] }) { apiKey } }',
      { ws: first.workspaceID },
    );
    const wsKey = created.body.data.createApiKey.apiKey as string;
    const path = `/v1/environment/project/${first.projectID}`;
    expect((await t.app.http('GET', path, { key: wsKey })).status).toBe(200);
    const models = await modelsRead(t.app, async () => {
      expect((await t.app.http('GET', path, { key: wsKey })).status).toBe(200);
    });
    expect(models).toContain('Project');

    // The project key's entry, project included, goes with the key.
    expect((await t.app.http('GET', path, { key: first.apiKey })).status).toBe(200);
    const keyId = first.apiKey.split('.')[1];
    const revoked = await t.app.gql('mutation($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', { id: keyId });
    expect(revoked.body.data.revokeApiKey.revokedAt).toMatch(/Z$/);
    const after = await t.app.http('GET', path, { key: first.apiKey });
    expect(after.status).toBe(401);
    expect(after.body.message).toMatch(/revoked/);
  });
});

const provider = databaseLanes()[0] ?? 'sqlite';

describeWithRedis('API keys kept in memory, changes heard through Redis', (redisUrl) => {
  let database: ScratchDatabase;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    const env = {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `parley-test-keys-${randomBytes(4).toString('hex')}:`,
      // An hour: only the announcement can make an instance drop a key it holds.
      KEY_CACHE_TTL_MS: '3600000',
    };
    apps.push(await startTestApp(provider, { env, database }));
    apps.push(await startTestApp(provider, { env: { ...env, ADMIN_TOKEN: apps[0]!.operatorToken }, database }));
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await database?.drop();
  });

  it('keeps a key changed without an announcement, and drops it when another instance revokes it', async () => {
    const [a, b] = apps as [TestApp, TestApp];
    const p = await a.createProject();
    const other = await a.createProject();
    const path = `/v1/environment/project/${p.projectID}`;
    // The second instance holds both keys, with their projects.
    expect((await b.http('GET', path, { key: p.apiKey })).status).toBe(200);
    expect((await b.http('GET', `/v1/environment/project/${other.projectID}`, { key: other.apiKey })).status).toBe(200);

    // Revoked in the database without an announcement (as another process would, unheard): the
    // second instance keeps the key it holds, so what follows is the announcement's doing.
    const otherKeyId = other.apiKey.split('.')[1]!;
    await a.services.db.prisma.apiKey.update({ where: { id: otherKeyId }, data: { revokedAt: new Date() } });
    expect((await b.http('GET', `/v1/environment/project/${other.projectID}`, { key: other.apiKey })).status).toBe(200);

    // Revoked through the first instance: the second hears of it and refuses the key.
    const keyId = p.apiKey.split('.')[1];
    const revoked = await a.gql('mutation($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', { id: keyId });
    expect(revoked.body.data.revokeApiKey.revokedAt).toMatch(/Z$/);
    expect((await a.http('GET', path, { key: p.apiKey })).status).toBe(401);
    await expect
      .poll(async () => (await b.http('GET', path, { key: p.apiKey })).status, { timeout: 10_000, interval: 50 })
      .toBe(401);
    const after = await b.http('GET', path, { key: p.apiKey });
    expect(after.body.message).toMatch(/revoked/);
    // The key changed without an announcement is still held: only the announced key was dropped.
    expect((await b.http('GET', `/v1/environment/project/${other.projectID}`, { key: other.apiKey })).status).toBe(200);
  });
});
