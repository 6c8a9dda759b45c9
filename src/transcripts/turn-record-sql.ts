import type { UsageEvent } from '../analytics/events';
import { addBatchUsage } from '../analytics/usage-turn-recorder';
import { storedTimestamp } from '../db/client';
import { EVALUATION_QUEUE, type EvaluationJobPayload } from '../evaluations/runs';
import { notifyEnqueued } from '../jobs/queue';
import { newId } from '../lib/ids';
import type { RecordTx } from '../runtime/turn-record';
import type { Redactor } from './redaction';
import { publishTranscriptLogs, redactorOf, type SessionKey, type TranscriptDeps } from './service';
import { type LogInput, traceTypeOf } from './validation';

/**
 * The runtime's turns written to their sessions' transcripts inside a record batch's driver
 * transaction (src/runtime/turn-record-batcher.ts): what `recordSessionLogsInTx`
 * (src/transcripts/service.ts) does through Prisma, for many turns at once, in a few statements
 * whatever the number of turns:
 *
 * 1. the turns whose action log (keyed by the turn ID) is there already are skipped (idempotent);
 * 2. each session's transcript is created or, when it exists, has its positions reserved, in one
 *    `INSERT … ON CONFLICT (projectId, environmentId, sessionId) DO UPDATE SET logCount = logCount
 *    + n RETURNING`: a new transcript is made with its logs' count, an existing one gets the next n
 *    positions atomically (concurrent appends get disjoint ranges, as `appendLogs`'s UPDATE gives);
 * 3. every log of every turn in one multi-row INSERT, redacted, with the originals that redaction
 *    changed in another (kept until now + retention);
 * 4. a conversation that reached an end ends its transcript (a conditional UPDATE, so it is ended
 *    once) and queues the project's enabled evaluations, as `endTranscript` does;
 * 5. the `transcripts` usage event of each new transcript goes to the batch's one usage write.
 *
 * Rows are as Prisma writes them (timestamps through `storedTimestamp`, JSON as its text on SQLite
 * and jsonb on PostgreSQL, booleans as 0/1 on SQLite), so Prisma reads them back unchanged. Rows
 * travel as one JSON parameter per statement (json_each on SQLite, jsonb_array_elements on
 * PostgreSQL): the statement texts are fixed, so each is prepared once.
 */

/** A turn's session and logs, as `sessionLogsOf` (./transcript-turn-recorder.ts) gives them. */
export interface TurnLogs extends SessionKey {
  logs: LogInput[];
  /** The first log's ID (the turn ID): when a log has it, the turn was recorded already. */
  onceForLogId: string;
  end: boolean;
}

/** Rows per statement: keeps each JSON parameter to a few hundred kilobytes. */
const rowsPerStatement = 1000;

function chunks<T>(list: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/**
 * A statement's text for its engine, from a template whose parameters are `{n}` (1-based): `$n`
 * on PostgreSQL; on SQLite `?`, numbered by position, so `order` says which parameter each takes.
 */
interface Stmt {
  text: string;
  order: number[] | null;
}

function compile(provider: RecordTx['provider'], template: string): Stmt {
  if (provider === 'postgresql') return { text: template.replace(/\{(\d+)\}/g, '$$$1'), order: null };
  const order: number[] = [];
  const text = template.replace(/\{(\d+)\}/g, (_m, n: string) => {
    order.push(Number(n));
    return '?';
  });
  return { text, order };
}

/** The parameters of `stmt` in its placeholders' order. */
const argsOf = (stmt: Stmt, params: readonly unknown[]) => (stmt.order ? stmt.order.map((n) => params[n - 1]) : params);

/** `SELECT <columns> FROM <the JSON array of row arrays in {1}>`, cast per PostgreSQL type. */
function jsonRows(provider: RecordTx['provider'], pgTypes: readonly string[], tail = ''): string {
  if (provider === 'postgresql') {
    const select = pgTypes.map((type, i) => `CAST(r.value ->> ${i} AS ${type})`).join(', ');
    return `SELECT ${select}${tail}
      FROM jsonb_array_elements(CAST({1} AS jsonb)) WITH ORDINALITY AS r(value, ordinality)
      ORDER BY r.ordinality`;
  }
  // "WHERE true" lets SQLite parse an ON CONFLICT that follows.
  return `SELECT ${pgTypes.map((_, i) => `value ->> ${i}`).join(', ')}${tail} FROM json_each({1}) WHERE true`;
}

/** The statements' texts per engine, built once. */
function statementsOf(provider: RecordTx['provider']) {
  // Casts on PostgreSQL only: on SQLite a CAST to "timestamp(3)" would take numeric affinity.
  const cast = (n: number, pgType: string) => (provider === 'postgresql' ? `CAST({${n}} AS ${pgType})` : `{${n}}`);
  const at = (n: number) => cast(n, 'timestamp(3)');
  const inList = provider === 'postgresql' ? '= ANY(CAST({1} AS text[]))' : 'IN (SELECT value FROM json_each({1}))';
  const templates = {
    existingLogs: `SELECT "id" FROM "TranscriptLog" WHERE "id" ${inList}`,
    patterns: `SELECT "pattern" FROM "TranscriptRedactionPattern" WHERE "projectId" = {1} ORDER BY "createdAt" ASC`,
    upsertTranscripts: `INSERT INTO "Transcript" ("id", "projectId", "environmentId", "sessionId", "userId", "logCount", "createdAt", "updatedAt", "endsWhenIdle")
      ${jsonRows(provider, ['text', 'text', 'text', 'text', 'text', 'integer'], `, ${at(2)}, ${at(2)}, true`)}
      ON CONFLICT ("projectId", "environmentId", "sessionId")
      DO UPDATE SET "logCount" = "Transcript"."logCount" + excluded."logCount", "updatedAt" = excluded."updatedAt"
      RETURNING "id", "projectId", "environmentId", "sessionId", "logCount"`,
    insertLogs: `INSERT INTO "TranscriptLog" ("id", "transcriptId", "seq", "type", "traceType", "data", "createdAt", "updatedAt")
      ${jsonRows(provider, ['text', 'text', 'integer', 'text', 'text', 'jsonb', 'timestamp(3)'], `, ${at(2)}`)}`,
    insertOriginals: `INSERT INTO "TranscriptLogOriginal" ("logId", "data", "expiresAt")
      ${jsonRows(provider, ['text', 'jsonb'], `, ${at(2)}`)}`,
    endTranscript: `UPDATE "Transcript" SET "endedAt" = ${at(1)}, "updatedAt" = ${at(1)}
      WHERE "id" = {2} AND "projectId" = {3} AND "endedAt" IS NULL`,
    evaluations: `SELECT "id" FROM "Evaluation" WHERE "projectId" = {1} AND "enabled" = true ORDER BY "createdAt" ASC`,
    // startEvaluationRun (src/evaluations/runs.ts): a pending result for the run, reset if there was one.
    upsertResult: `INSERT INTO "EvaluationResult" ("id", "evaluationId", "transcriptId", "status", "runId", "createdAt", "updatedAt")
      VALUES ({1}, {2}, {3}, 'pending', {4}, ${at(5)}, ${at(5)})
      ON CONFLICT ("evaluationId", "transcriptId") DO UPDATE SET
        "status" = 'pending', "runId" = excluded."runId", "valueBoolean" = NULL, "valueNumber" = NULL,
        "valueString" = NULL, "reason" = NULL, "cost" = NULL, "model" = NULL, "inputTokens" = NULL,
        "outputTokens" = NULL, "error" = NULL, "updatedAt" = excluded."updatedAt"`,
    // enqueueJob (src/jobs/queue.ts): a new job for a new dedupe key.
    insertJob: `INSERT INTO "Job" ("id", "queue", "dedupeKey", "payload", "status", "attempts", "maxAttempts", "runAt", "projectId", "createdAt", "updatedAt")
      VALUES ({1}, {2}, {3}, ${cast(4, 'jsonb')}, 'queued', 0, 5, ${at(5)}, {6}, ${at(5)}, ${at(5)})
      ON CONFLICT ("dedupeKey") DO NOTHING`,
  };
  return Object.fromEntries(Object.entries(templates).map(([k, v]) => [k, compile(provider, v)])) as Record<
    keyof typeof templates,
    Stmt
  >;
}

const sqlOf = { sqlite: statementsOf('sqlite'), postgresql: statementsOf('postgresql') };

/** A list parameter: a JSON array on SQLite (json_each), an array on PostgreSQL. */
const listParam = (tx: RecordTx, list: readonly string[]) =>
  tx.provider === 'postgresql' ? [...list] : JSON.stringify(list);

interface Session {
  key: string;
  projectId: string;
  environmentId: string;
  sessionId: string;
  userId: string | null;
  /** The ID a new transcript gets; the returned ID differs when the session had one. */
  proposedId: string;
  turns: TurnLogs[];
  count: number;
  end: boolean;
}

/** What the batch wrote, announced once it commits. */
export interface WrittenTurnLogs {
  transcriptId: string;
  logIds: string[];
}

/**
 * Writes the turns' logs (see the top of this file) inside `tx`. Returns what to announce once
 * the transaction has committed.
 */
export async function recordTurnLogsInTx(
  deps: TranscriptDeps,
  tx: RecordTx,
  input: readonly TurnLogs[],
): Promise<() => void> {
  if (input.length === 0) return () => {};
  const sql = sqlOf[tx.provider];
  const all = <R>(stmt: Stmt, params: readonly unknown[]) => tx.all<R>(stmt.text, argsOf(stmt, params));
  const run = (stmt: Stmt, params: readonly unknown[]) => tx.run(stmt.text, argsOf(stmt, params));
  // A turn's logs mostly share a millisecond: the last one's text is reused for the next.
  let lastMs = Number.NaN;
  let lastText = '';
  const ts = (d: Date) => {
    const ms = d.getTime();
    if (ms !== lastMs) {
      lastText = storedTimestamp(tx.provider, d);
      lastMs = ms;
    }
    return lastText;
  };
  const now = new Date();

  // 1. Turns recorded already (a retry, the outbox) write nothing; a turn twice in the input once.
  const existing = await all<{ id: string }>(sql.existingLogs, [
    listParam(
      tx,
      input.map((t) => t.onceForLogId),
    ),
  ]);
  const skip = new Set(existing.map((r) => r.id));
  const turns = input.filter((t) => {
    if (skip.has(t.onceForLogId)) return false;
    skip.add(t.onceForLogId);
    return true;
  });
  if (turns.length === 0) return () => {};

  // 2. The sessions' transcripts, created or with their positions reserved, in key order (lock order).
  const sessions = new Map<string, Session>();
  for (const t of turns) {
    const key = [t.projectId, t.environmentId, t.sessionId].join('\u0000');
    let s = sessions.get(key);
    if (!s) {
      s = {
        key,
        projectId: t.projectId,
        environmentId: t.environmentId,
        sessionId: t.sessionId,
        userId: t.userId ?? null,
        proposedId: newId(),
        turns: [],
        count: 0,
        end: false,
      };
      sessions.set(key, s);
    }
    s.turns.push(t);
    s.count += t.logs.length;
    s.end ||= t.end;
  }
  const ordered = [...sessions.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const transcripts = new Map<string, { id: string; first: number; created: boolean }>();
  for (const chunk of chunks(ordered, rowsPerStatement)) {
    const rows = await all<{
      id: string;
      projectId: string;
      environmentId: string;
      sessionId: string;
      logCount: number;
    }>(sql.upsertTranscripts, [
      JSON.stringify(chunk.map((s) => [s.proposedId, s.projectId, s.environmentId, s.sessionId, s.userId, s.count])),
      ts(now),
    ]);
    for (const r of rows) {
      const s = sessions.get([r.projectId, r.environmentId, r.sessionId].join('\u0000'));
      if (!s) throw new Error('a transcript came back that the batch did not write');
      transcripts.set(s.key, { id: r.id, first: Number(r.logCount) - s.count, created: r.id === s.proposedId });
    }
  }

  // 3. The logs, redacted, in each session's turn order; the originals that redaction changed.
  const redactors = new Map<string, Redactor>();
  const readPatterns = async (projectId: string) =>
    (await all<{ pattern: string }>(sql.patterns, [projectId])).map((r) => r.pattern);
  const logRows: unknown[][] = [];
  const originalRows: unknown[][] = [];
  const written: WrittenTurnLogs[] = [];
  for (const s of ordered) {
    const transcript = transcripts.get(s.key);
    if (!transcript) throw new Error('the transcript of a session was not written');
    let redactor = redactors.get(s.projectId);
    if (!redactor) {
      // From the cache of deps.redactors when there is one (usually no read at all).
      redactor = await redactorOf(deps, readPatterns, s.projectId);
      redactors.set(s.projectId, redactor);
    }
    let seq = transcript.first;
    for (const t of s.turns) {
      const logIds: string[] = [];
      for (const log of t.logs) {
        const id = log.id ?? newId();
        const redacted = redactor.json(log.data ?? null);
        const traceType = traceTypeOf(log);
        logRows.push([
          id,
          transcript.id,
          seq++,
          log.type,
          traceType,
          JSON.stringify(redacted.value ?? null),
          ts(log.createdAt ?? now),
        ]);
        if (redacted.changed) originalRows.push([id, JSON.stringify(log.data ?? null)]);
        logIds.push(id);
      }
      written.push({ transcriptId: transcript.id, logIds });
    }
  }
  for (const chunk of chunks(logRows, rowsPerStatement)) {
    await run(sql.insertLogs, [JSON.stringify(chunk), ts(now)]);
  }
  const expiresAt = new Date(now.getTime() + deps.retentionMs);
  for (const chunk of chunks(originalRows, rowsPerStatement)) {
    await run(sql.insertOriginals, [JSON.stringify(chunk), ts(expiresAt)]);
  }

  // 4. Ends, with the evaluations they queue.
  let evaluationsQueued = 0;
  const evaluationsOf = new Map<string, string[]>();
  for (const s of ordered) {
    if (!s.end) continue;
    const transcript = transcripts.get(s.key)!;
    const ended = await run(sql.endTranscript, [ts(now), transcript.id, s.projectId]);
    if (ended === 0) continue;
    let evaluations = evaluationsOf.get(s.projectId);
    if (!evaluations) {
      evaluations = (await all<{ id: string }>(sql.evaluations, [s.projectId])).map((r) => r.id);
      evaluationsOf.set(s.projectId, evaluations);
    }
    for (const evaluationId of evaluations) {
      const runId = newId();
      await run(sql.upsertResult, [newId(), evaluationId, transcript.id, runId, ts(now)]);
      const payload: EvaluationJobPayload = { evaluationId, transcriptId: transcript.id, runId };
      await run(sql.insertJob, [
        newId(),
        EVALUATION_QUEUE,
        `evaluation:${runId}`,
        JSON.stringify(payload),
        ts(now),
        s.projectId,
      ]);
      evaluationsQueued++;
    }
  }

  // 5. New transcripts are counted (DECISIONS.md §4) in the batch's usage write.
  const created: UsageEvent[] = [];
  for (const s of ordered) {
    const transcript = transcripts.get(s.key)!;
    if (!transcript.created) continue;
    created.push({
      kind: 'transcript',
      projectId: s.projectId,
      environmentId: s.environmentId,
      userId: s.userId,
      transcriptId: transcript.id,
      idempotencyKey: `transcript:${transcript.id}`,
    });
  }
  if (created.length) addBatchUsage(tx, created, deps.pubsub);

  return () => {
    for (const w of written) publishTranscriptLogs(deps.pubsub, w);
    if (evaluationsQueued) notifyEnqueued(deps.pubsub, EVALUATION_QUEUE);
  };
}
