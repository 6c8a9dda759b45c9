import { hostname } from 'node:os';
import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { newId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import { enqueueJob } from './queue';

/** What a handler receives. `attempt` counts from 1. */
export interface JobContext {
  id: string;
  queue: string;
  payload: Record<string, unknown>;
  attempt: number;
  maxAttempts: number;
  projectId: string | null;
  /** Aborted when the worker stops or loses the job's lease: stop work and throw. */
  signal: AbortSignal;
}

/**
 * Runs one job. Delivery is at least once (a job whose worker died runs again), so a handler must
 * be idempotent: write its result with an upsert keyed on what it computes.
 */
export type JobHandler = (job: JobContext) => Promise<void>;

/** Thrown by a handler for a failure that retrying cannot fix: the job fails at once. */
export class PermanentJobError extends Error {
  constructor(message: string, opts?: { cause?: unknown }) {
    super(message, opts);
    this.name = 'PermanentJobError';
  }
}

export interface RecurringJob {
  queue: string;
  everyMs: number;
  payload?: Record<string, unknown>;
}

export interface JobRunnerOptions {
  db: Db;
  logger: Logger;
  /** Wakes the runner when any instance enqueues (optional: it polls anyway). */
  pubsub?: AppPubSub;
  workerId?: string;
  /** Jobs run at once by this instance (default 2). */
  concurrency?: number;
  /** How often to look for due jobs (default 1 s). */
  pollIntervalMs?: number;
  /** A claimed job belongs to this worker for this long, renewed while it runs (default 60 s). */
  leaseMs?: number;
  /** Delay before attempt n+1 after attempt n failed. */
  backoffMs?: (attempt: number) => number;
  /** Jobs enqueued on a schedule, once per period across all instances. */
  recurring?: RecurringJob[];
  /** Finished jobs are deleted after this long (default 7 days). */
  retainFinishedMs?: number;
}

export interface JobRunner {
  readonly workerId: string;
  register(queue: string, handler: JobHandler): void;
  start(): void;
  /** Looks for due jobs now (also called when a job is enqueued). */
  wake(): void;
  /**
   * Stops claiming, lets running jobs finish for up to `graceMs`, then aborts the rest and hands
   * them back to the queue (with their attempt not counted) for another instance.
   */
  stop(opts?: { graceMs?: number }): Promise<void>;
  /** Stops without touching the database, as a crash would (tests). */
  abandon(): void;
  /** Resolves when nothing is running and no due job is waiting (tests, CLI). */
  drain(timeoutMs?: number): Promise<void>;
  readonly running: number;
}

interface ClaimedRow {
  id: string;
  queue: string;
  payload: unknown;
  attempts: number | bigint;
  maxAttempts: number | bigint;
  projectId: string | null;
}

/** Exponential backoff from 1 s, doubling, capped at 10 minutes, with ±20 % jitter. */
export function defaultBackoffMs(attempt: number): number {
  const base = Math.min(1000 * 2 ** Math.max(0, attempt - 1), 10 * 60_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.slice(0, 2000);
}

export function createJobRunner(opts: JobRunnerOptions): JobRunner {
  const { db, logger } = opts;
  const workerId = opts.workerId ?? `${hostname()}:${process.pid}:${newId().slice(-6)}`;
  const concurrency = opts.concurrency ?? 2;
  const pollIntervalMs = opts.pollIntervalMs ?? 1000;
  const leaseMs = opts.leaseMs ?? 60_000;
  const backoffMs = opts.backoffMs ?? defaultBackoffMs;
  const retainFinishedMs = opts.retainFinishedMs ?? 7 * 24 * 3600_000;
  const handlers = new Map<string, JobHandler>();
  const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  const lastRecurringSlot = new Map<string, number>();
  let started = false;
  let stopping = false;
  let timer: NodeJS.Timeout | null = null;
  let ticking = false;
  let tickAgain = false;
  let lastHousekeeping = 0;
  let unsubscribe: (() => void) | null = null;
  const log = logger.child({ component: 'jobs', workerId });

  /**
   * Claims up to `limit` due jobs in one statement: queued jobs whose time has come, and running
   * jobs whose lease ran out (their worker died). On PostgreSQL, SKIP LOCKED lets instances claim
   * side by side without waiting on each other; SQLite runs one writer at a time anyway.
   */
  async function claim(limit: number): Promise<ClaimedRow[]> {
    const queues = [...handlers.keys()];
    if (queues.length === 0 || limit <= 0) return [];
    const now = new Date();
    const until = new Date(now.getTime() + leaseMs);
    const lock = db.provider === 'postgresql' ? Prisma.sql`FOR UPDATE SKIP LOCKED` : Prisma.empty;
    return db.prisma.$queryRaw<ClaimedRow[]>`
      UPDATE "Job"
      SET "status" = 'running', "lockedBy" = ${workerId}, "lockedUntil" = ${until},
          "attempts" = "attempts" + 1, "updatedAt" = ${now}
      WHERE "id" IN (
        SELECT "id" FROM "Job"
        WHERE "queue" IN (${Prisma.join(queues)})
          AND (("status" = 'queued' AND "runAt" <= ${now}) OR ("status" = 'running' AND "lockedUntil" < ${now}))
        ORDER BY "runAt", "id"
        LIMIT ${limit}
        ${lock}
      )
      RETURNING "id", "queue", "payload", "attempts", "maxAttempts", "projectId"`;
  }

  async function renewLease(id: string): Promise<boolean> {
    const { count } = await db.prisma.job.updateMany({
      where: { id, lockedBy: workerId, status: 'running' },
      data: { lockedUntil: new Date(Date.now() + leaseMs) },
    });
    return count === 1;
  }

  async function finish(row: ClaimedRow, attempt: number, maxAttempts: number, err: unknown): Promise<void> {
    const mine = { id: row.id, lockedBy: workerId, status: 'running' };
    if (err === undefined) {
      await db.prisma.job.updateMany({
        where: mine,
        data: { status: 'done', lockedBy: null, lockedUntil: null, finishedAt: new Date(), lastError: null },
      });
      return;
    }
    const permanent = err instanceof PermanentJobError;
    if (permanent || attempt >= maxAttempts) {
      log.warn({ jobId: row.id, queue: row.queue, attempt, err }, 'job failed for good');
      await db.prisma.job.updateMany({
        where: mine,
        data: {
          status: 'failed',
          lockedBy: null,
          lockedUntil: null,
          finishedAt: new Date(),
          lastError: errorText(err),
        },
      });
      return;
    }
    const delay = backoffMs(attempt);
    log.info(
      { jobId: row.id, queue: row.queue, attempt, retryInMs: delay, err: errorText(err) },
      'job attempt failed; will retry',
    );
    await db.prisma.job.updateMany({
      where: mine,
      data: {
        status: 'queued',
        lockedBy: null,
        lockedUntil: null,
        runAt: new Date(Date.now() + delay),
        lastError: errorText(err),
      },
    });
  }

  function execute(row: ClaimedRow): void {
    const handler = handlers.get(row.queue);
    const controller = new AbortController();
    const attempt = Number(row.attempts);
    const maxAttempts = Number(row.maxAttempts);
    const payload = (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as Record<
      string,
      unknown
    >;
    const heartbeat = setInterval(
      () => {
        renewLease(row.id).then(
          (held) => {
            if (!held) {
              log.warn({ jobId: row.id }, 'lost the lease of a running job; aborting it');
              controller.abort(new Error('lease lost'));
            }
          },
          (err: unknown) => log.warn({ jobId: row.id, err }, 'could not renew a job lease'),
        );
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    const done = (async () => {
      let failure: unknown;
      try {
        if (!handler) throw new PermanentJobError(`no handler for queue "${row.queue}"`);
        await handler({
          id: row.id,
          queue: row.queue,
          payload,
          attempt,
          maxAttempts,
          projectId: row.projectId,
          signal: controller.signal,
        });
      } catch (err) {
        failure = err ?? new Error('job failed');
      } finally {
        clearInterval(heartbeat);
      }
      // A job aborted because this worker is stopping is handed back by stop(), not failed here.
      if (controller.signal.aborted && stopping) return;
      try {
        await finish(row, attempt, maxAttempts, failure);
      } catch (err) {
        log.error({ jobId: row.id, err }, 'could not record the outcome of a job');
      }
    })().finally(() => {
      running.delete(row.id);
      if (!stopping) schedule(0);
    });
    running.set(row.id, { controller, done });
  }

  async function enqueueRecurring(): Promise<void> {
    const now = Date.now();
    for (const job of opts.recurring ?? []) {
      const slot = Math.floor(now / job.everyMs);
      if (lastRecurringSlot.get(job.queue) === slot) continue;
      await enqueueJob(db.prisma, {
        queue: job.queue,
        payload: job.payload ?? {},
        dedupeKey: `${job.queue}@${slot}`,
        maxAttempts: 3,
      });
      lastRecurringSlot.set(job.queue, slot);
    }
  }

  async function housekeeping(): Promise<void> {
    const now = Date.now();
    if (now - lastHousekeeping < Math.min(3600_000, retainFinishedMs)) return;
    lastHousekeeping = now;
    const { count } = await db.prisma.job.deleteMany({
      where: { status: { in: ['done', 'failed'] }, finishedAt: { lt: new Date(now - retainFinishedMs) } },
    });
    if (count) log.info({ deleted: count }, 'deleted old finished jobs');
  }

  async function tick(): Promise<void> {
    if (!started || stopping) return;
    if (ticking) {
      tickAgain = true;
      return;
    }
    ticking = true;
    try {
      do {
        tickAgain = false;
        await enqueueRecurring();
        const claimed = await claim(concurrency - running.size);
        for (const row of claimed) execute(row);
      } while (tickAgain && running.size < concurrency && !stopping);
      await housekeeping();
    } catch (err) {
      // SQLite busy or a connection blip: try again at the next poll.
      log.warn({ err }, 'job poll failed');
    } finally {
      ticking = false;
      schedule(pollIntervalMs);
    }
  }

  function schedule(delayMs: number): void {
    if (!started || stopping) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      void tick();
    }, delayMs);
    timer.unref?.();
  }

  async function listen(): Promise<void> {
    if (!opts.pubsub) return;
    const iterator = opts.pubsub.subscribe('jobEnqueued')[Symbol.asyncIterator]();
    unsubscribe = () => void iterator.return?.();
    try {
      while (!stopping) {
        const next = await iterator.next();
        if (next.done) return;
        if (handlers.has(next.value.queue)) schedule(0);
      }
    } catch (err) {
      log.warn({ err }, 'job wake-up subscription ended');
    }
  }

  return {
    workerId,
    get running() {
      return running.size;
    },
    register(queue, handler) {
      handlers.set(queue, handler);
    },
    start() {
      if (started) return;
      started = true;
      stopping = false;
      void listen();
      schedule(0);
    },
    wake() {
      schedule(0);
    },
    async stop({ graceMs = 10_000 } = {}) {
      if (!started) return;
      stopping = true;
      if (timer) clearTimeout(timer);
      unsubscribe?.();
      const all = [...running.values()].map((r) => r.done);
      const timedOut = await Promise.race([
        Promise.allSettled(all).then(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(true), graceMs).unref?.()),
      ]);
      if (timedOut && running.size) {
        const ids = [...running.keys()];
        for (const r of running.values()) r.controller.abort(new Error('worker stopping'));
        const { count } = await db.prisma.job.updateMany({
          where: { id: { in: ids }, lockedBy: workerId, status: 'running' },
          data: { status: 'queued', lockedBy: null, lockedUntil: null, runAt: new Date(), attempts: { decrement: 1 } },
        });
        log.info({ released: count }, 'handed running jobs back to the queue');
        await Promise.allSettled([...running.values()].map((r) => r.done));
      }
      started = false;
    },
    abandon() {
      stopping = true;
      started = false;
      if (timer) clearTimeout(timer);
      unsubscribe?.();
      for (const r of running.values()) r.controller.abort(new Error('worker crashed'));
    },
    async drain(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      const queues = [...handlers.keys()];
      for (;;) {
        const due = await db.prisma.job.count({
          where: { queue: { in: queues }, status: { in: ['queued', 'running'] }, runAt: { lte: new Date() } },
        });
        if (due === 0 && running.size === 0) return;
        if (Date.now() > deadline) throw new Error(`jobs still pending after ${timeoutMs} ms`);
        schedule(0);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}
