import { AsyncLocalStorage } from 'node:async_hooks';
import { hostname } from 'node:os';
import { asBackgroundWork, type Db, storedTimestamp } from '../db/client';
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
  /**
   * What the enqueuer handed this delivery in process (JobReservation.run), e.g. the input it
   * has in memory; absent on every other delivery (a poll's claim, a retry, another instance),
   * so a handler must work without it.
   */
  local?: unknown;
}

/** A job as JobReservation.run starts it: the row the enqueuer wrote, claimed by this worker. */
export interface ReservedJob {
  id: string;
  queue: string;
  payload: Record<string, unknown>;
  maxAttempts: number;
  projectId: string | null;
}

/**
 * A place among this instance's running jobs, held for a job that its enqueuer writes already
 * claimed (EnqueueInput.claimedBy with `claimedBy`), so that the job starts when the enqueuer's
 * transaction commits, without a poll's claim in between and without another instance claiming it.
 * Exactly one of `run` and `release` must follow.
 */
export interface JobReservation {
  /** For EnqueueInput.claimedBy. */
  readonly claimedBy: { workerId: string; lockedUntil: Date };
  /**
   * Runs the committed job as attempt 1, as if a poll had claimed it, handing `local` to its
   * handler (JobContext.local), on the next turn of the event loop (after the caller's current
   * work). A runner stopping meanwhile hands the job back to the queue.
   */
  run(job: ReservedJob, local?: unknown): void;
  /** The job was not written (the transaction failed, or its dedupe key had a job): frees the place. */
  release(): void;
}

/**
 * Runs one job. Delivery is at least once (a job whose worker died runs again), so a handler must
 * be idempotent: write its result with an upsert keyed on what it computes.
 */
export type JobHandler = (job: JobContext) => Promise<void>;

/** A job that failed for good without its handler finishing: its worker stopped on the last attempt. */
export interface GaveUpJob {
  id: string;
  queue: string;
  payload: Record<string, unknown>;
  attempts: number;
  projectId: string | null;
  lastError: string;
}

export interface RegisterOptions {
  /**
   * Called once when a job of the queue is marked failed because its worker stopped (lease
   * expired) on its last attempt, so the handler never got to record the failure itself (an
   * evaluation result would stay `pending`). Best effort: a failure here is logged, not retried.
   */
  onGiveUp?: (job: GaveUpJob) => Promise<void>;
}

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
  register(queue: string, handler: JobHandler, opts?: RegisterOptions): void;
  start(): void;
  /**
   * Holds a place to run a job of `queue` that the caller is about to write already claimed by
   * this worker (JobReservation), or null when this runner would not run it at once: not started,
   * stopping, no handler for the queue, or every place taken.
   */
  reserve(queue: string): JobReservation | null;
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

interface GaveUpRow extends ClaimedRow {
  lastError: string;
}

function payloadOf(row: ClaimedRow): Record<string, unknown> {
  return (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as Record<string, unknown>;
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
  const giveUpHooks = new Map<string, NonNullable<RegisterOptions['onGiveUp']>>();
  const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  /** Places held by reservations not yet run or released. */
  let reserved = 0;
  /**
   * Runs a function in the async context the runner was made in: a reserved job is started from
   * its enqueuer's request, and must not run in it (its spans, logs and query events would be the
   * request's); with asBackgroundWork it runs as a job a poll started does.
   */
  const outsideRequests = AsyncLocalStorage.snapshot();
  const lastRecurringSlot = new Map<string, number>();
  let started = false;
  let stopping = false;
  let timer: { kind: 'timeout'; handle: NodeJS.Timeout } | { kind: 'immediate'; handle: NodeJS.Immediate } | null =
    null;
  let ticking = false;
  let tickAgain = false;
  let lastHousekeeping = 0;
  let unsubscribe: (() => void) | null = null;
  const log = logger.child({ component: 'jobs', workerId });

  /**
   * Claims up to `limit` due jobs in one statement: queued jobs whose time has come, and running
   * jobs whose lease ran out (their worker died). On PostgreSQL, SKIP LOCKED lets instances claim
   * side by side without waiting on each other; SQLite runs one writer at a time anyway.
   *
   * A lapsed job that has used all its attempts is not claimed but marked `failed` by the same
   * statement: a job that kills its worker (out of memory, a crash in native code) would otherwise
   * be taken over forever and never reach `failed`. Its `lastError` says the worker stopped; when
   * an earlier attempt failed with an error of its own, that error is kept after it.
   */
  async function claim(limit: number): Promise<{ claimed: ClaimedRow[]; gaveUp: GaveUpRow[] }> {
    const queues = [...handlers.keys()];
    if (queues.length === 0 || limit <= 0) return { claimed: [], gaveUp: [] };
    const driver = db.driver;
    const postgres = driver.provider === 'postgresql';
    const date = new Date();
    // DateTime as the adapter stores it (SQLite: text, compared as text), so the comparisons with
    // stored times and Prisma's reads of the written ones agree.
    const now = storedTimestamp(driver.provider, date);
    const until = storedTimestamp(driver.provider, new Date(date.getTime() + leaseMs));
    // One statement, run straight through the database driver (every wake-up of every runner makes
    // one; Prisma's $queryRaw cost about half a millisecond of CPU around it). Placeholders: `?`
    // in order on SQLite, `$n` (reused) on PostgreSQL.
    const params: unknown[] = [];
    const param = (value: unknown) => {
      params.push(value);
      return postgres ? `$${params.length}` : '?';
    };
    // Inside CASE a bare parameter has no column to take its type from: PostgreSQL would read it
    // as text. SQLite stores DateTime as text already, so it needs no cast (and must not get one).
    const timestamp = (value: string) => (postgres ? `CAST(${param(value)} AS TIMESTAMP(3))` : param(value));
    // SET expressions all see the row as it was, so this holds in every one of them.
    const dead = `("status" = 'running' AND "attempts" >= "maxAttempts")`;
    const lockedBy = param(workerId);
    const lockedUntil = timestamp(until);
    const finishedAt = timestamp(now);
    const updatedAt = param(now);
    const queueList = queues.map((queue) => param(queue)).join(', ');
    const runAt = param(now);
    const lapsed = param(now);
    const sql = `
      UPDATE "Job"
      SET "status" = CASE WHEN ${dead} THEN 'failed' ELSE 'running' END,
          "lockedBy" = CASE WHEN ${dead} THEN NULL ELSE ${lockedBy} END,
          "lockedUntil" = CASE WHEN ${dead} THEN NULL ELSE ${lockedUntil} END,
          "attempts" = CASE WHEN ${dead} THEN "attempts" ELSE "attempts" + 1 END,
          "finishedAt" = CASE WHEN ${dead} THEN ${finishedAt} ELSE "finishedAt" END,
          "lastError" = CASE
            WHEN NOT ${dead} THEN "lastError"
            WHEN "lastError" IS NULL
              THEN 'the worker running it stopped '
                || CASE WHEN "attempts" = 1 THEN 'once' ELSE "attempts" || ' times' END || ' (lease expired)'
            ELSE SUBSTR('the worker running attempt ' || "attempts" || ' of ' || "maxAttempts"
              || ' stopped (lease expired); an earlier attempt failed with: ' || "lastError", 1, 2000)
          END,
          "updatedAt" = ${updatedAt}
      WHERE "id" IN (
        SELECT "id" FROM "Job"
        WHERE "queue" IN (${queueList})
          AND (("status" = 'queued' AND "runAt" <= ${runAt}) OR ("status" = 'running' AND "lockedUntil" < ${lapsed}))
        ORDER BY "runAt", "id"
        LIMIT ${param(limit)}
        ${postgres ? 'FOR UPDATE SKIP LOCKED' : ''}
      )
      RETURNING "id", "queue", "payload", "attempts", "maxAttempts", "projectId", "status", "lastError"`;
    type Row = ClaimedRow & { status: string; lastError: string | null };
    const rows =
      driver.provider === 'sqlite'
        ? await driver.exclusive('jobs.claim', (statements) => statements.all<Row>(sql, ...params))
        : (await driver.query<Row>('jobs.claim', sql, params)).rows;
    const claimed: ClaimedRow[] = [];
    const gaveUp: GaveUpRow[] = [];
    for (const { status, lastError, ...row } of rows) {
      if (status === 'running') claimed.push(row);
      else gaveUp.push({ ...row, lastError: lastError ?? '' });
    }
    return { claimed, gaveUp };
  }

  /** Tells the queue's `onGiveUp` about a job the claim marked failed; its failure is only logged. */
  async function reportGaveUp(row: GaveUpRow): Promise<void> {
    log.warn(
      { jobId: row.id, queue: row.queue, attempts: Number(row.attempts), lastError: row.lastError },
      'job failed for good: its worker stopped on every attempt left',
    );
    const onGiveUp = giveUpHooks.get(row.queue);
    if (!onGiveUp) return;
    try {
      await onGiveUp({
        id: row.id,
        queue: row.queue,
        payload: payloadOf(row),
        attempts: Number(row.attempts),
        projectId: row.projectId,
        lastError: row.lastError,
      });
    } catch (err) {
      log.error({ jobId: row.id, err }, 'the give-up hook of a job failed');
    }
  }

  async function renewLease(id: string): Promise<boolean> {
    const { count } = await db.prisma.job.updateMany({
      where: { id, lockedBy: workerId, status: 'running' },
      data: { lockedUntil: new Date(Date.now() + leaseMs) },
    });
    return count === 1;
  }

  /**
   * A finished attempt's job marked done, while this worker still holds it: the statement Prisma's
   * updateMany made (the same columns, `updatedAt` included, DateTime as storedTimestamp), run
   * straight through the database driver, without Prisma's query compiler and interpreter around
   * it (every job's last statement; about half a millisecond of CPU).
   */
  async function markDone(id: string): Promise<void> {
    const driver = db.driver;
    const now = storedTimestamp(driver.provider, new Date());
    if (driver.provider === 'sqlite') {
      await driver.exclusive('jobs.done', (sql) =>
        sql.run(
          `UPDATE "Job" SET "status" = 'done', "lockedBy" = NULL, "lockedUntil" = NULL, "finishedAt" = ?,
           "lastError" = NULL, "updatedAt" = ? WHERE "id" = ? AND "lockedBy" = ? AND "status" = 'running'`,
          now,
          now,
          id,
          workerId,
        ),
      );
      return;
    }
    await driver.query(
      'jobs.done',
      `UPDATE "Job" SET "status" = 'done', "lockedBy" = NULL, "lockedUntil" = NULL, "finishedAt" = $1,
       "lastError" = NULL, "updatedAt" = $1 WHERE "id" = $2 AND "lockedBy" = $3 AND "status" = 'running'`,
      [now, id, workerId],
    );
  }

  async function finish(row: ClaimedRow, attempt: number, maxAttempts: number, err: unknown): Promise<void> {
    const mine = { id: row.id, lockedBy: workerId, status: 'running' };
    if (err === undefined) {
      await markDone(row.id);
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

  function execute(row: ClaimedRow, local?: unknown): void {
    const handler = handlers.get(row.queue);
    const controller = new AbortController();
    const attempt = Number(row.attempts);
    const maxAttempts = Number(row.maxAttempts);
    const payload = payloadOf(row);
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
          ...(local === undefined ? {} : { local }),
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
        const { claimed, gaveUp } = await claim(concurrency - running.size - reserved);
        for (const row of claimed) execute(row);
        for (const row of gaveUp) await reportGaveUp(row);
        // Rows given up took places of the claim's limit: look again for jobs to run.
        if (gaveUp.length) tickAgain = true;
      } while (tickAgain && running.size + reserved < concurrency && !stopping);
      await housekeeping();
    } catch (err) {
      // SQLite busy or a connection blip: try again at the next poll.
      log.warn({ err }, 'job poll failed');
    } finally {
      ticking = false;
      schedule(pollIntervalMs);
    }
  }

  function cancelTimer(): void {
    if (!timer) return;
    if (timer.kind === 'timeout') clearTimeout(timer.handle);
    else clearImmediate(timer.handle);
    timer = null;
  }

  function schedule(delayMs: number): void {
    if (!started || stopping) return;
    cancelTimer();
    const run = () => {
      timer = null;
      // Whoever scheduled it, a poll and the jobs it starts are the instance's own work.
      void asBackgroundWork(tick);
    };
    // "Now" (an enqueue's wake-up, a job that finished) runs on the next turn of the event loop:
    // a setTimeout of 0 waits at least a millisecond, which an upload with wait=true spent idle
    // between its commit and the job's claim (docs/performance.md, third 25 November session).
    timer =
      delayMs <= 0
        ? { kind: 'immediate', handle: setImmediate(run) }
        : { kind: 'timeout', handle: setTimeout(run, delayMs) };
    timer.handle.unref?.();
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
    register(queue, handler, registerOpts) {
      handlers.set(queue, handler);
      if (registerOpts?.onGiveUp) giveUpHooks.set(queue, registerOpts.onGiveUp);
      else giveUpHooks.delete(queue);
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
    reserve(queue) {
      if (!started || stopping || !handlers.has(queue) || running.size + reserved >= concurrency) return null;
      reserved++;
      let settled = false;
      const settle = () => {
        if (settled) throw new Error('a job reservation was already run or released');
        settled = true;
      };
      return {
        claimedBy: { workerId, lockedUntil: new Date(Date.now() + leaseMs) },
        run(job, local) {
          settle();
          // On the next turn of the event loop: the caller finishes what it does with the job
          // first (a waiter it registers sees the job's outcome), and the job runs outside the
          // caller's async context, as a job a poll started.
          setImmediate(() =>
            outsideRequests(() =>
              asBackgroundWork(() => {
                reserved--;
                if (started && !stopping) {
                  execute({ ...job, attempts: 1 }, local);
                  return;
                }
                // Stopped since the reservation: the job goes back to the queue, its attempt not counted.
                void db.prisma.job
                  .updateMany({
                    where: { id: job.id, lockedBy: workerId, status: 'running' },
                    data: {
                      status: 'queued',
                      lockedBy: null,
                      lockedUntil: null,
                      runAt: new Date(),
                      attempts: { decrement: 1 },
                    },
                  })
                  .catch((err: unknown) => log.warn({ jobId: job.id, err }, 'could not hand a reserved job back'));
              }),
            ),
          );
        },
        release() {
          settle();
          reserved--;
          // A poll may have skipped jobs for the place held.
          schedule(0);
        },
      };
    },
    async stop({ graceMs = 10_000 } = {}) {
      if (!started) return;
      stopping = true;
      cancelTimer();
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
      cancelTimer();
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
