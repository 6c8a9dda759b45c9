import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { defaultKeyScopes } from '../../src/auth/keys';
import type { ScratchDatabase } from '../../src/db/scratch';
import { newId } from '../../src/lib/ids';
import { createAppPubSub } from '../../src/lib/pubsub';
import { createRedactorCache } from '../../src/transcripts/redactor-cache';
import { startTestApp, type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { createTestDatabase, databaseLanes, describeEachDatabase, describeWithRedis } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';

/**
 * Recording a turn redacts its logs with the project's redactor, kept in memory
 * (src/transcripts/redactor-cache.ts): a change of the patterns applies to the next turn on the
 * instance that made it at once, on other instances as soon as they hear of it (Redis), or after
 * the cache's age limit at the latest (no shared events); a turn reads no patterns otherwise.
 */

const saysOrder = {
  name: 'Orders',
  startFlow: 'main',
  flows: [
    { id: 'main', start: 'say', steps: [{ id: 'say', type: 'message', message: 'Your order ORDER-4711 is ready' }] },
  ],
};

const adminRuntimeProject = (app: TestApp) => app.createProject({ scopes: [...defaultKeyScopes, 'admin'] });

async function setPatterns(app: TestApp, p: TestProject, patterns: string[]): Promise<void> {
  const res = await app.http('PUT', `/v1/transcript-redaction/project/${p.projectID}`, {
    key: p.apiKey,
    body: { patterns },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** Runs a turn for a new user on `app` and answers the agent's message as its transcript recorded it. */
async function recordedMessage(app: TestApp, reader: TestApp, p: TestProject): Promise<string> {
  const user = `u-${randomBytes(4).toString('hex')}`;
  const res = await interact(app, p.apiKey, p.projectID, user, { action: { type: 'launch' } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  let message: string | undefined;
  await expect
    .poll(
      async () => {
        const search = await reader.http('POST', `/v1/transcript/project/${p.projectID}`, {
          key: p.apiKey,
          body: { userID: user },
        });
        const id = search.body.transcripts?.[0]?.id;
        if (!id) return false;
        const got = await reader.http('GET', `/v1/transcript/${id}`, { key: p.apiKey });
        const text = (
          got.body.transcript.logs as { type: string; data: { type: string; payload: { message: string } } }[]
        ).find((l) => l.type === 'trace' && l.data.type === 'text');
        message = text?.data.payload.message;
        return message !== undefined;
      },
      { timeout: 15_000, interval: 50 },
    )
    .toBe(true);
  return message as string;
}

describeEachDatabase('redaction patterns kept in memory', (provider) => {
  const t = useTestApp(provider);
  const extra: TestApp[] = [];
  afterAll(async () => {
    for (const app of extra) await app.close();
  });

  it('redacts the next turn with new patterns at once, and reads no patterns per turn otherwise', async () => {
    const p = await adminRuntimeProject(t.app);
    await publish(t.app, p.projectID, saysOrder);
    expect(await recordedMessage(t.app, t.app, p)).toBe('Your order ORDER-4711 is ready');

    await setPatterns(t.app, p, ['ORDER-\\d+']);
    expect(await recordedMessage(t.app, t.app, p)).not.toContain('ORDER-4711');

    const models: (string | undefined)[] = [];
    const listener = (e: { model: string | undefined }) => models.push(e.model);
    const turns = 8;
    const started = Date.now();
    t.app.services.db.queryListeners.add(listener);
    try {
      for (let i = 0; i < turns; i++) expect(await recordedMessage(t.app, t.app, p)).not.toContain('ORDER-4711');
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    const elapsed = Date.now() - started;
    expect(models).toContain('TranscriptLog');
    // The patterns are read again only once the entry is older than the cache's age limit (5 s):
    // none on a quiet machine, where these turns take well under that; never one per turn.
    const reads = models.filter((m) => m === 'TranscriptRedactionPattern').length;
    expect(reads, `${reads} reads of the patterns in ${elapsed} ms`).toBeLessThanOrEqual(
      Math.floor(elapsed / 5000) + 1,
    );

    // Removing the patterns applies at once too.
    await setPatterns(t.app, p, []);
    expect(await recordedMessage(t.app, t.app, p)).toBe('Your order ORDER-4711 is ready');
  });

  it('an instance that hears nothing of a change elsewhere redacts with the new patterns within the age limit', async () => {
    const second = await startTestApp(provider, {
      database: t.app.database,
      env: { ADMIN_TOKEN: t.app.operatorToken },
    });
    extra.push(second);
    const p = await adminRuntimeProject(t.app);
    await publish(t.app, p.projectID, saysOrder);
    // The second instance caches the project's redactor (no patterns yet).
    expect(await recordedMessage(second, t.app, p)).toBe('Your order ORDER-4711 is ready');
    await setPatterns(t.app, p, ['ORDER-\\d+']);
    await expect
      .poll(async () => (await recordedMessage(second, t.app, p)).includes('ORDER-4711'), {
        timeout: 20_000,
        interval: 250,
      })
      .toBe(false);
  });
});

const provider = databaseLanes()[0] ?? 'sqlite';

describeWithRedis('redaction patterns kept in memory, changes heard through Redis', (redisUrl) => {
  let database: ScratchDatabase;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    const env = { REDIS_URL: redisUrl, REDIS_PREFIX: `parley-test-redact-${randomBytes(4).toString('hex')}:` };
    apps.push(await startTestApp(provider, { env, database }));
    apps.push(await startTestApp(provider, { env: { ...env, ADMIN_TOKEN: apps[0]!.operatorToken }, database }));
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await database?.drop();
  });

  it('another instance redacts with the new patterns once it hears of the change', async () => {
    // End to end through two servers; that it is the event and not the age limit that does it is
    // proven by the next test, whose caches keep entries for an hour.
    const [a, b] = apps as [TestApp, TestApp];
    const p = await adminRuntimeProject(a);
    await publish(a, p.projectID, saysOrder);
    expect(await recordedMessage(b, a, p)).toBe('Your order ORDER-4711 is ready');
    await setPatterns(a, p, ['ORDER-\\d+']);
    await expect
      .poll(async () => (await recordedMessage(b, a, p)).includes('ORDER-4711'), { timeout: 20_000, interval: 100 })
      .toBe(false);
  });

  it('drops an entry when the change is announced through Redis, and keeps it until then', async () => {
    const [a] = apps as [TestApp, TestApp];
    const p = await adminRuntimeProject(a);
    const prisma = a.services.db.prisma;
    const prefix = `parley-test-redact-unit-${randomBytes(4).toString('hex')}:`;
    const here = createAppPubSub(redisUrl, { prefix });
    const there = createAppPubSub(redisUrl, { prefix });
    // An hour: within this test only the announcement can make the cache read the patterns again.
    const cache = createRedactorCache(there.pubsub, { ttlMs: 3_600_000, logger: a.services.logger });
    try {
      expect((await cache.get(prisma, p.projectID)).text('ORDER-4711')).toBe('ORDER-4711');
      await prisma.transcriptRedactionPattern.create({
        data: { id: newId(), projectId: p.projectID, pattern: 'ORDER-\\d+' },
      });
      // Not announced: the cached redactor stays (the patterns are not read per call).
      expect((await cache.get(prisma, p.projectID)).text('ORDER-4711')).toBe('ORDER-4711');
      // Announced from another pubsub connection, as another instance's setRedactionPatterns does.
      // Redis drops a message published before the subscription is in place, so announce until heard.
      await expect
        .poll(
          async () => {
            here.pubsub.publish('redactionPatternsChanged', { projectId: p.projectID });
            return (await cache.get(prisma, p.projectID)).text('ORDER-4711');
          },
          { timeout: 10_000, interval: 100 },
        )
        .not.toBe('ORDER-4711');
    } finally {
      cache.close();
      await here.close();
      await there.close();
    }
  });
});
