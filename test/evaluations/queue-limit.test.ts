import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { expect, it } from 'vitest';
import { type HttpResponse, type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, ingestTranscript } from '../transcripts/helpers';

/**
 * EVALUATION_QUEUE_LIMIT holds when queue requests arrive at once (audit finding 6): the pending
 * count is read inside the enqueue transaction, under a per-project lock. Jobs are not run here
 * (JOBS_ENABLED=false), so the pending count only grows.
 */
describeEachDatabase('the evaluation queue limit under concurrent requests', (provider) => {
  const t = useTestApp(provider, { env: { EVALUATION_QUEUE_LIMIT: '10', JOBS_ENABLED: 'false' } });

  async function setup(): Promise<{ p: TestProject; evaluation: string; transcripts: string[] }> {
    const p = await adminProject(t.app);
    const created = await t.app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'Summary', type: 'string', prompt: 'Summarise the conversation.' },
    });
    expect(created.status).toBe(201);
    const transcripts: string[] = [];
    for (let i = 0; i < 4; i++) transcripts.push(await ingestTranscript(t.app, p));
    return { p, evaluation: created.body.evaluation.id, transcripts };
  }

  const queue = (p: TestProject, evaluation: string, transcripts: string[]) =>
    t.app.http('POST', '/v1/transcript-evaluation/queue', {
      key: p.apiKey,
      body: { projectID: p.projectID, evaluationIDs: [evaluation], transcriptIDs: transcripts },
    });

  const pendingJobs = (projectId: string) =>
    t.app.services.db.prisma.job.count({ where: { projectId, queue: 'evaluation', status: 'queued' } });

  it('lets through only the requests that fit, however many arrive at once', async () => {
    const { p, evaluation, transcripts } = await setup();
    // 4 jobs each against a limit of 10: two fit whole, a third in part (2 transcripts), whatever the order.
    const answers = await Promise.all(Array.from({ length: 6 }, () => queue(p, evaluation, transcripts)));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 201, 201, 429, 429, 429]);
    expect(await pendingJobs(p.projectID)).toBe(10);
    const counts = answers.filter((a) => a.status === 201).map((a) => a.body.transcriptCount);
    expect(counts.sort()).toEqual([2, 4, 4]);
    const partial = answers.find((a) => a.status === 201 && a.body.transcriptCount === 2)!;
    expect(partial.body.warning).toEqual({
      type: 'quota_exceeded',
      message: expect.any(String),
      skippedTranscriptIDs: transcripts.slice(2),
    });
    const refused = answers.find((a) => a.status === 429)!;
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.body.message).toMatch(/\(10 pending, limit 10\)/);
  });

  it('counts the jobs of a request still committing (forced interleaving)', async ({ skip }) => {
    if (provider !== 'postgresql') skip('needs row locks of PostgreSQL to hold a request between count and commit');
    const { p, evaluation, transcripts } = await setup();
    // Room for one request of 4 more: 4 queued already, limit 10.
    expect((await queue(p, evaluation, transcripts)).status).toBe(201);
    // New pairs, so that each request has a result row to insert (an update would not wait).
    const others: string[] = [];
    for (let i = 0; i < 4; i++) others.push(await ingestTranscript(t.app, p));
    const blocker = new pg.Client({ connectionString: t.app.database.url });
    const watcher = new pg.Client({ connectionString: t.app.database.url });
    await blocker.connect();
    await watcher.connect();
    try {
      // Holding the evaluation row stops every request at its first write of a result (the
      // foreign key's share lock), after whatever it read before writing.
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM "Evaluation" WHERE "id" = $1 FOR UPDATE', [evaluation]);
      const requests: Promise<HttpResponse>[] = [];
      try {
        requests.push(queue(p, evaluation, others), queue(p, evaluation, others));
        let settled = false;
        for (const r of requests) r.finally(() => (settled = true)).catch(() => {});
        // Both requests are inside their transactions and waiting on a lock.
        for (;;) {
          const { rows } = await watcher.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          if (rows[0]!.n >= 2) break;
          expect(settled, 'a request finished while the evaluation row was held').toBe(false);
          await sleep(10);
        }
      } finally {
        await blocker.query('COMMIT');
      }
      const statuses = (await Promise.all(requests)).map((r) => r.status).sort();
      // The second sees the first's 4 jobs: room for 2 of its 4 transcripts, never more.
      expect(statuses).toEqual([201, 201]);
      expect(await pendingJobs(p.projectID)).toBe(10);
    } finally {
      await blocker.end();
      await watcher.end();
    }
  });
});
