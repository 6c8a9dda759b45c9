import type { Db, PrismaDb } from '../db/client';
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
