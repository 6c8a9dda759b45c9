import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { enqueueJob, enqueueJobPostgres, enqueueJobSqlite, queueStats } from '../../src/jobs/queue';
import { createJobRunner, type JobRunner, PermanentJobError } from '../../src/jobs/runner';
import { createLogger } from '../../src/lib/logger';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

const logger = createLogger('silent');

describeEachDatabase('the job runner', (provider) => {
  let database: ScratchDatabase;
  let db: Db;
  const runners: JobRunner[] = [];
  const extraDbs: Db[] = [];

  beforeAll(async () => {
    database = await createTestDatabase(provider);
    db = await createDb(database.url);
  });
  afterAll(async () => {
    for (const r of runners) await r.stop({ graceMs: 100 });
    for (const d of extraDbs) await d.close();
    await db.close();
    await database.drop();
  });

  function runner(opts: Partial<Parameters<typeof createJobRunner>[0]> = {}): JobRunner {
    const r = createJobRunner({ db, logger, pollIntervalMs: 20, leaseMs: 2000, backoffMs: () => 30, ...opts });
    runners.push(r);
    return r;
  }

  const uniqueQueue = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}`;

  it('runs an enqueued job once, with its payload, and marks it done', async () => {
    const queue = uniqueQueue('simple');
    const seen: unknown[] = [];
    const r = runner();
    r.register(queue, async (job) => {
      seen.push({ payload: job.payload, attempt: job.attempt });
    });
    const { id } = await enqueueJob(db.prisma, { queue, payload: { transcriptID: 't1', nested: { n: 1.5 } } });
    r.start();
    await r.drain();
    expect(seen).toEqual([{ payload: { transcriptID: 't1', nested: { n: 1.5 } }, attempt: 1 }]);
    const job = await db.prisma.job.findUniqueOrThrow({ where: { id } });
    expect(job).toMatchObject({ status: 'done', attempts: 1, lockedBy: null, lastError: null });
    expect(job.finishedAt).toBeInstanceOf(Date);
  });

  it("marks the polls' and the jobs' database operations as background work, and a caller's as not", async () => {
    const queue = uniqueQueue('background');
    const events: { model: string | undefined; operation: string; background: boolean }[] = [];
    const listener = (e: { model: string | undefined; operation: string; background: boolean }) => events.push(e);
    const driverCalls: { label: string; background: boolean }[] = [];
    const driverListener = (e: { label: string; background: boolean }) => driverCalls.push(e);
    db.queryListeners.add(listener);
    db.driverListeners.add(driverListener);
    try {
      const r = runner();
      r.register(queue, async () => {
        await db.prisma.workspace.findMany({ take: 1 });
      });
      await enqueueJob(db.prisma, { queue, payload: {} });
      r.start();
      await r.drain();
      await db.prisma.apiKey.count();
    } finally {
      db.queryListeners.delete(listener);
      db.driverListeners.delete(driverListener);
    }
    const ofJob = events.filter((e) => e.model === 'Workspace');
    // The runner claims (each poll) and marks the job done with driver statements (no Prisma
    // operation, so no query event: no raw query at all); the caller's own operations (the enqueue,
    // drain's checks, the count after) are not background.
    const claims = driverCalls.filter((e) => e.label === 'jobs.claim');
    expect(ofJob).toHaveLength(1);
    expect(claims.length).toBeGreaterThan(0);
    expect([...ofJob, ...driverCalls].every((e) => e.background)).toBe(true);
    expect(driverCalls.map((e) => e.label).filter((label) => label !== 'jobs.claim')).toEqual(['jobs.done']);
    expect(driverCalls[0]?.label).toBe('jobs.claim');
    expect(events.some((e) => e.model === undefined && e.operation.startsWith('$queryRaw'))).toBe(false);
    expect(events.some((e) => e.model === 'Job' && e.operation === 'updateMany')).toBe(false);
    const callers = events.filter((e) => e.model === 'Job' && (e.operation === 'create' || e.operation === 'count'));
    expect(callers.length).toBeGreaterThan(1);
    expect(callers.every((e) => !e.background)).toBe(true);
    expect(events.at(-1)).toEqual(expect.objectContaining({ model: 'ApiKey', background: false }));
  });

  it('claims through the driver with the times Prisma writes and reads: due jobs only, lease and updatedAt set', async () => {
    const queue = uniqueQueue('claim');
    const leaseMs = 5000;
    const seen: { id: string; attempt: number; row: Record<string, unknown>; text?: Record<string, unknown> }[] = [];
    const r = runner({ leaseMs, workerId: 'claimer' });
    r.register(queue, async (job) => {
      const row = await db.prisma.job.findUniqueOrThrow({ where: { id: job.id } });
      // On SQLite, the claim's times as stored (text), while the job holds its claim.
      const [text] =
        provider === 'sqlite'
          ? await db.queryRows('SELECT "runAt", "lockedUntil", "updatedAt" FROM "Job" WHERE "id" = ?', [job.id])
          : [];
      seen.push({ id: job.id, attempt: job.attempt, row, text });
    });
    const later = await enqueueJob(db.prisma, { queue, payload: {}, runAt: new Date(Date.now() + 3600_000) });
    const due = await enqueueJob(db.prisma, { queue, payload: { n: 1 }, runAt: new Date(Date.now() - 1) });
    const before = Date.now();
    r.start();
    await r.drain();
    const after = Date.now();
    expect(seen.map((s) => [s.id, s.attempt])).toEqual([[due.id, 1]]);
    const row = seen[0]!.row as { lockedUntil: Date; updatedAt: Date; lockedBy: string; status: string };
    expect(row).toMatchObject({ status: 'running', lockedBy: 'claimer', attempts: 1 });
    expect(row.lockedUntil).toBeInstanceOf(Date);
    expect(row.lockedUntil.getTime()).toBeGreaterThanOrEqual(before + leaseMs);
    expect(row.lockedUntil.getTime()).toBeLessThanOrEqual(after + leaseMs);
    expect(row.updatedAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(row.updatedAt.getTime()).toBeLessThanOrEqual(after);
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id: later.id } })).toMatchObject({
      status: 'queued',
      attempts: 0,
      lockedBy: null,
    });
    if (provider === 'sqlite') {
      // Stored as the text the adapter writes for Prisma's own DateTime columns (runAt).
      const text = seen[0]!.text as Record<string, unknown>;
      const shape = (v: unknown) => String(v).replace(/\d/g, '0');
      expect(shape(text.runAt)).toMatch(/^0000-00-00T00:00:00\.000/);
      expect(shape(text.lockedUntil)).toBe(shape(text.runAt));
      expect(shape(text.updatedAt)).toBe(shape(text.runAt));
    }
  });

  it('retries a failing job with backoff until it succeeds', async () => {
    const queue = uniqueQueue('flaky');
    const attempts: number[] = [];
    const r = runner();
    r.register(queue, async (job) => {
      attempts.push(job.attempt);
      if (job.attempt < 3) throw new Error(`boom ${job.attempt}`);
    });
    const { id } = await enqueueJob(db.prisma, { queue, payload: {} });
    r.start();
    await expect
      .poll(async () => (await db.prisma.job.findUniqueOrThrow({ where: { id } })).status, { timeout: 10_000 })
      .toBe('done');
    expect(attempts).toEqual([1, 2, 3]);
    expect((await db.prisma.job.findUniqueOrThrow({ where: { id } })).lastError).toBeNull();
  });

  it('gives up after maxAttempts, and at once on a permanent error, recording the reason', async () => {
    const queue = uniqueQueue('doomed');
    const r = runner();
    r.register(queue, async (job) => {
      if (job.payload.permanent) throw new PermanentJobError('the evaluation was deleted');
      throw new Error('provider down');
    });
    const retried = await enqueueJob(db.prisma, { queue, payload: {}, maxAttempts: 2 });
    const permanent = await enqueueJob(db.prisma, { queue, payload: { permanent: true } });
    r.start();
    await expect
      .poll(async () => (await db.prisma.job.findMany({ where: { queue, status: 'failed' } })).length, {
        timeout: 10_000,
      })
      .toBe(2);
    const a = await db.prisma.job.findUniqueOrThrow({ where: { id: retried.id } });
    const b = await db.prisma.job.findUniqueOrThrow({ where: { id: permanent.id } });
    expect(a).toMatchObject({ attempts: 2, lastError: 'Error: provider down' });
    expect(b).toMatchObject({ attempts: 1, lastError: 'PermanentJobError: the evaluation was deleted' });
  });

  it('makes one job per dedupe key, and none when the enqueuing transaction rolls back', async () => {
    const queue = uniqueQueue('dedupe');
    const first = await enqueueJob(db.prisma, { queue, payload: { n: 1 }, dedupeKey: `${queue}:k` });
    const second = await enqueueJob(db.prisma, { queue, payload: { n: 2 }, dedupeKey: `${queue}:k` });
    expect(first.created).toBe(true);
    expect(second).toEqual({ id: first.id, queue, created: false });
    await expect(
      db.prisma.$transaction(async (tx) => {
        await enqueueJob(tx, { queue, payload: {}, dedupeKey: `${queue}:rolled-back` });
        throw new Error('the caller failed after enqueueing');
      }),
    ).rejects.toThrow('the caller failed');
    expect(await db.prisma.job.count({ where: { queue } })).toBe(1);
  });

  it('enqueues through the database driver as enqueueJob does: one job per dedupe key, the same row, run by the runner', async () => {
    const queue = uniqueQueue('driver');
    const now = new Date();
    const input = {
      queue,
      payload: { documentId: 'd1', nested: { n: 1.5 } },
      dedupeKey: `${queue}:k`,
      projectId: null,
    };
    const enqueue = (payload: Record<string, unknown>) =>
      db.driver.provider === 'sqlite'
        ? db.driver.exclusive('test', (sql) => enqueueJobSqlite(sql, { ...input, payload }, now), { transaction: true })
        : db.driver.transaction('test', (sql) => enqueueJobPostgres(sql, { ...input, payload }, now));
    const first = await enqueue(input.payload);
    const second = await enqueue({ other: true });
    expect(first).toEqual({ id: expect.any(String), queue, created: true });
    expect(second).toEqual({ id: first.id, queue, created: false });
    // Prisma reads back what enqueueJob would have written.
    const viaPrisma = await enqueueJob(db.prisma, { ...input, dedupeKey: `${queue}:prisma` });
    const [driverRow, prismaRow] = await Promise.all(
      [first.id, viaPrisma.id].map((id) => db.prisma.job.findUniqueOrThrow({ where: { id } })),
    );
    const comparable = (row: NonNullable<typeof driverRow>) => ({
      ...row,
      id: undefined,
      dedupeKey: undefined,
      runAt: undefined,
      createdAt: undefined,
      updatedAt: undefined,
    });
    expect(comparable(driverRow!)).toEqual(comparable(prismaRow!));
    expect(driverRow!.runAt.getTime()).toBe(now.getTime());
    expect(driverRow!.createdAt.getTime()).toBe(now.getTime());
    const seen: unknown[] = [];
    const r = runner();
    r.register(queue, async (job) => {
      seen.push(job.payload);
    });
    r.start();
    await r.drain();
    expect(seen).toEqual([input.payload, input.payload]);
    expect(await db.prisma.job.count({ where: { queue, status: 'done' } })).toBe(2);
  });

  it('resumes a job whose worker crashed, once its lease runs out, and runs it to completion once', async () => {
    const queue = uniqueQueue('crash');
    const completions: string[] = [];
    const crashing = runner({ leaseMs: 300, workerId: 'crashing' });
    let started!: () => void;
    const isRunning = new Promise<void>((r) => {
      started = r;
    });
    crashing.register(queue, async (job) => {
      started();
      await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
    });
    const { id } = await enqueueJob(db.prisma, { queue, payload: {} });
    crashing.start();
    await isRunning;
    crashing.abandon(); // the process dies: the database still says "running, locked by crashing"
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id } })).toMatchObject({
      status: 'running',
      lockedBy: 'crashing',
    });

    const survivor = runner({ leaseMs: 300, workerId: 'survivor' });
    survivor.register(queue, async (job) => {
      completions.push(`${job.id}@${job.attempt}`);
    });
    survivor.start();
    await expect
      .poll(async () => (await db.prisma.job.findUniqueOrThrow({ where: { id } })).status, { timeout: 10_000 })
      .toBe('done');
    expect(completions).toEqual([`${id}@2`]);
  });

  it('marks a job failed, without running it again, once its worker has stopped on its last attempt', async () => {
    const queue = uniqueQueue('killer');
    const crashing = runner({ leaseMs: 300, workerId: 'killed' });
    let started!: () => void;
    const isRunning = new Promise<void>((r) => {
      started = r;
    });
    crashing.register(queue, async (job) => {
      started();
      await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
    });
    const { id } = await enqueueJob(db.prisma, { queue, payload: { n: 7 }, maxAttempts: 1 });
    crashing.start();
    await isRunning;
    crashing.abandon(); // the job took its worker down on its only attempt

    const ran: number[] = [];
    const gaveUp: unknown[] = [];
    const survivor = runner({ leaseMs: 300, workerId: 'survivor' });
    survivor.register(
      queue,
      async (job) => {
        ran.push(job.attempt);
      },
      {
        onGiveUp: async (job) => {
          gaveUp.push(job);
        },
      },
    );
    survivor.start();
    await expect
      .poll(async () => (await db.prisma.job.findUniqueOrThrow({ where: { id } })).status, { timeout: 10_000 })
      .toBe('failed');
    const job = await db.prisma.job.findUniqueOrThrow({ where: { id } });
    expect(job).toMatchObject({
      attempts: 1,
      lockedBy: null,
      lockedUntil: null,
      lastError: 'the worker running it stopped once (lease expired)',
    });
    expect(job.finishedAt).toBeInstanceOf(Date);
    await expect.poll(() => gaveUp.length).toBe(1);
    expect(gaveUp[0]).toEqual({
      id,
      queue,
      payload: { n: 7 },
      attempts: 1,
      projectId: null,
      lastError: 'the worker running it stopped once (lease expired)',
    });
    await survivor.drain();
    expect(ran).toEqual([]);
  });

  it('gives up on a lapsed job with no attempts left, keeping the error of an earlier attempt', async () => {
    const queue = uniqueQueue('lapsed');
    const past = new Date(Date.now() - 60_000);
    const base = { queue, payload: {}, status: 'running', lockedBy: 'gone', lockedUntil: past, runAt: past };
    const prefix = `${Date.now().toString(16)}${queue.slice(-6)}`;
    const id = (n: number) => `${prefix}${n}`.padEnd(24, '0');
    // Three attempts: the first two died with their worker, the third failed and was retried,
    // and the retry's worker died too; one job with attempts left, taken over as before.
    await db.prisma.job.createMany({
      data: [
        { ...base, id: id(1), attempts: 3, maxAttempts: 3 },
        { ...base, id: id(2), attempts: 4, maxAttempts: 4, lastError: 'Error: provider down' },
        { ...base, id: id(3), attempts: 1, maxAttempts: 2 },
      ],
    });
    const ran: string[] = [];
    const r = runner();
    r.register(queue, async (job) => {
      ran.push(`${job.id}@${job.attempt}`);
    });
    r.start();
    await r.drain();
    const jobs = await db.prisma.job.findMany({ where: { queue }, orderBy: { id: 'asc' } });
    expect(jobs.map((j) => [j.status, j.attempts, j.lockedBy, j.lastError])).toEqual([
      ['failed', 3, null, 'the worker running it stopped 3 times (lease expired)'],
      [
        'failed',
        4,
        null,
        'the worker running attempt 4 of 4 stopped (lease expired); an earlier attempt failed with: Error: provider down',
      ],
      ['done', 2, null, null],
    ]);
    expect(ran).toEqual([`${id(3)}@2`]);
  });

  it('shares work between two runners on one database without running any job twice', async () => {
    const queue = uniqueQueue('shared');
    const other = await createDb(database.url);
    extraDbs.push(other);
    const ran: string[] = [];
    const handler = async (job: { id: string }) => {
      ran.push(job.id);
      await new Promise((r) => setTimeout(r, 5));
    };
    const a = runner({ concurrency: 3, workerId: 'a' });
    const b = createJobRunner({ db: other, logger, pollIntervalMs: 20, leaseMs: 2000, concurrency: 3, workerId: 'b' });
    runners.push(b);
    a.register(queue, handler);
    b.register(queue, handler);
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await enqueueJob(db.prisma, { queue, payload: { i } })).id);
    a.start();
    b.start();
    await expect.poll(() => db.prisma.job.count({ where: { queue, status: 'done' } }), { timeout: 20_000 }).toBe(40);
    expect([...ran].sort()).toEqual([...ids].sort());
    const byWorker = await db.prisma.job.findMany({ where: { queue }, select: { attempts: true } });
    expect(byWorker.every((j) => j.attempts === 1)).toBe(true);
  });

  /** Enqueues through the driver, in a transaction of its own, as a caller writing its own rows does. */
  const enqueueOnDriver = (input: Parameters<typeof enqueueJobSqlite>[1]) => {
    const now = new Date();
    return db.driver.provider === 'sqlite'
      ? db.driver.exclusive('test', (sql) => enqueueJobSqlite(sql, input, now), { transaction: true })
      : db.driver.transaction('test', (sql) => enqueueJobPostgres(sql, input, now));
  };

  it('runs a job its enqueuer wrote already claimed (reserve) at once, with what the enqueuer handed it, and no other runner claims it', async () => {
    const queue = uniqueQueue('reserved');
    const seen: { runner: string; attempt: number; local: unknown; background: boolean[] }[] = [];
    const driverCalls: { label: string; background: boolean }[] = [];
    const driverListener = (e: { label: string; background: boolean }) => driverCalls.push(e);
    const [mine, other] = [runner(), runner()];
    for (const [name, r] of [
      ['mine', mine],
      ['other', other],
    ] as const) {
      r.register(queue, async (job) => {
        const events: boolean[] = [];
        const listener = (e: { model: string | undefined; background: boolean }) => {
          if (e.model === 'Workspace') events.push(e.background);
        };
        db.queryListeners.add(listener);
        try {
          await db.prisma.workspace.findMany({ take: 1 });
        } finally {
          db.queryListeners.delete(listener);
        }
        seen.push({ runner: name, attempt: job.attempt, local: job.local, background: events });
      });
      r.start();
    }
    expect(mine.reserve(uniqueQueue('unregistered'))).toBeNull();
    const reservation = mine.reserve(queue);
    expect(reservation).not.toBeNull();
    expect(reservation!.claimedBy.workerId).toBe(mine.workerId);
    const enqueued = await enqueueOnDriver({ queue, payload: { n: 1 }, claimedBy: reservation!.claimedBy });
    expect(enqueued.created).toBe(true);
    // Committed claimed: a poll of either runner passes it by (running, its lease held).
    const row = await db.prisma.job.findUniqueOrThrow({ where: { id: enqueued.id } });
    expect(row).toMatchObject({ status: 'running', attempts: 1, lockedBy: mine.workerId });
    expect(row.lockedUntil!.getTime()).toBe(reservation!.claimedBy.lockedUntil.getTime());
    other.wake();
    mine.wake();
    db.driverListeners.add(driverListener);
    try {
      reservation!.run(
        { id: enqueued.id, queue, payload: { n: 1 }, maxAttempts: 5, projectId: null },
        { handed: true },
      );
      await mine.drain();
      await other.drain();
    } finally {
      db.driverListeners.delete(driverListener);
    }
    expect(seen).toEqual([{ runner: 'mine', attempt: 1, local: { handed: true }, background: [true] }]);
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id: enqueued.id } })).toMatchObject({
      status: 'done',
      attempts: 1,
      lockedBy: null,
    });
    // Started from the caller's context, the job's own statements are background work all the same.
    expect(driverCalls.filter((e) => e.label === 'jobs.done').every((e) => e.background)).toBe(true);
  });

  it('reserves only places a started runner has free, and a released place is free again', async () => {
    const queue = uniqueQueue('places');
    const idle = runner({ concurrency: 1 });
    idle.register(queue, async () => {});
    expect(idle.reserve(queue)).toBeNull();
    idle.start();
    const first = idle.reserve(queue);
    expect(first).not.toBeNull();
    expect(idle.reserve(queue)).toBeNull();
    first!.release();
    expect(() => first!.release()).toThrow();
    const again = idle.reserve(queue);
    expect(again).not.toBeNull();
    again!.release();
  });

  it('hands a reserved job back to the queue when its runner stopped before it ran, and another runner runs it', async () => {
    const queue = uniqueQueue('reserved-stop');
    const seen: unknown[] = [];
    const stopping = runner();
    stopping.register(queue, async () => {
      seen.push('stopping');
    });
    stopping.start();
    const reservation = stopping.reserve(queue);
    const { id } = await enqueueOnDriver({ queue, payload: {}, claimedBy: reservation!.claimedBy });
    await stopping.stop({ graceMs: 50 });
    reservation!.run({ id, queue, payload: {}, maxAttempts: 5, projectId: null }, 'local');
    await expect
      .poll(async () => (await db.prisma.job.findUniqueOrThrow({ where: { id } })).status, { timeout: 10_000 })
      .toBe('queued');
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id } })).toMatchObject({
      attempts: 0,
      lockedBy: null,
      lockedUntil: null,
    });
    const next = runner();
    next.register(queue, async (job) => {
      seen.push({ attempt: job.attempt, local: job.local });
    });
    next.start();
    await next.drain();
    expect(seen).toEqual([{ attempt: 1, local: undefined }]);
  });

  it('hands a job that outlives the grace period back to the queue on stop, without counting the attempt', async () => {
    const queue = uniqueQueue('stop');
    const r = runner();
    let started!: () => void;
    const isRunning = new Promise<void>((res) => {
      started = res;
    });
    r.register(queue, async (job) => {
      started();
      await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
    });
    const { id } = await enqueueJob(db.prisma, { queue, payload: {} });
    r.start();
    await isRunning;
    await r.stop({ graceMs: 50 });
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id } })).toMatchObject({
      status: 'queued',
      attempts: 0,
      lockedBy: null,
      lockedUntil: null,
    });
  });

  it('enqueues a recurring job once per period even with several runners', async () => {
    const queue = uniqueQueue('tick');
    const recurring = [{ queue, everyMs: 3_600_000 }];
    const a = runner({ recurring });
    const b = runner({ recurring });
    const runs: string[] = [];
    a.register(queue, async (job) => {
      runs.push(job.id);
    });
    b.register(queue, async (job) => {
      runs.push(job.id);
    });
    a.start();
    b.start();
    await expect.poll(() => db.prisma.job.count({ where: { queue, status: 'done' } }), { timeout: 10_000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(await db.prisma.job.count({ where: { queue } })).toBe(1);
    expect(runs).toHaveLength(1);
  });

  it('reports depth, age and failures per queue', async () => {
    const queue = uniqueQueue('stats');
    await enqueueJob(db.prisma, { queue, payload: {}, runAt: new Date(Date.now() + 3600_000) });
    await enqueueJob(db.prisma, { queue, payload: {} });
    await db.prisma.job.create({
      data: { id: `f${Date.now().toString(16).padStart(23, '0')}`.slice(0, 24), queue, payload: {}, status: 'failed' },
    });
    const stats = (await queueStats(db)).find((s) => s.queue === queue);
    expect(stats).toMatchObject({ queue, queued: 2, running: 0, failed: 1 });
    expect(stats!.oldestQueuedAgeMs).toBeGreaterThanOrEqual(0);
  });
});
