import type { Db } from '../db/client';
import { recordFinishedTurn, TURN_RECORD_QUEUE, type TurnOutboxDeps, userPrefix } from './turn-outbox';
import type { TurnRecord } from './turn-record';

/**
 * Group commit of turn records (docs/performance.md "Turn path"). A finished turn whose record is
 * in the turn outbox (src/runtime/turn-outbox.ts) hands it here instead of draining its entry on
 * its own. While one batch is being written, the turns that finish meanwhile wait, and the next
 * batch records all of them in one transaction: their transcript logs and usage events (through
 * `TurnRecorder.recordBatch`), and the deletion of their outbox entries, commit together. The first
 * turn after a quiet spell is written at once; under load a transaction carries many turns.
 *
 * The guarantees stay those of the outbox: an entry is deleted in the transaction that records it,
 * so it is recorded exactly once (recorders are idempotent per turn ID besides); a crash leaves the
 * entries for the user's next turn or the job runner. Order per user holds because batches run one
 * after another and a batch keeps the turns' order. A user with outbox entries this instance does
 * not hold (left by a crash, another instance, a failed recording) is recorded the ordinary way,
 * which records those earlier entries first; so is every turn of a batch whose transaction fails.
 */

/**
 * The pending outbox entries whose dedupe keys start with one of `prefixes` (all of one length,
 * userPrefix's), read straight through the driver (docs/performance.md "Turn path"): one
 * statement, no Prisma operation, per batch.
 */
async function pendingEntries(
  db: Db,
  prefixes: readonly string[],
): Promise<{ id: string; dedupeKey: string; createdAtMs: number }[]> {
  const length = prefixes[0]?.length ?? 0;
  if (prefixes.some((p) => p.length !== length)) throw new Error('outbox prefixes differ in length');
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    const marks = prefixes.map(() => '?').join(', ');
    const rows = await driver.exclusive('outbox.pending', (sql) =>
      sql.all<{ id: string; dedupeKey: string; createdAt: string }>(
        `SELECT "id", "dedupeKey", "createdAt" FROM "Job"
         WHERE "queue" = ? AND "status" IN ('queued', 'running') AND substr("dedupeKey", 1, ?) IN (${marks})`,
        TURN_RECORD_QUEUE,
        length,
        ...prefixes,
      ),
    );
    return rows.map((r) => ({ id: r.id, dedupeKey: r.dedupeKey, createdAtMs: new Date(r.createdAt).getTime() }));
  }
  const result = await driver.query<{ id: string; dedupeKey: string; createdAtMs: number }>(
    'outbox.pending',
    `SELECT "id", "dedupeKey", (extract(epoch FROM "createdAt") * 1000)::float8 AS "createdAtMs" FROM "Job"
     WHERE "queue" = $1::text AND "status" IN ('queued', 'running') AND substr("dedupeKey", 1, $2::int) = ANY($3::text[])`,
    [TURN_RECORD_QUEUE, length, prefixes],
  );
  return result.rows;
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
    const { db } = deps;
    const prefixOf = (p: Pending) => userPrefix({ environmentId: p.record.environmentID, userId: p.record.userID });
    const prefixes = [...new Set(batch.map(prefixOf))];
    // The users' pending entries: ours, and any this instance does not hold.
    const entries = await pendingEntries(db, prefixes);
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
    if (clean.length) {
      try {
        const after = await db.prisma.$transaction(
          async (tx) => {
            const publish = await recordBatch!(
              tx,
              clean.map((p) => p.record),
            );
            await tx.job.deleteMany({ where: { id: { in: clean.map((p) => p.jobId) } } });
            return publish;
          },
          // A busy SQLite writer (a large usage batch) must not fail the batch after 2 s.
          { maxWait: 15_000, timeout: 60_000 },
        );
        for (const p of clean) held.delete(p.jobId);
        try {
          after();
        } catch (err) {
          log.warn({ err }, 'announcing recorded turns failed');
        }
      } catch (err) {
        log.warn({ err, turns: clean.length }, 'recording a batch of turns failed; recording them one by one');
        await recordAlone(clean);
      }
    }
    await recordAlone(alone);
  }

  async function drain(): Promise<void> {
    writing = true;
    try {
      while (queue.length) {
        const batch = queue.slice(0, maxBatch);
        queue = queue.slice(batch.length);
        try {
          await writeBatch(batch);
        } catch (err) {
          // Only the entries query can throw here: leave the turns to the ordinary path.
          log.warn({ err }, 'could not read the outbox for a batch of turns; recording them one by one');
          await recordAlone(batch);
        }
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
        if (!writing) void drain();
      });
    },
  };
}
