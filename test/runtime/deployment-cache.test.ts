import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { startTestApp, type TestApp, useTestApp } from '../helpers/app';
import { createTestDatabase, databaseLanes, describeEachDatabase, describeWithRedis } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';

/**
 * The runtime keeps which version each environment runs in memory (src/runtime/deployment-cache.ts):
 * a turn right after a publish or deploy runs the new version, on the instance that made the
 * change at once, on other instances as soon as they hear of it (Redis), or after the cache's age
 * limit at the latest (no shared events); a turn does not query the environment.
 */

const says = (word: string) => ({
  name: 'Sayer',
  startFlow: 'main',
  flows: [{ id: 'main', start: 'say', steps: [{ id: 'say', type: 'message', message: word }] }],
});

async function said(app: TestApp, key: string, projectID: string, user: string): Promise<string> {
  const res = await interact(app, key, projectID, user, { action: { type: 'launch' } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const text = (res.body as { type: string; payload: { message: string } }[]).find((t) => t.type === 'text');
  return text?.payload.message ?? '';
}

describeEachDatabase('deployed versions kept in memory', (provider) => {
  const t = useTestApp(provider);
  const extra: TestApp[] = [];
  afterAll(async () => {
    for (const app of extra) await app.close();
  });

  it('runs a newly published or deployed version at once, and queries no environment per turn', async () => {
    const p = await t.app.createProject();
    const first = await publish(t.app, p.projectID, says('one'));
    expect(await said(t.app, p.apiKey, p.projectID, 'a')).toBe('one');
    await publish(t.app, p.projectID, says('two'));
    expect(await said(t.app, p.apiKey, p.projectID, 'a')).toBe('two');
    const deployed = await t.app.gql(
      'mutation($p: ID!, $v: ID!) { deployAgentVersion(projectID: $p, versionID: $v, environment: "development") { deployedBy } }',
      { p: p.projectID, v: first.version.id },
    );
    expect(deployed.body.errors).toBeUndefined();
    expect(await said(t.app, p.apiKey, p.projectID, 'a')).toBe('one');

    const models: (string | undefined)[] = [];
    const listener = (e: { model: string | undefined; background: boolean }) => {
      if (!e.background) models.push(e.model);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      expect(await said(t.app, p.apiKey, p.projectID, 'a')).toBe('one');
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    expect(models).not.toContain('Environment');
    expect(models).not.toContain('AgentDeployment');
  });

  it('an instance that hears nothing of a publish elsewhere runs the new version within the age limit', async () => {
    const second = await startTestApp(provider, {
      database: t.app.database,
      env: { ADMIN_TOKEN: t.app.operatorToken },
    });
    extra.push(second);
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, says('one'));
    expect(await said(second, p.apiKey, p.projectID, 'b')).toBe('one');
    await publish(t.app, p.projectID, says('two'));
    await expect.poll(() => said(second, p.apiKey, p.projectID, 'b'), { timeout: 15_000, interval: 250 }).toBe('two');
  });
});

const provider = databaseLanes()[0] ?? 'sqlite';

describeWithRedis('deployed versions kept in memory, changes heard through Redis', (redisUrl) => {
  let database: ScratchDatabase;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    const env = { REDIS_URL: redisUrl, REDIS_PREFIX: `parley-test-deploy-${randomBytes(4).toString('hex')}:` };
    apps.push(await startTestApp(provider, { env, database }));
    apps.push(await startTestApp(provider, { env: { ...env, ADMIN_TOKEN: apps[0]!.operatorToken }, database }));
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await database?.drop();
  });

  it('another instance runs the new version well before the age limit', async () => {
    const [a, b] = apps as [TestApp, TestApp];
    const p = await a.createProject();
    await publish(a, p.projectID, says('one'));
    expect(await said(b, p.apiKey, p.projectID, 'c')).toBe('one');
    const published = Date.now();
    await publish(a, p.projectID, says('two'));
    await expect.poll(() => said(b, p.apiKey, p.projectID, 'c'), { timeout: 4000, interval: 50 }).toBe('two');
    // The cache's age limit is 5 s: hearing of it is what made this quick.
    expect(Date.now() - published).toBeLessThan(4000);
  });
});
