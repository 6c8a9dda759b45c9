import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/client';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { AppError } from '../lib/errors';
import { newId } from '../lib/ids';
import { emptyState, type RuntimeState } from './types';

/**
 * Conversation state per (environment, user), written atomically per turn.
 *
 * A turn holds a lease on the user's row from before it reads the state until it commits: the
 * lease is taken by one conditional UPDATE (free, or lapsed), which is atomic on SQLite and on
 * PostgreSQL, so it works across instances without holding a transaction open while the turn
 * calls APIs. A second turn of the same user waits for the first to commit and then reads what it
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
   * `alsoWrite` runs in the same transaction, told whether the state was written: what it writes
   * commits exactly when the state write does (the runtime's turn outbox).
   */
  commit(
    lease: StateLease,
    next: StateWrite,
    opts?: { alsoWrite?: (tx: PrismaTx, saved: boolean) => Promise<void> },
  ): Promise<boolean>;
  /** Deletes the state and frees the lease. */
  remove(lease: StateLease): Promise<boolean>;
  /** Frees the lease without writing. */
  release(lease: StateLease): Promise<void>;
  /** The saved state, or null. */
  read(environmentId: string, userId: string): Promise<StateRow | null>;
  /** Runs `fn` holding the user's lease, releasing it whatever happens. */
  withLease<T>(key: StateKey, fn: (lease: StateLease) => Promise<T>, opts?: { waitMs?: number }): Promise<T>;
}

export interface StateStoreOptions {
  /** How long a lease lasts unless committed or released; longer than any turn may run. */
  leaseMs: number;
  /** Default wait for a lease. */
  waitMs: number;
}

/** A row created only to hold a lease has never been committed: version 0, no state to show. */
const uncommitted = 0;

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

  /** One attempt: the row with the lease taken (one statement), a new row holding it, or false. */
  async function tryAcquire(key: StateKey, token: string): Promise<StateRow | null | false> {
    const now = new Date();
    const lockedUntil = new Date(now.getTime() + opts.leaseMs);
    const [taken] = await prisma.runtimeState.updateManyAndReturn({
      where: {
        environmentId: key.environmentId,
        userId: key.userId,
        OR: [{ lockToken: null }, { lockedUntil: { lt: now } }],
      },
      data: { lockToken: token, lockedUntil },
    });
    if (taken) return taken.version === uncommitted ? null : toRow(taken);
    try {
      // No row (a new user), or a row whose lease is held: creating tells the two apart.
      await prisma.runtimeState.create({
        data: {
          environmentId: key.environmentId,
          projectId: key.projectId,
          userId: key.userId,
          state: emptyState() as never,
          sessionId: newId(),
          version: uncommitted,
          lockToken: token,
          lockedUntil,
        },
      });
      return null;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async function acquireFromDb(key: StateKey, deadline: number, signal?: AbortSignal): Promise<StateLease> {
    const token = randomBytes(12).toString('hex');
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
      const previous = localQueues.get(queueKey) ?? Promise.resolve();
      let done: () => void = () => {};
      const mine = new Promise<void>((resolve) => {
        done = resolve;
      });
      const tail = previous.then(() => mine);
      localQueues.set(queueKey, tail);
      const cleanup = () => {
        done();
        if (localQueues.get(queueKey) === tail) localQueues.delete(queueKey);
      };
      try {
        const remaining = deadline - Date.now();
        const waited = await Promise.race([
          previous.then(() => true),
          sleep(Math.max(0, remaining), false, { ref: false }),
        ]);
        if (!waited) {
          throw new AppError('SERVICE_UNAVAILABLE', 'Another turn of this user is still running; try again shortly.', {
            headers: { 'Retry-After': '1' },
          });
        }
        const lease = await acquireFromDb(key, deadline, o.signal);
        // The local queue moves on when this lease is released or committed.
        leaseDone.set(lease.token, cleanup);
        return lease;
      } catch (err) {
        cleanup();
        throw err;
      }
    },

    async commit(lease, next, commitOpts) {
      let written: { count: number };
      const write = (client: PrismaTx) =>
        client.runtimeState.updateMany({
          where: {
            environmentId: lease.environmentId,
            userId: lease.userId,
            lockToken: lease.token,
            version: lease.row?.version ?? uncommitted,
          },
          data: {
            state: next.state as never,
            sessionId: next.sessionId,
            agentVersionId: next.agentVersionId,
            version: { increment: 1 },
            lockToken: null,
            lockedUntil: null,
          },
        });
      try {
        const alsoWrite = commitOpts?.alsoWrite;
        written = alsoWrite
          ? await prisma.$transaction(
              async (tx) => {
                const w = await write(tx);
                await alsoWrite(tx, w.count === 1);
                return w;
              },
              // A busy SQLite writer (a large usage batch) must not fail the turn after 2 s.
              { maxWait: 15_000, timeout: 15_000 },
            )
          : await write(prisma);
      } catch (err) {
        // Nothing was written; free the lease rather than leave it to lapse.
        await store.release(lease).catch(() => {});
        throw err;
      }
      finishLocal(lease);
      return written.count === 1;
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
