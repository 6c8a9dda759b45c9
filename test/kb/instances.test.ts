import { afterAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app';
import { kbQuery, uploadFile } from '../helpers/kb';
import { createTestDatabase, databaseLanes, describeWithRedis } from '../helpers/lanes';

/**
 * Several instances, one deployment: an API instance that runs no jobs answers `?wait=true`
 * uploads once a worker instance has ingested them (the status travels through Redis), and both
 * see the same knowledge base.
 */
describeWithRedis('knowledge base across instances', (redisUrl) => {
  const apps: TestApp[] = [];
  const dropped: { drop(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const database of dropped) await database.drop();
  });

  it('waits on one instance for the ingestion another instance runs', async () => {
    const provider = databaseLanes().at(-1) ?? 'sqlite';
    const database = await createTestDatabase(provider);
    dropped.push(database);
    const api = await startTestApp(provider, { database, env: { REDIS_URL: redisUrl, JOBS_ENABLED: 'false' } });
    apps.push(api);
    const p = await api.createProject();
    const worker = await startTestApp(provider, {
      database,
      // The enqueue notice through Redis wakes the worker at once; a notice sent before the worker's
      // subscription is up is lost, and then its next poll finds the job: keep that wait short.
      env: { REDIS_URL: redisUrl, ADMIN_TOKEN: api.operatorToken, JOB_POLL_MS: '2000' },
    });
    apps.push(worker);

    const res = await uploadFile(api, {
      key: p.apiKey,
      filename: 'lighthouse.txt',
      content: 'The lighthouse keeper lights the lamp at dusk.',
      query: { wait: 'true' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data[0]).toMatchObject({ status: 'SUCCESS', chunkCount: 1 });
    // The API instance ran no job: the worker did.
    expect(api.services.jobs.running).toBe(0);
    // The job is marked done after the document it committed (the waiter wakes on the document), so
    // on a loaded machine the worker may not have marked it yet.
    const jobStatuses = async () =>
      (await api.services.db.prisma.job.findMany({ where: { queue: 'kb-ingest' }, select: { status: true } })).map(
        (j) => j.status,
      );
    await expect.poll(jobStatuses, { timeout: 10_000 }).toEqual(['done']);

    for (const app of [api, worker]) {
      const found = await kbQuery(app, p.apiKey, { question: 'When is the lamp lit?', synthesis: false });
      expect(found.body.chunks[0]?.documentID).toBe(res.body.data[0].documentID);
    }
  });
});
