import { type Db, type PostgresStatements, type PrismaDb, type SqliteStatements, storedTimestamp } from '../db/client';
import { newId } from '../lib/ids';
import type { AppPubSub } from '../lib/pubsub';

/** A Prisma client or an interactive transaction's client: enqueue works inside a caller's transaction. */
export type DbClient = Pick<PrismaDb, 'job'>;

export interface EnqueueInput {
  queue: string;
  payload: Record<string, unknown>;
  /** One job per key: enqueueing an existing key returns that job and changes nothing. */
  dedupeKey?: string;
  /** Not before this time (default now). */
  runAt?: Date;
  /** Attempts before the job is marked failed (default 5). */
  maxAttempts?: number;
  projectId?: string | null;
  /**
   * Writes the job already claimed by this worker (JobRunner.reserve): `running`, attempt 1, its
   * lease held until `lockedUntil`, so that no instance claims it while the worker that reserved
   * it runs it straight after the commit (and any instance takes it over once the lease lapses,
   * as with a claimed job whose worker died). The driver variants only.
   */
  claimedBy?: { workerId: string; lockedUntil: Date };
}

export interface EnqueuedJob {
  id: string;
  queue: string;
  /** False when the dedupe key already had a job. */
  created: boolean;
}

/**
 * Adds a job. Pass a transaction's client to make the job part of that transaction (it then exists
 * exactly when the caller's write commits). Call `notifyEnqueued` after the commit to wake workers
 * at once instead of at their next poll.
 */
export async function enqueueJob(db: DbClient, input: EnqueueInput): Promise<EnqueuedJob> {
  const data = {
    id: newId(),
    queue: input.queue,
    payload: input.payload as object,
    dedupeKey: input.dedupeKey ?? null,
    runAt: input.runAt ?? new Date(),
    maxAttempts: input.maxAttempts ?? 5,
    projectId: input.projectId ?? null,
  };
  if (!input.dedupeKey) {
    const job = await db.job.create({ data, select: { id: true, queue: true } });
    return { ...job, created: true };
  }
  const job = await db.job.upsert({
    where: { dedupeKey: input.dedupeKey },
    create: data,
    update: {},
    select: { id: true, queue: true },
  });
  return { ...job, created: job.id === data.id };
}

const jobColumns = `"id", "queue", "dedupeKey", "payload", "status", "attempts", "maxAttempts", "runAt", "projectId", "createdAt", "updatedAt", "lockedBy", "lockedUntil"`;

/**
 * `enqueueJob` inside a caller's transaction on the database driver (Db.driver), for a caller
 * that writes its own rows that way: the same row as Prisma writes (JSON as text on SQLite,
 * DateTime as storedTimestamp), and the same answer for a dedupe key that has a job already.
 */
export function enqueueJobSqlite(sql: SqliteStatements, input: EnqueueInput, now: Date): EnqueuedJob {
  const id = newId();
  const at = storedTimestamp('sqlite', now);
  const inserted = sql.run(
    `INSERT INTO "Job" (${jobColumns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT ("dedupeKey") DO NOTHING`,
    id,
    input.queue,
    input.dedupeKey ?? null,
    JSON.stringify(input.payload),
    input.claimedBy ? 'running' : 'queued',
    input.claimedBy ? 1 : 0,
    input.maxAttempts ?? 5,
    storedTimestamp('sqlite', input.runAt ?? now),
    input.projectId ?? null,
    at,
    at,
    input.claimedBy?.workerId ?? null,
    input.claimedBy ? storedTimestamp('sqlite', input.claimedBy.lockedUntil) : null,
  );
  if (inserted.changes === 1) return { id, queue: input.queue, created: true };
  const existing = sql.get<{ id: string }>('SELECT "id" FROM "Job" WHERE "dedupeKey" = ?', input.dedupeKey ?? null);
  if (!existing) throw new Error('the job was neither written nor found by its dedupe key');
  return { id: existing.id, queue: input.queue, created: false };
}

/**
 * The INSERT of enqueueJobPostgres, with its parameters numbered by the caller's `param` (which
 * appends a value and answers its placeholder), for a caller that sends it inside a statement of
 * its own (a `WITH` of several INSERTs). It answers the job's `"id"` (RETURNING), or no row when
 * the dedupe key has a job already (then see jobOfDedupeKeyPostgres).
 */
export function jobInsertPostgres(
  input: EnqueueInput,
  now: Date,
  param: (value: unknown) => string,
): { id: string; sql: string } {
  const id = newId();
  const at = param(storedTimestamp('postgresql', now));
  const values = [
    param(id),
    param(input.queue),
    param(input.dedupeKey ?? null),
    `${param(JSON.stringify(input.payload))}::jsonb`,
    param(input.claimedBy ? 'running' : 'queued'),
    param(input.claimedBy ? 1 : 0),
    param(input.maxAttempts ?? 5),
    param(storedTimestamp('postgresql', input.runAt ?? now)),
    param(input.projectId ?? null),
    at,
    at,
    param(input.claimedBy?.workerId ?? null),
    param(input.claimedBy ? storedTimestamp('postgresql', input.claimedBy.lockedUntil) : null),
  ];
  return {
    id,
    sql: `INSERT INTO "Job" (${jobColumns}) VALUES (${values.join(', ')})
     ON CONFLICT ("dedupeKey") DO NOTHING RETURNING "id"`,
  };
}

/** The job a dedupe key already had (jobInsertPostgres wrote none). */
export async function jobOfDedupeKeyPostgres(
  query: PostgresStatements['query'],
  input: EnqueueInput,
): Promise<EnqueuedJob> {
  const existing = await query<{ id: string }>('SELECT "id" FROM "Job" WHERE "dedupeKey" = $1', [
    input.dedupeKey ?? null,
  ]);
  const [row] = existing.rows;
  if (!row) throw new Error('the job was neither written nor found by its dedupe key');
  return { id: row.id, queue: input.queue, created: false };
}

/** enqueueJobSqlite for a PostgreSQL driver transaction. */
export async function enqueueJobPostgres(
  sql: PostgresStatements,
  input: EnqueueInput,
  now: Date,
): Promise<EnqueuedJob> {
  const params: unknown[] = [];
  const insert = jobInsertPostgres(input, now, (value) => `$${params.push(value)}`);
  const inserted = await sql.query<{ id: string }>(insert.sql, params);
  if (inserted.rows.length === 1) return { id: insert.id, queue: input.queue, created: true };
  return jobOfDedupeKeyPostgres(sql.query, input);
}

/** Wakes the workers of every instance (through Redis when configured) for `queue`. */
export function notifyEnqueued(pubsub: AppPubSub, queue: string): void {
  pubsub.publish('jobEnqueued', { queue });
}

export interface QueueStats {
  queue: string;
  queued: number;
  running: number;
  failed: number;
  /** Age in milliseconds of the oldest job waiting to run (0 when none). */
  oldestQueuedAgeMs: number;
}

/** Depth, age and failures per queue (for metrics and operators). */
export async function queueStats(db: Db): Promise<QueueStats[]> {
  const groups = await db.prisma.job.groupBy({
    by: ['queue', 'status'],
    where: { status: { in: ['queued', 'running', 'failed'] } },
    _count: { _all: true },
    _min: { createdAt: true },
  });
  const byQueue = new Map<string, QueueStats>();
  const now = Date.now();
  for (const g of groups) {
    const stats = byQueue.get(g.queue) ?? { queue: g.queue, queued: 0, running: 0, failed: 0, oldestQueuedAgeMs: 0 };
    const count = g._count._all;
    if (g.status === 'queued') {
      stats.queued = count;
      stats.oldestQueuedAgeMs = g._min.createdAt ? Math.max(0, now - g._min.createdAt.getTime()) : 0;
    } else if (g.status === 'running') stats.running = count;
    else if (g.status === 'failed') stats.failed = count;
    byQueue.set(g.queue, stats);
  }
  return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

/**
 * Marks a queued job done without running it through a worker: for a caller that did the job's
 * work itself, in process (the demo seeder ingests its documents at once). A job already claimed
 * or finished is left alone. Returns whether a job was marked.
 */
export async function finishQueuedJob(db: Db, dedupeKey: string): Promise<boolean> {
  const { count } = await db.prisma.job.updateMany({
    where: { dedupeKey, status: 'queued' },
    data: { status: 'done', finishedAt: new Date() },
  });
  return count > 0;
}
