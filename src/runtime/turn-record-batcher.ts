import type { Db } from '../db/client';
import { recordFinishedTurn, TURN_RECORD_QUEUE, type TurnOutboxDeps, userPrefix } from './turn-outbox';
import type { RecordTx, TurnRecord } from './turn-record';

/**
 * Group commit of turn records (docs/performance.md "Turn path"). A finished turn whose record is
 * in the turn outbox (src/runtime/turn-outbox.ts) hands it here instead of draining its entry on
 * its own. While one batch is being written, the turns that finish meanwhile wait, and the next
 * batch records all of them in one transaction: the read of their users' outbox entries, their
 * transcript logs and usage events (through `TurnRecorder.recordBatch`), and the deletion of their
 * outbox entries, commit together. The transaction is the database driver's (`inRecordTx`): a few
 * statements per batch whatever its size, and no Prisma operation (docs/performance.md "Turn
 * path"). A batch starts once the current pass of the event loop is over (`setImmediate`), so the
 * turns that finish in the same pass share it, and turns that finish while it is written share
 * the next: on SQLite, whose one connection runs the turns' state commits one after another, that
 * is what lets a batch carry more than one turn.
 *
 * The guarantees stay those of the outbox: an entry is deleted in the transaction that records it,
 * so it is recorded exactly once (recorders are idempotent per turn ID besides); a crash leaves the
 * entries for the user's next turn or the job runner. Order per user holds because batches run one
 * after another and a batch keeps the turns' order. A user with outbox entries this instance does
 * not hold (left by a crash, another instance, a failed recording) is recorded the ordinary way,
 * which records those earlier entries first; so is every turn of a batch whose transaction fails.
 */

/**
 * Runs `fn` in one driver transaction (src/db/client.ts: on SQLite BEGIN IMMEDIATE … COMMIT under
 * the connection's lock, on PostgreSQL BEGIN … COMMIT on one pooled connection) as a RecordTx,
 * then the functions added with `beforeCommit`, in order, inside the same transaction. Resolves
 * with `fn`'s result and what to run after the commit; rolls back when anything throws.
 */
export async function inRecordTx<T>(
  db: Db,
  label: string,
  fn: (tx: RecordTx) => Promise<T>,
): Promise<{ result: T; after: () => void }> {
  const body = async (tx: RecordTx, hooks: (() => Promise<() => void>)[]) => {
    const result = await fn(tx);
    const after: (() => void)[] = [];
    // A hook may add another (one recorder's write feeding the next): run until none is left.
    for (let i = 0; i < hooks.length; i++) after.push(await (hooks[i] as () => Promise<() => void>)());
    return {
      result,
      after: () => {
        for (const a of after) a();
      },
    };
  };
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    return driver.transaction(label, (sql) => {
      const hooks: (() => Promise<() => void>)[] = [];
      return body(
        {
          provider: 'sqlite',
          all: async <R>(text: string, params: readonly unknown[]) => sql.all<R>(text, ...params),
          run: async (text, params) => sql.run(text, ...params).changes,
          beforeCommit: (hook) => hooks.push(hook),
        },
        hooks,
      );
    });
  }
  return driver.transaction(label, (sql) => {
    const hooks: (() => Promise<() => void>)[] = [];
    return body(
      {
        provider: 'postgresql',
        all: async <R>(text: string, params: readonly unknown[]) => (await sql.query(text, [...params])).rows as R[],
        run: async (text, params) => (await sql.query(text, [...params])).rowCount ?? 0,
        beforeCommit: (hook) => hooks.push(hook),
      },
      hooks,
    );
  });
}

/**
 * The pending outbox entries whose dedupe keys start with one of `prefixes` (all of one length,
 * userPrefix's), read inside the batch's transaction: one statement, no Prisma operation.
 */
async function pendingEntries(
  tx: RecordTx,
  prefixes: readonly string[],
): Promise<{ id: string; dedupeKey: string; createdAtMs: number }[]> {
  const length = prefixes[0]?.length ?? 0;
  if (prefixes.some((p) => p.length !== length)) throw new Error('outbox prefixes differ in length');
  if (tx.provider === 'sqlite') {
    const rows = await tx.all<{ id: string; dedupeKey: string; createdAt: string }>(
      `SELECT "id", "dedupeKey", "createdAt" FROM "Job"
       WHERE "queue" = ? AND "status" IN ('queued', 'running')
         AND substr("dedupeKey", 1, ?) IN (SELECT value FROM json_each(?))`,
      [TURN_RECORD_QUEUE, length, JSON.stringify(prefixes)],
    );
    return rows.map((r) => ({ id: r.id, dedupeKey: r.dedupeKey, createdAtMs: new Date(r.createdAt).getTime() }));
  }
  return tx.all<{ id: string; dedupeKey: string; createdAtMs: number }>(
    `SELECT "id", "dedupeKey", (extract(epoch FROM "createdAt") * 1000)::float8 AS "createdAtMs" FROM "Job"
     WHERE "queue" = $1::text AND "status" IN ('queued', 'running') AND substr("dedupeKey", 1, $2::int) = ANY($3::text[])`,
    [TURN_RECORD_QUEUE, length, prefixes],
  );
}

/** Deletes the recorded turns' outbox entries, in the batch's transaction. */
async function deleteEntries(tx: RecordTx, ids: readonly string[]): Promise<void> {
  if (tx.provider === 'sqlite') {
    await tx.run(`DELETE FROM "Job" WHERE "id" IN (SELECT value FROM json_each(?))`, [JSON.stringify(ids)]);
  } else {
    await tx.run(`DELETE FROM "Job" WHERE "id" = ANY($1::text[])`, [ids]);
  }
}

/** Turns per transaction at most: bounds how long a batch holds SQLite's writer. */
const maxBatch = 200;

interface Pending {
  record: TurnRecord;
  jobId: string;
  done: () => void;
}

export interface TurnRecordBatcher {
  /** Records a finished turn whose outbox entry is `jobId`. Resolves once it is recorded or left in the outbox; never rejects. */
  record(record: TurnRecord, jobId: string): Promise<void>;
}

export function createTurnRecordBatcher(deps: TurnOutboxDeps): TurnRecordBatcher {
  const recordBatch = deps.recorder.recordBatch;
  if (!recordBatch) throw new Error('the turn recorder cannot record batches');
  const log = deps.logger.child({ component: 'runtime', outbox: TURN_RECORD_QUEUE });
  let queue: Pending[] = [];
  let writing = false;
  /** Outbox entries this batcher holds (queued here or in the batch being written). */
  const held = new Set<string>();

  /** The ordinary path, one turn at a time (it records the user's earlier entries first). */
  async function recordAlone(batch: readonly Pending[]): Promise<void> {
    for (const p of batch) {
      held.delete(p.jobId);
      await recordFinishedTurn(deps, p.record, p.jobId);
    }
  }

  async function writeBatch(batch: Pending[]): Promise<void> {
    const prefixOfTurn = new Map(
      batch.map((p) => [p, userPrefix({ environmentId: p.record.environmentID, userId: p.record.userID })]),
    );
    const prefixOf = (p: Pending) => prefixOfTurn.get(p) as string;
    const prefixes = [...new Set(prefixOfTurn.values())];
    /** Set once the users' entries are read: the turns to record here, and those to leave to the ordinary path. */
    let split: { clean: Pending[]; alone: Pending[] } | null = null;
    try {
      // One transaction: the users' pending entries (ours, and any this instance does not hold),
      // the records of the turns that can go in a batch, and the deletion of their entries.
      const { result: publish, after } = await inRecordTx(deps.db, 'turn.record', async (tx) => {
        const entries = await pendingEntries(tx, prefixes);
        const createdAt = new Map(entries.map((e) => [e.id, e.createdAtMs]));
        const tangled = new Set<string>();
        for (const e of entries) {
          const prefix = prefixes.find((pr) => e.dedupeKey?.startsWith(pr));
          if (prefix && !held.has(e.id)) tangled.add(prefix);
        }
        const clean: Pending[] = [];
        const alone: Pending[] = [];
        for (const p of batch) {
          if (!createdAt.has(p.jobId)) {
            // Recorded already (the job runner took it over): nothing to do.
            held.delete(p.jobId);
          } else if (tangled.has(prefixOf(p))) {
            alone.push(p);
          } else {
            clean.push(p);
          }
        }
        // Turn order per user, as the outbox drains it (turns of a user are serialised by the lease).
        clean.sort((a, b) => (createdAt.get(a.jobId) ?? 0) - (createdAt.get(b.jobId) ?? 0));
        split = { clean, alone };
        if (!clean.length) return () => {};
        const publish = await recordBatch!(
          tx,
          clean.map((p) => p.record),
        );
        await deleteEntries(
          tx,
          clean.map((p) => p.jobId),
        );
        return publish;
      });
      const { clean, alone } = split as unknown as { clean: Pending[]; alone: Pending[] };
      for (const p of clean) held.delete(p.jobId);
      for (const announce of [publish, after]) {
        try {
          announce();
        } catch (err) {
          log.warn({ err }, 'announcing recorded turns failed');
        }
      }
      await recordAlone(alone);
      return;
    } catch (err) {
      log.warn({ err, turns: batch.length }, 'recording a batch of turns failed; recording them one by one');
    }
    // Rolled back: every turn the ordinary way (those of tangled users after the others, as before).
    const left = split as { clean: Pending[]; alone: Pending[] } | null;
    if (left) {
      await recordAlone(left.clean);
      await recordAlone(left.alone);
    } else {
      await recordAlone(batch);
    }
  }

  async function drain(): Promise<void> {
    try {
      while (queue.length) {
        const batch = queue.slice(0, maxBatch);
        queue = queue.slice(batch.length);
        await writeBatch(batch);
        for (const p of batch) p.done();
      }
    } finally {
      writing = false;
    }
  }

  return {
    record(record, jobId) {
      return new Promise<void>((resolve) => {
        held.add(jobId);
        queue.push({ record, jobId, done: resolve });
        if (!writing) {
          writing = true;
          // After the turns that finish in this pass of the event loop: they share the batch.
          setImmediate(() => void drain());
        }
      });
    },
  };
}
