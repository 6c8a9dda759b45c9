import { hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/client';
import { type DbClient, type EnqueueInput, enqueueJob } from '../jobs/queue';
import { type JobHandler, PermanentJobError } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { TurnRecord, TurnRecorder } from './turn-record';

/**
 * The turn outbox: how a turn's record (transcript logs, usage events) is written durably and in
 * order per user (docs/runtime.md "What is saved").
 *
 * 1. A turn writes its TurnRecord as a job of the `turn-record` queue before anything else can
 *    follow it: in the transaction of its state commit (a completed turn), or before it frees the
 *    user's lease (any other turn). So the record exists exactly when the state does, and before the
 *    user's next turn can start.
 * 2. The turn then drains its user's outbox, oldest first, through its own entry: each entry is
 *    handed to the TurnRecorder (retried a few times on error) and deleted once recorded. An entry
 *    left behind by an earlier turn (its recording failed, or its process died) is recorded first.
 * 3. An entry still there after `takeOverAfterMs` is run by the job runner, which drains the same
 *    way through that entry, with backoff between attempts.
 *
 * Recorders must be idempotent per turn ID (transcripts key the action log by it, usage events
 * are keyed `turn:<id>:…`), since an entry can be recorded twice: by a turn and by the runner, or
 * again after a failure that came after the write. Entries of a user are found by a key prefix
 * (a hash of environment and user: fixed length, no LIKE wildcards, no case folding).
 */

export const TURN_RECORD_QUEUE = 'turn-record';

/** How long an entry is left to the turn that wrote it before the job runner takes it over. */
const takeOverAfterMs = 30_000;
/** Runner attempts per entry (backoff from 1 s, doubling, capped at 10 minutes: about half an hour). */
const outboxMaxAttempts = 12;
/** Entries one drain records at most: a bound, not an expected size (normally one). */
const maxEntriesPerDrain = 1000;

export interface TurnOutboxDeps {
  db: Db;
  recorder: TurnRecorder;
  logger: Logger;
}

export interface OutboxUser {
  environmentId: string;
  userId: string;
}

/** The key prefix of a user's entries. */
export function userPrefix(user: OutboxUser): string {
  const key = `${user.environmentId}\u0000${user.userId}`;
  let prefix = recentPrefixes.get(key);
  if (prefix === undefined) {
    prefix = `${TURN_RECORD_QUEUE}:${hash('sha256', key, 'hex').slice(0, 32)}:`;
    if (recentPrefixes.size >= maxRecentPrefixes) recentPrefixes.clear();
    recentPrefixes.set(key, prefix);
  }
  return prefix;
}

/**
 * Prefixes of the users seen lately: a turn's outbox job and its record batch, a few
 * milliseconds later, ask for the same user's prefix, so one hash per turn. Cleared when full.
 */
const recentPrefixes = new Map<string, string>();
const maxRecentPrefixes = 1024;

function userOf(record: TurnRecord): OutboxUser {
  return { environmentId: record.environmentID, userId: record.userID };
}

/**
 * The outbox job of a turn's record, as the state commit writes it: its payload holds the record
 * itself, which the commit serialises at once with JSON.stringify (Dates become ISO strings there;
 * reviveTurnRecord turns them back), so the record is serialised once per turn, not three times.
 * The text is the one a JSON copy of the record would give.
 */
export function turnRecordJob(record: TurnRecord, now = new Date()): EnqueueInput {
  return {
    queue: TURN_RECORD_QUEUE,
    payload: { record: record as unknown as Record<string, unknown> },
    dedupeKey: `${userPrefix(userOf(record))}${record.turnID}`,
    runAt: new Date(now.getTime() + takeOverAfterMs),
    maxAttempts: outboxMaxAttempts,
    projectId: record.projectID,
  };
}

/** Writes a turn's record to the outbox, inside the caller's transaction when given one. Returns the job ID. */
export async function enqueueTurnRecord(client: DbClient, record: TurnRecord, now = new Date()): Promise<string> {
  const job = turnRecordJob(record, now);
  // Through Prisma the payload must be plain JSON values: a JSON copy, Dates as ISO strings.
  job.payload = { record: JSON.parse(JSON.stringify(record)) as Record<string, unknown> };
  const written = await enqueueJob(client, job);
  return written.id;
}

/** The TurnRecord of an outbox payload, or an error message when it is not one. */
export function reviveTurnRecord(payload: unknown): TurnRecord | string {
  const record = (payload as { record?: Record<string, unknown> } | null)?.record;
  if (!record || typeof record !== 'object') return 'the payload holds no turn record';
  for (const field of ['turnID', 'projectID', 'environmentID', 'userID', 'startedAt', 'finishedAt']) {
    if (typeof record[field] !== 'string') return `the turn record has no ${field}`;
  }
  return {
    ...(record as unknown as TurnRecord),
    startedAt: new Date(record.startedAt as string),
    finishedAt: new Date(record.finishedAt as string),
  };
}

/** Hands a record to the recorder, trying again `tries - 1` times on error (it is idempotent). */
async function recordWithRetries(recorder: TurnRecorder, record: TurnRecord, tries: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await recorder.record(record);
      return;
    } catch (err) {
      if (attempt >= tries) throw err;
      // A busy SQLite writer, a dropped connection, a serialization failure: wait a little.
      await sleep(100 * 4 ** (attempt - 1));
    }
  }
}

export interface DrainOptions {
  /** Stop after this entry (the caller's own); without it, drain every entry of the user. */
  through?: string;
  /** An entry the job runner is running: left for the runner to mark done instead of deleted. */
  runningJobId?: string;
  /** Recorder calls per entry before giving up for now. */
  tries: number;
  /**
   * When an earlier entry cannot be recorded, record `through` anyway, out of order: the runner's
   * last attempt at an entry, which would otherwise be lost behind a record that keeps failing.
   */
  outOfOrderAsLastResort?: boolean;
}

export class TurnRecordBlockedError extends Error {
  constructor(
    readonly blockedBy: string,
    cause: unknown,
  ) {
    super(`an earlier turn of the user (outbox job ${blockedBy}) could not be recorded yet`, { cause });
    this.name = 'TurnRecordBlockedError';
  }
}

/**
 * Records the user's outbox entries oldest first, through `opts.through`, deleting each once
 * recorded. Throws when an entry cannot be recorded (it and the later ones stay for later), a
 * TurnRecordBlockedError when that entry is an earlier one than `through`.
 */
export async function drainTurnRecords(deps: TurnOutboxDeps, user: OutboxUser, opts: DrainOptions): Promise<void> {
  const { db } = deps;
  const log = deps.logger.child({ component: 'runtime', outbox: TURN_RECORD_QUEUE });
  const pending = {
    queue: TURN_RECORD_QUEUE,
    dedupeKey: { startsWith: userPrefix(user) },
    status: { in: ['queued', 'running'] },
  };
  // Entries up to `through` in the drain's order; none when it was recorded already (by another drain).
  let upTo = {};
  if (opts.through !== undefined) {
    const last = await db.prisma.job.findFirst({
      where: { ...pending, id: opts.through },
      select: { createdAt: true },
    });
    if (!last) return;
    upTo = {
      OR: [{ createdAt: { lt: last.createdAt } }, { createdAt: last.createdAt, id: { lte: opts.through } }],
    };
  }
  for (let n = 0; n < maxEntriesPerDrain; n++) {
    const head = await db.prisma.job.findFirst({
      where: { ...pending, ...upTo },
      // Turns of one user are serialised by the state lease, so their entries are created in turn order.
      orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      select: { id: true, payload: true },
    });
    if (!head) return;
    const record = reviveTurnRecord(head.payload);
    if (typeof record === 'string') {
      // Nothing can ever record it; it must not hold up the user's other records.
      log.error({ jobId: head.id, problem: record }, 'dropping an outbox entry that holds no turn record');
      await db.prisma.job.updateMany({
        where: { id: head.id, status: { in: ['queued', 'running'] } },
        data: { status: 'failed', lastError: record, finishedAt: new Date(), lockedBy: null, lockedUntil: null },
      });
      if (head.id === opts.through) return;
      continue;
    }
    try {
      await recordWithRetries(deps.recorder, record, opts.tries);
    } catch (err) {
      if (opts.through === undefined || head.id === opts.through) throw err;
      if (!opts.outOfOrderAsLastResort) throw new TurnRecordBlockedError(head.id, err);
      log.error(
        { jobId: head.id, through: opts.through, err },
        'an earlier turn of the user still cannot be recorded; recording this one out of order rather than lose it',
      );
      await recordThrough(deps, opts);
      return;
    }
    if (head.id !== opts.runningJobId) await db.prisma.job.deleteMany({ where: { id: head.id } });
    if (head.id === opts.through) return;
  }
}

/** Records the entry `opts.through` alone (the last-resort path of drainTurnRecords). */
async function recordThrough(deps: TurnOutboxDeps, opts: DrainOptions): Promise<void> {
  const own = await deps.db.prisma.job.findUnique({ where: { id: opts.through }, select: { id: true, payload: true } });
  if (!own) return;
  const record = reviveTurnRecord(own.payload);
  if (typeof record === 'string') throw new PermanentJobError(record);
  await recordWithRetries(deps.recorder, record, opts.tries);
  if (own.id !== opts.runningJobId) await deps.db.prisma.job.deleteMany({ where: { id: own.id } });
}

/**
 * Records a finished turn: drains the user's outbox through the turn's own entry. Without an
 * entry (writing it failed), the earlier entries first and then the record itself. Never throws:
 * what could not be recorded stays in the outbox for the job runner, and the client, which has
 * its answer, is not told.
 */
export async function recordFinishedTurn(
  deps: TurnOutboxDeps,
  record: TurnRecord,
  outboxJobId: string | null,
): Promise<void> {
  const log = deps.logger.child({ component: 'runtime', turnId: record.turnID });
  try {
    if (outboxJobId) {
      await drainTurnRecords(deps, userOf(record), { through: outboxJobId, tries: 3 });
      return;
    }
    await drainTurnRecords(deps, userOf(record), { tries: 3 }).catch((err: unknown) =>
      log.error({ err }, 'could not record earlier turns of the user from the outbox'),
    );
    await recordWithRetries(deps.recorder, record, 3);
  } catch (err) {
    if (outboxJobId) log.warn({ err, jobId: outboxJobId }, 'the turn was not recorded yet; its outbox entry stays');
    else log.error({ err }, 'the turn could not be recorded, and it has no outbox entry: its record is lost');
  }
}

/** The job runner's side: an outbox entry its turn did not record (see the module comment). */
export function createTurnRecordJobHandler(deps: TurnOutboxDeps): JobHandler {
  return async (job) => {
    const record = reviveTurnRecord(job.payload);
    if (typeof record === 'string') throw new PermanentJobError(record);
    await drainTurnRecords(deps, userOf(record), {
      through: job.id,
      runningJobId: job.id,
      tries: 1,
      outOfOrderAsLastResort: job.attempt >= job.maxAttempts,
    });
  };
}
