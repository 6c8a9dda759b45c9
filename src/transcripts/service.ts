import type { CountryCode } from 'libphonenumber-js/max';
import { resolveEnvironment } from '../admin/environments';
import { publishUsageCounters, type RecordedUsage, writeUsageEvents } from '../analytics/usage-event-writer';
import type { Db } from '../db/client';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { EVALUATION_QUEUE, startEvaluationRun } from '../evaluations/runs';
import { notifyEnqueued } from '../jobs/queue';
import { AppError, conflict, notFound } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub } from '../lib/pubsub';
import { compileRedactionPatterns, type Redactor } from './redaction';
import { type PatternSource, type RedactorCache, readRedactor } from './redactor-cache';
import { type LogInput, traceTypeOf } from './validation';

/**
 * Transcripts as a domain: created by the runtime on a session's first turn or by ingestion, logs
 * appended in order (redacted, originals kept for the retention period), ended once. Functions that
 * take a `PrismaTx` work inside the caller's transaction; publish with `publishTranscriptLogs` after
 * the commit. See docs/transcripts.md.
 */

export interface TranscriptDeps {
  db: Db;
  pubsub: AppPubSub;
  /** How long the unredacted original of a redacted log is kept, in milliseconds. */
  retentionMs: number;
  /** Regions whose national phone formats redaction reads (TRANSCRIPT_PHONE_REGIONS); default DEFAULT_PHONE_REGIONS. */
  phoneRegions?: readonly CountryCode[];
  /**
   * The projects' redactors kept in memory (src/transcripts/redactor-cache.ts, built with the same
   * `phoneRegions`); absent: each write reads the project's patterns.
   */
  redactors?: RedactorCache;
}

/** TRANSCRIPT_UNREDACTED_RETENTION_DAYS in milliseconds. */
export function retentionMsOf(config: { TRANSCRIPT_UNREDACTED_RETENTION_DAYS: number }): number {
  return config.TRANSCRIPT_UNREDACTED_RETENTION_DAYS * 24 * 3600_000;
}

export interface SessionKey {
  projectId: string;
  environmentId: string;
  sessionId: string;
  userId?: string | null;
  /**
   * A session of Parley's runtime: a new transcript is ended by the idle sweep once it is idle
   * past RUNTIME_SESSION_IDLE_MS (`endIdleTranscripts`). Other runtimes end theirs themselves.
   */
  endsWhenIdle?: boolean;
}

/**
 * The transcript of a session, created on first use. An `INSERT … ON CONFLICT DO NOTHING` on the
 * session's unique key, then a read: concurrent first turns of a session share one transcript, and
 * a lost race never raises a unique violation (which on PostgreSQL would abort the caller's
 * transaction). Prisma's `upsert` does not guarantee that: it may read, then insert.
 */
export async function findOrCreateSessionTranscript(
  tx: PrismaTx,
  key: SessionKey,
): Promise<{ id: string; created: boolean }> {
  const id = newId();
  // Dates bound as parameters are stored exactly as Prisma stores them (ISO text on SQLite).
  const now = new Date();
  const inserted = await tx.$executeRaw`
    INSERT INTO "Transcript" ("id", "projectId", "environmentId", "sessionId", "userId", "logCount", "createdAt", "updatedAt", "endsWhenIdle")
    VALUES (${id}, ${key.projectId}, ${key.environmentId}, ${key.sessionId}, ${key.userId ?? null}, 0, ${now}, ${now}, ${key.endsWhenIdle ?? false})
    ON CONFLICT ("projectId", "environmentId", "sessionId") DO NOTHING`;
  if (inserted === 1) return { id, created: true };
  const row = await tx.transcript.findUniqueOrThrow({
    where: {
      projectId_environmentId_sessionId: {
        projectId: key.projectId,
        environmentId: key.environmentId,
        sessionId: key.sessionId,
      },
    },
    select: { id: true },
  });
  return { id: row.id, created: false };
}

/** Whether the session has a transcript and it was ended. */
export async function isSessionTranscriptEnded(
  tx: PrismaTx,
  key: { projectId: string; environmentId: string; sessionId: string },
): Promise<boolean> {
  const row = await tx.transcript.findUnique({
    where: { projectId_environmentId_sessionId: key },
    select: { endedAt: true },
  });
  return row?.endedAt != null;
}

/** The project's redactor: built-in detectors plus its own patterns, read now. */
export async function loadRedactor(
  tx: PatternSource,
  projectId: string,
  phoneRegions?: readonly CountryCode[],
): Promise<Redactor> {
  return readRedactor(tx, projectId, phoneRegions);
}

/** The project's redactor: from `deps.redactors` when there is one, else read from `tx`. */
export function redactorOf(
  deps: Pick<TranscriptDeps, 'redactors' | 'phoneRegions'>,
  tx: PatternSource,
  projectId: string,
): Promise<Redactor> {
  return deps.redactors ? deps.redactors.get(tx, projectId) : loadRedactor(tx, projectId, deps.phoneRegions);
}

export interface AppendedLogs {
  transcriptId: string;
  /** IDs of the new logs, in order. */
  logIds: string[];
}

/**
 * Appends logs to a transcript, in order after the ones it has. Their data is stored redacted; the
 * original of a log that redaction changed is kept until now + retention. Bumps `updatedAt`.
 */
export async function appendLogs(
  tx: PrismaTx,
  input: {
    transcriptId: string;
    projectId: string;
    logs: readonly LogInput[];
    retentionMs: number;
    redactor?: Redactor;
    phoneRegions?: readonly CountryCode[];
    now?: Date;
  },
): Promise<AppendedLogs> {
  const { transcriptId, logs } = input;
  if (logs.length === 0) return { transcriptId, logIds: [] };
  const now = input.now ?? new Date();
  const redactor = input.redactor ?? (await loadRedactor(tx, input.projectId, input.phoneRegions));
  // Reserve positions [logCount - n, logCount) atomically: concurrent appends get disjoint ranges.
  const { logCount } = await tx.transcript.update({
    where: { id: transcriptId },
    data: { logCount: { increment: logs.length }, updatedAt: now },
    select: { logCount: true },
  });
  const first = logCount - logs.length;
  const rows: {
    id: string;
    transcriptId: string;
    seq: number;
    type: string;
    traceType: string | null;
    data: object;
    createdAt: Date;
    updatedAt: Date;
  }[] = [];
  const originals: { logId: string; data: object; expiresAt: Date }[] = [];
  const expiresAt = new Date(now.getTime() + input.retentionMs);
  logs.forEach((log, index) => {
    const id = log.id ?? newId();
    const redacted = redactor.json(log.data ?? null);
    const traceType = traceTypeOf(log);
    const createdAt = log.createdAt ?? now;
    rows.push({
      id,
      transcriptId,
      seq: first + index,
      type: log.type,
      traceType,
      data: redacted.value as object,
      createdAt,
      updatedAt: now,
    });
    if (redacted.changed) originals.push({ logId: id, data: log.data as object, expiresAt });
  });
  await tx.transcriptLog.createMany({ data: rows });
  if (originals.length) await tx.transcriptLogOriginal.createMany({ data: originals });
  return { transcriptId, logIds: rows.map((r) => r.id) };
}

/** Tells subscribers of the transcript about new logs. Call after the transaction commits. */
export function publishTranscriptLogs(pubsub: AppPubSub, appended: AppendedLogs): void {
  if (appended.logIds.length === 0) return;
  pubsub.publish('transcriptEvent', appended.transcriptId, {
    transcriptId: appended.transcriptId,
    kind: 'logs',
    logIds: appended.logIds,
  });
}

/**
 * The `transcripts` usage event of a new transcript (DECISIONS.md §4), written in the transaction
 * that creates it, so the count exists exactly when the transcript does. Publish the result after
 * the commit.
 */
async function recordTranscriptCreated(
  deps: Pick<TranscriptDeps, 'db'>,
  tx: PrismaTx,
  input: { projectId: string; environmentId: string; userId?: string | null; transcriptId: string },
): Promise<RecordedUsage> {
  return writeUsageEvents(
    tx,
    [
      {
        kind: 'transcript',
        projectId: input.projectId,
        environmentId: input.environmentId,
        userId: input.userId ?? null,
        transcriptId: input.transcriptId,
        idempotencyKey: `transcript:${input.transcriptId}`,
      },
    ],
    { provider: deps.db.provider },
  );
}

/**
 * Records logs of a session in one transaction (creating its transcript), then publishes them.
 *
 * With `onceForLogId` (the ID of the first log, which the caller chooses: the runtime passes the
 * turn ID) the call is idempotent: when a log of that ID exists, nothing is written and `null` is
 * returned, so a turn recorded again after a retry or from the outbox is not appended twice. Two
 * such calls at once: the second one's insert of that ID fails on the primary key once the first
 * commits, and it answers `null` too.
 *
 * With `end: true` (the conversation reached its end) the transcript is also ended in the same
 * transaction, queueing its evaluations as `endTranscript` does: the logs and the end commit together.
 */
export async function recordSessionLogs(
  deps: TranscriptDeps,
  input: SessionKey & { logs: readonly LogInput[]; onceForLogId: string; end?: boolean },
): Promise<(AppendedLogs & { created: boolean }) | null>;
export async function recordSessionLogs(
  deps: TranscriptDeps,
  input: SessionKey & { logs: readonly LogInput[]; end?: boolean },
): Promise<AppendedLogs & { created: boolean }>;
export async function recordSessionLogs(
  deps: TranscriptDeps,
  input: SessionKey & { logs: readonly LogInput[]; onceForLogId?: string; end?: boolean },
): Promise<(AppendedLogs & { created: boolean }) | null> {
  const { onceForLogId } = input;
  let written: RecordedSessionLogs | null;
  try {
    written = await deps.db.prisma.$transaction((tx) => recordSessionLogsInTx(deps, tx, input));
  } catch (err) {
    if (isUniqueViolation(err) && onceForLogId !== undefined && (await logExists(deps.db.prisma, onceForLogId))) {
      return null;
    }
    throw err;
  }
  if (!written) return null;
  return publishRecordedSessionLogs(deps, written);
}

/** What `recordSessionLogsInTx` wrote, for `publishRecordedSessionLogs` once it commits. */
export type RecordedSessionLogs = AppendedLogs & {
  created: boolean;
  usage: RecordedUsage | null;
  evaluationsQueued: number;
};

async function logExists(client: PrismaTx, id: string): Promise<boolean> {
  return (await client.transcriptLog.findUnique({ where: { id }, select: { id: true } })) !== null;
}

/**
 * `recordSessionLogs` inside the caller's transaction (the runtime records many turns in one):
 * null when `onceForLogId` is there already. `redactor`, when given, is the project's (loaded once
 * for many sessions of one project). Call `publishRecordedSessionLogs` after the commit.
 */
export async function recordSessionLogsInTx(
  deps: TranscriptDeps,
  tx: PrismaTx,
  input: SessionKey & { logs: readonly LogInput[]; onceForLogId?: string; end?: boolean },
  redactor?: Redactor,
): Promise<RecordedSessionLogs | null> {
  if (input.onceForLogId !== undefined && (await logExists(tx, input.onceForLogId))) return null;
  const appended = await appendSessionLogs(deps, tx, input, redactor);
  const ended = input.end
    ? await endTranscriptInTx(tx, { projectId: input.projectId, transcriptId: appended.transcriptId, now: new Date() })
    : null;
  return { ...appended, evaluationsQueued: ended?.evaluationsQueued ?? 0 };
}

/** Announces what `recordSessionLogsInTx` wrote, once its transaction has committed. */
export function publishRecordedSessionLogs(
  deps: Pick<TranscriptDeps, 'pubsub'>,
  written: RecordedSessionLogs,
): AppendedLogs & { created: boolean } {
  const { usage, evaluationsQueued, ...result } = written;
  publishTranscriptLogs(deps.pubsub, result);
  if (usage) publishUsageCounters(deps.pubsub, usage);
  if (evaluationsQueued) notifyEnqueued(deps.pubsub, EVALUATION_QUEUE);
  return result;
}

async function appendSessionLogs(
  deps: TranscriptDeps,
  tx: PrismaTx,
  input: SessionKey & { logs: readonly LogInput[] },
  redactor?: Redactor,
): Promise<AppendedLogs & { created: boolean; usage: RecordedUsage | null }> {
  const transcript = await findOrCreateSessionTranscript(tx, input);
  const appended = await appendLogs(tx, {
    transcriptId: transcript.id,
    projectId: input.projectId,
    logs: input.logs,
    redactor: redactor ?? (input.logs.length ? await redactorOf(deps, tx, input.projectId) : undefined),
    retentionMs: deps.retentionMs,
    phoneRegions: deps.phoneRegions,
  });
  const usage = transcript.created
    ? await recordTranscriptCreated(deps, tx, { ...input, transcriptId: transcript.id })
    : null;
  return { ...appended, created: transcript.created, usage };
}

/** Ingestion: a new transcript for a session, with its first logs. 409 when the session has one. */
export async function createTranscript(
  deps: TranscriptDeps,
  input: {
    projectId: string;
    environment?: string | null;
    sessionId: string;
    userId?: string | null;
    logs?: readonly LogInput[] | null;
  },
): Promise<{ id: string }> {
  let appended: AppendedLogs;
  let usage: RecordedUsage | null = null;
  try {
    appended = await deps.db.prisma.$transaction(async (tx) => {
      const { id: environmentId } = await resolveEnvironment(tx, input.projectId, input.environment);
      const existing = await tx.transcript.findUnique({
        where: {
          projectId_environmentId_sessionId: { projectId: input.projectId, environmentId, sessionId: input.sessionId },
        },
        select: { id: true },
      });
      if (existing) throw sessionTaken(input.sessionId, existing.id);
      const transcript = await tx.transcript.create({
        data: {
          id: newId(),
          projectId: input.projectId,
          environmentId,
          sessionId: input.sessionId,
          userId: input.userId ?? null,
        },
        select: { id: true },
      });
      const logs = input.logs ?? [];
      const appendedLogs = await appendLogs(tx, {
        transcriptId: transcript.id,
        projectId: input.projectId,
        logs,
        redactor: logs.length ? await redactorOf(deps, tx, input.projectId) : undefined,
        retentionMs: deps.retentionMs,
        phoneRegions: deps.phoneRegions,
      });
      usage = await recordTranscriptCreated(deps, tx, {
        projectId: input.projectId,
        environmentId,
        userId: input.userId,
        transcriptId: transcript.id,
      });
      return appendedLogs;
    });
  } catch (err) {
    // Two creations of one session at once: the unique key let one through.
    if (isUniqueViolation(err)) throw sessionTaken(input.sessionId);
    throw err;
  }
  publishTranscriptLogs(deps.pubsub, appended);
  if (usage) publishUsageCounters(deps.pubsub, usage);
  return { id: appended.transcriptId };
}

function sessionTaken(sessionId: string, transcriptId?: string) {
  return conflict(
    transcriptId
      ? `The session "${sessionId}" already has transcript "${transcriptId}"; append logs to it instead`
      : `The session "${sessionId}" already has a transcript; append logs to it instead`,
  );
}

/** Ingestion: appends logs to an existing transcript of the project. */
export async function appendTranscriptLogs(
  deps: TranscriptDeps,
  input: { projectId: string; transcriptId: string; logs: readonly LogInput[] },
): Promise<AppendedLogs> {
  const appended = await deps.db.prisma.$transaction(async (tx) =>
    appendLogs(tx, {
      transcriptId: input.transcriptId,
      projectId: input.projectId,
      logs: input.logs,
      redactor: input.logs.length ? await redactorOf(deps, tx, input.projectId) : undefined,
      retentionMs: deps.retentionMs,
      phoneRegions: deps.phoneRegions,
    }),
  );
  publishTranscriptLogs(deps.pubsub, appended);
  return appended;
}

/**
 * Marks a transcript ended and, in the same transaction, enqueues one evaluation job per enabled
 * evaluation of the project (with a pending result each). Ending an ended transcript changes
 * nothing: the conditional update lets exactly one of several concurrent calls through.
 */
export async function endTranscript(
  deps: Pick<TranscriptDeps, 'db' | 'pubsub'>,
  input: { projectId: string; transcriptId: string; now?: Date },
): Promise<{ endedAt: Date; evaluationsQueued: number }> {
  const now = input.now ?? new Date();
  const outcome = await deps.db.prisma.$transaction((tx) => endTranscriptInTx(tx, { ...input, now }));
  if (outcome.evaluationsQueued) notifyEnqueued(deps.pubsub, EVALUATION_QUEUE);
  return { endedAt: outcome.endedAt ?? now, evaluationsQueued: outcome.evaluationsQueued };
}

/**
 * `endTranscript` inside the caller's transaction (call `notifyEnqueued` after the commit when
 * evaluations were queued). With `idleBefore`, only a transcript not updated since then is ended:
 * the idle sweep never ends a session that a turn just continued.
 */
async function endTranscriptInTx(
  tx: PrismaTx,
  input: { projectId: string; transcriptId: string; now: Date; idleBefore?: Date },
): Promise<{ ended: boolean; endedAt: Date | null; evaluationsQueued: number }> {
  const { now } = input;
  const { count } = await tx.transcript.updateMany({
    where: {
      id: input.transcriptId,
      projectId: input.projectId,
      endedAt: null,
      ...(input.idleBefore ? { updatedAt: { lt: input.idleBefore } } : {}),
    },
    data: { endedAt: now, updatedAt: now },
  });
  if (count === 0) {
    const existing = await tx.transcript.findFirst({
      where: { id: input.transcriptId, projectId: input.projectId },
      select: { endedAt: true },
    });
    if (!existing) throw notFound('Transcript', input.transcriptId);
    return { ended: false, endedAt: existing.endedAt, evaluationsQueued: 0 };
  }
  const evaluations = await tx.evaluation.findMany({
    where: { projectId: input.projectId, enabled: true },
    select: { id: true },
    orderBy: { createdAt: 'asc' },
  });
  for (const evaluation of evaluations) {
    await startEvaluationRun(tx, {
      projectId: input.projectId,
      evaluationId: evaluation.id,
      transcriptId: input.transcriptId,
    });
  }
  return { ended: true, endedAt: now, evaluationsQueued: evaluations.length };
}

/**
 * The idle sweep (docs/transcripts.md "Ending"): ends the open transcripts of runtime sessions
 * not updated for `idleMs`, as `POST …/end` would, a batch at a time through the index on
 * (endsWhenIdle, endedAt, updatedAt). Each end is its own conditional update, so sweeps running
 * on several instances at once end each transcript once. Returns how many it ended.
 */
export async function endIdleTranscripts(
  deps: Pick<TranscriptDeps, 'db' | 'pubsub'>,
  input: { idleMs: number; now?: Date; batchSize?: number; maxBatches?: number },
): Promise<number> {
  const now = input.now ?? new Date();
  const idleBefore = new Date(now.getTime() - input.idleMs);
  const batchSize = input.batchSize ?? 200;
  let ended = 0;
  let queued = 0;
  for (let batch = 0; batch < (input.maxBatches ?? 50); batch++) {
    const idle = await deps.db.prisma.transcript.findMany({
      where: { endsWhenIdle: true, endedAt: null, updatedAt: { lt: idleBefore } },
      orderBy: { updatedAt: 'asc' },
      select: { id: true, projectId: true },
      take: batchSize,
    });
    for (const t of idle) {
      try {
        const outcome = await deps.db.prisma.$transaction((tx) =>
          endTranscriptInTx(tx, { projectId: t.projectId, transcriptId: t.id, now, idleBefore }),
        );
        if (outcome.ended) ended++;
        queued += outcome.evaluationsQueued;
      } catch (err) {
        // Deleted since it was read: nothing to end.
        if (!(err instanceof AppError && err.code === 'NOT_FOUND')) throw err;
      }
    }
    if (idle.length < batchSize) break;
  }
  if (queued) notifyEnqueued(deps.pubsub, EVALUATION_QUEUE);
  return ended;
}

/** Deletes a transcript with its logs, kept originals, property values and evaluation results. */
export async function deleteTranscript(db: Db, input: { projectId: string; transcriptId: string }): Promise<void> {
  // One statement; the foreign keys cascade to every dependent row, so nothing is left half-deleted.
  const { count } = await db.prisma.transcript.deleteMany({
    where: { id: input.transcriptId, projectId: input.projectId },
  });
  if (count === 0) throw notFound('Transcript', input.transcriptId);
}

/** Deletes the unredacted originals whose retention ended. Returns how many. */
export async function purgeExpiredOriginals(db: Db, now: Date = new Date()): Promise<number> {
  const { count } = await db.prisma.transcriptLogOriginal.deleteMany({ where: { expiresAt: { lte: now } } });
  return count;
}

/**
 * Replaces a project's redaction patterns (checked first: a bad one changes nothing). Once they
 * are committed, this instance's cached redactor of the project is dropped before the call
 * returns, and the change is announced so other instances drop theirs (src/transcripts/redactor-cache.ts).
 */
export async function setRedactionPatterns(
  deps: Pick<TranscriptDeps, 'db' | 'pubsub' | 'redactors'>,
  input: { projectId: string; patterns: readonly string[] },
) {
  compileRedactionPatterns(input.patterns);
  await deps.db.prisma.$transaction(async (tx) => {
    await tx.transcriptRedactionPattern.deleteMany({ where: { projectId: input.projectId } });
    const base = Date.now();
    await tx.transcriptRedactionPattern.createMany({
      data: input.patterns.map((pattern, i) => ({
        id: newId(),
        projectId: input.projectId,
        pattern,
        // Keeps the given order (patterns apply in it).
        createdAt: new Date(base + i),
      })),
    });
  });
  deps.redactors?.forget(input.projectId);
  deps.pubsub.publish('redactionPatternsChanged', { projectId: input.projectId });
}
