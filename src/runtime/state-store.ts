import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Db, type SqliteStatements, storedTimestamp } from '../db/client';
import type { EnqueueInput } from '../jobs/queue';
import { AppError } from '../lib/errors';
import { newId } from '../lib/ids';
import { emptyState, type RuntimeState } from './types';

/**
 * Conversation state per (environment, user), written atomically per turn.
 *
 * A turn holds a lease on the user's row from before it reads the state until it commits: the
 * lease is taken by one statement, an INSERT of a row holding it (a new user) that on conflict
 * takes the lease of the existing row only when it is free or lapsed (`ON CONFLICT … DO UPDATE …
 * WHERE`), which is atomic on SQLite and on PostgreSQL, so it works across instances without
 * holding a transaction open while the turn calls APIs. A second turn of the same user waits for the first to commit and then reads what it
 * wrote: no update is lost. Within one instance waiters queue in order (no polling); across
 * instances they poll with backoff. The commit also compares the row's version, so a turn whose
 * lease lapsed (it ran past the lease) can never overwrite a newer state.
 */

export interface StateRow {
  state: RuntimeState;
  sessionId: string;
  agentVersionId: string | null;
  version: number;
  updatedAt: Date;
}

export interface StateLease {
  environmentId: string;
  userId: string;
  token: string;
  /** The row as it was when the lease was taken; null for a user with no saved state. */
  row: StateRow | null;
}

export interface StateKey {
  projectId: string;
  environmentId: string;
  userId: string;
}

/** What a commit writes: the new state, its session and the agent version its stack refers to. */
export interface StateWrite {
  state: RuntimeState;
  sessionId: string;
  agentVersionId: string | null;
}

export interface StateStore {
  /** Waits (up to `waitMs`) for the user's lease. Throws SERVICE_UNAVAILABLE when it stays taken. */
  acquire(key: StateKey, opts?: { waitMs?: number; signal?: AbortSignal }): Promise<StateLease>;
  /**
   * Writes the new state and frees the lease; false when the lease was lost (nothing written).
   * `outbox.job` is a job written in the same transaction (the runtime's turn outbox), told
   * whether the state was written: it commits exactly when the state write does.
   */
  commit(lease: StateLease, next: StateWrite, opts?: { outbox?: CommitOutbox }): Promise<boolean>;
  /** Deletes the state and frees the lease. */
  remove(lease: StateLease): Promise<boolean>;
  /** Frees the lease without writing. */
  release(lease: StateLease): Promise<void>;
  /** The saved state, or null. */
  read(environmentId: string, userId: string): Promise<StateRow | null>;
  /** Runs `fn` holding the user's lease, releasing it whatever happens. */
  withLease<T>(key: StateKey, fn: (lease: StateLease) => Promise<T>, opts?: { waitMs?: number }): Promise<T>;
}

/** A job that commits with the state (see StateStore.commit). */
export interface CommitOutbox {
  /**
   * The job to write, told whether the state was written. Synchronous, and free of effects when
   * `saved` is true: on PostgreSQL it is asked first for the saved case, and asked again with false
   * when the state turned out not to be written.
   */
  job(saved: boolean): EnqueueInput;
  /** The job's ID, once committed (an existing job's when its dedupe key had one). */
  committed(jobId: string): void;
}

export interface StateStoreOptions {
  /**
   * How long a lease lasts unless committed, released or extended. A held lease is extended every
   * `renewMs` while its holder runs, so it covers a turn of any length; a holder that dies (kill
   * -9, a lost machine) stops extending it, and its user is free again this long after at most.
   */
  leaseMs: number;
  /** How often a held lease is extended (well under `leaseMs`). */
  renewMs: number;
  /** Default wait for a lease. */
  waitMs: number;
  /** Told when an extension fails (the lease then lapses on its own, and the commit finds it lost). */
  onRenewError?(err: unknown): void;
}

/** A row created only to hold a lease has never been committed: version 0, no state to show. */
const uncommitted = 0;

/*
 * The lease and the commit are the statements of every turn, so they go straight through the
 * driver (Db.driver) rather than through Prisma's query engine (docs/performance.md "Turn path").
 * Columns and stored forms are Prisma's: JSON as text on SQLite, DateTime as storedTimestamp.
 */

const leaseColumns = `"environmentId", "projectId", "userId", "state", "sessionId", "version", "lockToken", "lockedUntil", "createdAt", "updatedAt"`;

interface LeaseInput extends StateKey {
  token: string;
  /** The state (JSON) and session of a new user's row. */
  initialState: string;
  sessionId: string;
  now: Date;
  lockedUntil: Date;
}

/** Takes the lease in one statement (see the module comment): the row as it is now, or false when another holds it. */
async function takeLease(db: Db, l: LeaseInput): Promise<StateRow | false> {
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    const now = storedTimestamp('sqlite', l.now);
    const row = await driver.exclusive('state.lease', (sql) =>
      sql.get<{ state: string; sessionId: string; agentVersionId: string | null; version: number; updatedAt: string }>(
        `INSERT INTO "RuntimeState" (${leaseColumns}) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
         ON CONFLICT ("environmentId", "userId") DO UPDATE
           SET "lockToken" = excluded."lockToken", "lockedUntil" = excluded."lockedUntil", "updatedAt" = excluded."updatedAt"
           WHERE "RuntimeState"."lockToken" IS NULL OR "RuntimeState"."lockedUntil" < ?
         RETURNING "state", "sessionId", "agentVersionId", "version", "updatedAt"`,
        l.environmentId,
        l.projectId,
        l.userId,
        l.initialState,
        l.sessionId,
        l.token,
        storedTimestamp('sqlite', l.lockedUntil),
        now,
        now,
        now,
      ),
    );
    if (!row) return false;
    return {
      state: JSON.parse(row.state) as RuntimeState,
      sessionId: row.sessionId,
      agentVersionId: row.agentVersionId,
      version: row.version,
      updatedAt: new Date(row.updatedAt),
    };
  }
  const result = await driver.query<{
    state: RuntimeState;
    sessionId: string;
    agentVersionId: string | null;
    version: number;
    updatedAtMs: number;
  }>(
    'state.lease',
    `INSERT INTO "RuntimeState" (${leaseColumns})
     VALUES ($1::text, $2::text, $3::text, $4::jsonb, $5::text, 0, $6::text, $7::timestamp(3), $8::timestamp(3), $8::timestamp(3))
     ON CONFLICT ("environmentId", "userId") DO UPDATE
       SET "lockToken" = excluded."lockToken", "lockedUntil" = excluded."lockedUntil", "updatedAt" = excluded."updatedAt"
       WHERE "RuntimeState"."lockToken" IS NULL OR "RuntimeState"."lockedUntil" < $8::timestamp(3)
     RETURNING "state", "sessionId", "agentVersionId", "version",
       (extract(epoch FROM "updatedAt") * 1000)::float8 AS "updatedAtMs"`,
    [
      l.environmentId,
      l.projectId,
      l.userId,
      l.initialState,
      l.sessionId,
      l.token,
      storedTimestamp('postgresql', l.lockedUntil),
      storedTimestamp('postgresql', l.now),
    ],
  );
  const row = result.rows[0];
  if (!row) return false;
  return {
    state: row.state,
    sessionId: row.sessionId,
    agentVersionId: row.agentVersionId,
    version: row.version,
    updatedAt: new Date(row.updatedAtMs),
  };
}

/** Moves a held lease's end to `until`; false when the lease is no longer the caller's. */
async function extendLease(db: Db, lease: StateLease, until: Date): Promise<boolean> {
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    const written = await driver.exclusive('state.renew', (sql) =>
      sql.run(
        `UPDATE "RuntimeState" SET "lockedUntil" = ? WHERE "environmentId" = ? AND "userId" = ? AND "lockToken" = ?`,
        storedTimestamp('sqlite', until),
        lease.environmentId,
        lease.userId,
        lease.token,
      ),
    );
    return written.changes === 1;
  }
  const written = await driver.query(
    'state.renew',
    `UPDATE "RuntimeState" SET "lockedUntil" = $1::timestamp(3)
     WHERE "environmentId" = $2::text AND "userId" = $3::text AND "lockToken" = $4::text`,
    [storedTimestamp('postgresql', until), lease.environmentId, lease.userId, lease.token],
  );
  return written.rowCount === 1;
}

const jobColumns = `"id", "queue", "dedupeKey", "payload", "status", "attempts", "maxAttempts", "runAt", "projectId", "createdAt", "updatedAt"`;

/** Enqueues a job as `enqueueJob` does (src/jobs/queue.ts), inside the caller's SQLite transaction. */
function insertJobSqlite(sql: SqliteStatements, job: EnqueueInput, now: Date): string {
  const id = newId();
  const at = storedTimestamp('sqlite', now);
  const inserted = sql.run(
    `INSERT INTO "Job" (${jobColumns}) VALUES (?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?, ?) ON CONFLICT ("dedupeKey") DO NOTHING`,
    id,
    job.queue,
    job.dedupeKey ?? null,
    JSON.stringify(job.payload),
    job.maxAttempts ?? 5,
    storedTimestamp('sqlite', job.runAt ?? now),
    job.projectId ?? null,
    at,
    at,
  );
  if (inserted.changes === 1) return id;
  // The dedupe key has a job already: that one, as enqueueJob answers.
  const existing = sql.get<{ id: string }>(`SELECT "id" FROM "Job" WHERE "dedupeKey" = ?`, job.dedupeKey ?? null);
  if (!existing) throw new Error('the job was neither written nor found by its dedupe key');
  return existing.id;
}

/** The parameters of a PostgreSQL job insert, from $`first` on; see pgJobValues. */
function pgJobParams(job: EnqueueInput, id: string, now: Date): unknown[] {
  return [
    id,
    job.queue,
    job.dedupeKey ?? null,
    JSON.stringify(job.payload),
    job.maxAttempts ?? 5,
    storedTimestamp('postgresql', job.runAt ?? now),
    job.projectId ?? null,
    storedTimestamp('postgresql', now),
  ];
}

/** The SELECT list of a PostgreSQL job insert whose parameters start at $`first` (pgJobParams). */
function pgJobValues(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `${p(0)}::text, ${p(1)}::text, ${p(2)}::text, ${p(3)}::jsonb, 'queued', 0, ${p(4)}::int, ${p(5)}::timestamp(3), ${p(6)}::text, ${p(7)}::timestamp(3), ${p(7)}::timestamp(3)`;
}

async function existingJobPg(db: Db, job: EnqueueInput): Promise<string> {
  if (db.driver.provider !== 'postgresql') throw new Error('PostgreSQL only');
  const found = await db.driver.query<{ id: string }>(
    'job.find',
    `SELECT "id" FROM "Job" WHERE "dedupeKey" = $1::text`,
    [job.dedupeKey ?? null],
  );
  const id = found.rows[0]?.id;
  if (!id) throw new Error('the job was neither written nor found by its dedupe key');
  return id;
}

/**
 * Writes the state when the lease is still the caller's and the row's version is the one it
 * read, freeing the lease, and the outbox job with it in one transaction: on SQLite, one
 * synchronous transaction on the connection; on PostgreSQL, one statement (the UPDATE in a CTE
 * beside the INSERT), or, when the state was not written, the job alone.
 */
async function commitState(db: Db, lease: StateLease, next: StateWrite, outbox?: CommitOutbox): Promise<boolean> {
  const driver = db.driver;
  const now = new Date();
  const state = JSON.stringify(next.state);
  const version = lease.row?.version ?? uncommitted;
  if (driver.provider === 'sqlite') {
    const at = storedTimestamp('sqlite', now);
    const { saved, jobId } = await driver.exclusive(
      'state.commit',
      (sql) => {
        const written = sql.run(
          `UPDATE "RuntimeState"
           SET "state" = ?, "sessionId" = ?, "agentVersionId" = ?, "version" = "version" + 1,
               "lockToken" = NULL, "lockedUntil" = NULL, "updatedAt" = ?
           WHERE "environmentId" = ? AND "userId" = ? AND "lockToken" = ? AND "version" = ?`,
          state,
          next.sessionId,
          next.agentVersionId,
          at,
          lease.environmentId,
          lease.userId,
          lease.token,
          version,
        );
        const saved = written.changes === 1;
        return { saved, jobId: outbox ? insertJobSqlite(sql, outbox.job(saved), now) : null };
      },
      { transaction: outbox !== undefined },
    );
    if (outbox && jobId) outbox.committed(jobId);
    return saved;
  }
  const update = `UPDATE "RuntimeState"
     SET "state" = $1::jsonb, "sessionId" = $2::text, "agentVersionId" = $3::text, "version" = "version" + 1,
         "lockToken" = NULL, "lockedUntil" = NULL, "updatedAt" = $4::timestamp(3)
     WHERE "environmentId" = $5::text AND "userId" = $6::text AND "lockToken" = $7::text AND "version" = $8::int`;
  const updateParams = [
    state,
    next.sessionId,
    next.agentVersionId,
    storedTimestamp('postgresql', now),
    lease.environmentId,
    lease.userId,
    lease.token,
    version,
  ];
  if (!outbox) {
    const written = await driver.query('state.commit', update, updateParams);
    return written.rowCount === 1;
  }
  const job = outbox.job(true);
  const id = newId();
  const result = await driver.query<{ saved: number; jobId: string | null }>(
    'state.commit',
    `WITH saved AS (${update} RETURNING 1),
       job AS (
         INSERT INTO "Job" (${jobColumns}) SELECT ${pgJobValues(9)} WHERE EXISTS (SELECT 1 FROM saved)
         ON CONFLICT ("dedupeKey") DO NOTHING RETURNING "id"
       )
     SELECT (SELECT count(*) FROM saved)::int AS saved, (SELECT "id" FROM job) AS "jobId"`,
    [...updateParams, ...pgJobParams(job, id, now)],
  );
  const row = result.rows[0];
  if (row?.saved === 1) {
    outbox.committed(row.jobId ?? (await existingJobPg(db, job)));
    return true;
  }
  // The lease was lost: nothing was written, and the job (told so) goes alone.
  const lost = outbox.job(false);
  const lostId = newId();
  const inserted = await driver.query<{ id: string }>(
    'job.enqueue',
    `INSERT INTO "Job" (${jobColumns}) SELECT ${pgJobValues(1)} ON CONFLICT ("dedupeKey") DO NOTHING RETURNING "id"`,
    pgJobParams(lost, lostId, now),
  );
  outbox.committed(inserted.rows[0]?.id ?? (await existingJobPg(db, lost)));
  return false;
}

export function createStateStore(db: Db, opts: StateStoreOptions): StateStore {
  const prisma = db.prisma;
  /** Per-user FIFO of local waiters, so turns of one instance do not poll each other. */
  const localQueues = new Map<string, Promise<void>>();

  const toRow = (r: {
    state: unknown;
    sessionId: string;
    agentVersionId: string | null;
    version: number;
    updatedAt: Date;
  }): StateRow => ({
    state: r.state as RuntimeState,
    sessionId: r.sessionId,
    agentVersionId: r.agentVersionId,
    version: r.version,
    updatedAt: r.updatedAt,
  });

  /** One attempt: the row with the lease taken, a new row holding it (null), or false when it is held. */
  async function tryAcquire(key: StateKey, token: string): Promise<StateRow | null | false> {
    const now = new Date();
    const lockedUntil = new Date(now.getTime() + opts.leaseMs);
    const initial = JSON.stringify(emptyState());
    const taken = await takeLease(db, {
      ...key,
      token,
      initialState: initial,
      sessionId: newId(),
      now,
      lockedUntil,
    });
    if (!taken) return false;
    return taken.version === uncommitted ? null : taken;
  }

  async function acquireFromDb(key: StateKey, deadline: number, signal?: AbortSignal): Promise<StateLease> {
    // A UUID comes from a buffer of random bytes filled once per 128 (randomBytes is a call into
    // OpenSSL per lease): unguessable and unique all the same.
    const token = randomUUID();
    let pause = 10;
    for (;;) {
      const got = await tryAcquire(key, token);
      if (got !== false) return { environmentId: key.environmentId, userId: key.userId, token, row: got };
      if (Date.now() + pause > deadline || signal?.aborted) {
        throw new AppError('SERVICE_UNAVAILABLE', 'Another turn of this user is still running; try again shortly.', {
          headers: { 'Retry-After': '1' },
        });
      }
      // Another instance holds the lease: back off, with jitter so waiters do not move in step.
      await sleep(pause + Math.random() * pause);
      pause = Math.min(pause * 2, 250);
    }
  }

  const store: StateStore = {
    async acquire(key, o = {}) {
      const deadline = Date.now() + (o.waitMs ?? opts.waitMs);
      const queueKey = `${key.environmentId}\u0000${key.userId}`;
      const previous = localQueues.get(queueKey);
      let done: () => void = () => {};
      const mine = new Promise<void>((resolve) => {
        done = resolve;
      });
      const tail = previous ? previous.then(() => mine) : mine;
      localQueues.set(queueKey, tail);
      const cleanup = () => {
        done();
        if (localQueues.get(queueKey) === tail) localQueues.delete(queueKey);
      };
      try {
        // Only a turn queued behind another of the same user on this instance waits here. The
        // usual turn has no one ahead and skips the wait, and with it a timer that would stay
        // armed for the whole lock wait (docs/performance.md, "Turn front").
        const waited =
          !previous ||
          (await Promise.race([
            previous.then(() => true),
            sleep(Math.max(0, deadline - Date.now()), false, { ref: false }),
          ]));
        if (!waited) {
          throw new AppError('SERVICE_UNAVAILABLE', 'Another turn of this user is still running; try again shortly.', {
            headers: { 'Retry-After': '1' },
          });
        }
        const lease = await acquireFromDb(key, deadline, o.signal);
        // Extended while held: a turn that runs long keeps its user, a dead instance's turn does
        // not keep it past leaseMs. Most turns end long before the first extension.
        const renewal = setInterval(() => {
          extendLease(db, lease, new Date(Date.now() + opts.leaseMs)).then(
            (held) => {
              if (!held) clearInterval(renewal);
            },
            (err: unknown) => opts.onRenewError?.(err),
          );
        }, opts.renewMs);
        renewal.unref();
        // The local queue moves on, and the extensions stop, when this lease is released or committed.
        leaseDone.set(lease.token, () => {
          clearInterval(renewal);
          cleanup();
        });
        return lease;
      } catch (err) {
        cleanup();
        throw err;
      }
    },

    async commit(lease, next, commitOpts) {
      let saved: boolean;
      try {
        saved = await commitState(db, lease, next, commitOpts?.outbox);
      } catch (err) {
        // Nothing was written; free the lease rather than leave it to lapse.
        await store.release(lease).catch(() => {});
        throw err;
      }
      finishLocal(lease);
      return saved;
    },

    async remove(lease) {
      try {
        const removed = await prisma.runtimeState.deleteMany({
          where: { environmentId: lease.environmentId, userId: lease.userId, lockToken: lease.token },
        });
        return removed.count === 1 && lease.row !== null;
      } finally {
        finishLocal(lease);
      }
    },

    async release(lease) {
      try {
        if (lease.row === null) {
          // Nothing was ever saved for this user: drop the row made to hold the lease.
          await prisma.runtimeState.deleteMany({
            where: {
              environmentId: lease.environmentId,
              userId: lease.userId,
              lockToken: lease.token,
              version: uncommitted,
            },
          });
        }
        await prisma.runtimeState.updateMany({
          where: { environmentId: lease.environmentId, userId: lease.userId, lockToken: lease.token },
          data: { lockToken: null, lockedUntil: null },
        });
      } finally {
        finishLocal(lease);
      }
    },

    async read(environmentId, userId) {
      const row = await prisma.runtimeState.findUnique({
        where: { environmentId_userId: { environmentId, userId } },
      });
      return row && row.version !== uncommitted ? toRow(row) : null;
    },

    async withLease(key, fn, o) {
      const lease = await store.acquire(key, o);
      try {
        return await fn(lease);
      } finally {
        // Still held when `fn` neither committed nor removed (or failed before it could).
        if (leaseDone.has(lease.token)) await store.release(lease);
      }
    },
  };

  /** Local queue releases by lease token. */
  const leaseDone = new Map<string, () => void>();
  function finishLocal(lease: StateLease): void {
    const done = leaseDone.get(lease.token);
    leaseDone.delete(lease.token);
    done?.();
  }

  return store;
}
