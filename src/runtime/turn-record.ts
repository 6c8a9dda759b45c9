import type { Logger } from '../lib/logger';
import type { AgentStepRecord, ApiCallRecord, FunctionCallRecord, IntegrationCallRecord } from './steps/step-type';
import type { OutputTrace } from './trace-format';
import type { RuntimeAction } from './types';

/**
 * Everything a turn did, handed to the TurnRecorder once the turn is over: after the state commit
 * on success, and also when the turn failed, timed out, hit the step limit or lost its client. It
 * reaches the recorder through the turn outbox (src/runtime/turn-outbox.ts), as JSON and back.
 * Transcripts (a session's log) and usage events (interactions, users, intents, API and function
 * calls, agent invocations) are both projections of it; docs/runtime.md "Turn records" lists what
 * each field feeds.
 */
export interface TurnRecord {
  /** A new ID per turn (24 hex characters). */
  turnID: string;
  projectID: string;
  environmentID: string;
  environmentAlias: string;
  userID: string;
  /** The conversation session: a transcript is keyed by (project, environment, sessionID). */
  sessionID: string;
  /** True on the session's first turn (a transcript is created then). */
  sessionStarted: boolean;
  /** The agent version that ran; null only when the turn failed before one was loaded. */
  agent: { agentID: string; name: string; versionID: string; versionNumber: number } | null;
  /** The request's action, as received. */
  action: RuntimeAction;
  /** `interactions.type` of DECISIONS.md §4: the action type, with button requests (`path-…`) as `button`. */
  interactionType: string;
  /** Variables the request merged in before the turn, if any. */
  requestVariables: Record<string, unknown> | null;
  /**
   * Every trace of the turn in order, each with `time` (epoch ms): completion pieces merged into
   * one `text` trace with `ai: true`; nothing filtered (block, flow, path and debug included).
   */
  traces: OutputTrace[];
  /** Intents matched by NLU above the threshold, or given by an intent action. */
  intents: { name: string; confidence: number; source: 'nlu' | 'request' }[];
  apiCalls: ApiCallRecord[];
  functionCalls: FunctionCallRecord[];
  /** MCP tools agent steps called (absent in records written before agent steps existed). */
  integrationCalls?: IntegrationCallRecord[];
  /** Agent steps left in this turn (absent in records written before agent steps existed). */
  agentSteps?: AgentStepRecord[];
  /**
   * completed: the turn ran to a waiting step or the end, and its state was saved;
   * failed: an error stopped it (state unchanged); timeout: the time limit stopped it (state
   * unchanged); step-limit: the step limit stopped it (state unchanged).
   */
  outcome: 'completed' | 'failed' | 'timeout' | 'step-limit';
  /** outcome === 'completed' (agent_usage.successCount). */
  success: boolean;
  error: string | null;
  /** Whether the new state was committed. */
  stateSaved: boolean;
  /** Whether the conversation reached an end (end or handoff step), clearing the stack. */
  conversationEnded: boolean;
  /** The client went away before the turn finished; the turn still ran to its end. */
  clientDisconnected: boolean;
  stepsRun: number;
  startedAt: Date;
  finishedAt: Date;
}

/**
 * Something that records a finished turn somewhere. The ones installed by `createServices`:
 * `createTranscriptTurnRecorder` (src/transcripts/transcript-turn-recorder.ts, the session's
 * transcript), `createUsageTurnRecorder` (src/analytics/usage-turn-recorder.ts, usage events) and
 * `createLoggingTurnRecorder` below, side by side through `combineTurnRecorders`.
 */
export interface TurnRecorder {
  /**
   * Called for every turn, in turn order per user, at least once: it must be idempotent per
   * `turnID`. A throw means "not recorded, try again" (the turn outbox retries, later from the job
   * runner); it never reaches the client, which has its answer.
   */
  record(turn: TurnRecord): Promise<void>;
  /**
   * Records many turns (in turn order per user) inside the caller's driver transaction: what it
   * writes commits or rolls back with the transaction, and it must be idempotent per `turnID` as
   * `record` is. Returns what to do once the transaction has committed (announcements, log lines).
   * Without it, the runtime records each turn on its own through `record`
   * (src/runtime/turn-record-batcher.ts).
   */
  recordBatch?(tx: RecordTx, turns: readonly TurnRecord[]): Promise<() => void>;
}

/**
 * The database transaction a batch of turns is recorded in (src/runtime/turn-record-batcher.ts):
 * statements straight through the driver, no Prisma operation (docs/performance.md "Turn path").
 * On SQLite it holds the one connection from BEGIN IMMEDIATE to COMMIT: a recorder must await
 * nothing but these statements (a Prisma operation or another driver call would wait forever).
 * Values are stored as Prisma stores them (`storedTimestamp` of src/db/client.ts, JSON as text on
 * SQLite), so Prisma reads the rows back as its own.
 */
export interface RecordTx {
  provider: 'sqlite' | 'postgresql';
  /** Runs a statement (`?` placeholders on SQLite, `$1…` on PostgreSQL) and returns its rows. */
  all<R>(sql: string, params: readonly unknown[]): Promise<R[]>;
  /** Runs a statement that returns no rows; resolves with how many rows it changed. */
  run(sql: string, params: readonly unknown[]): Promise<number>;
  /**
   * Runs `fn` once every recorder has written its part, still inside the transaction (a write
   * several recorders add to, such as the batch's one usage write); what it returns runs after the
   * commit. Functions run in the order they were added.
   */
  beforeCommit(fn: () => Promise<() => void>): void;
}

/** One structured log line per turn (component `runtime`), beside the transcript and usage recorders. */
export function createLoggingTurnRecorder(logger: Logger): TurnRecorder {
  const log = logger.child({ component: 'runtime' });
  const logTurn = (turn: TurnRecord) =>
    log.info(
      {
        turnID: turn.turnID,
        projectID: turn.projectID,
        environmentID: turn.environmentID,
        sessionID: turn.sessionID,
        agentID: turn.agent?.agentID ?? null,
        interactionType: turn.interactionType,
        outcome: turn.outcome,
        traces: turn.traces.length,
        intents: turn.intents.map((i) => i.name),
        apiCalls: turn.apiCalls.length,
        functionCalls: turn.functionCalls.length,
        integrationCalls: turn.integrationCalls?.length ?? 0,
        clientDisconnected: turn.clientDisconnected,
        ms: turn.finishedAt.getTime() - turn.startedAt.getTime(),
      },
      'turn',
    );
  return {
    async record(turn) {
      logTurn(turn);
    },
    async recordBatch(_tx, turns) {
      // Logged once the batch is committed, as `record` logs once the turn is recorded.
      return () => {
        for (const turn of turns) logTurn(turn);
      };
    },
  };
}

/**
 * Hands each turn to several recorders (transcripts and usage) side by side. One failing does not
 * stop the others; then the combination throws, so the turn is recorded again later, and the
 * recorders that succeeded skip it then (each is idempotent per turn).
 */
export function combineTurnRecorders(recorders: readonly TurnRecorder[], logger: Logger): TurnRecorder {
  return {
    async record(turn) {
      const results = await Promise.allSettled(recorders.map((r) => r.record(turn)));
      const failures = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
      for (const err of failures) logger.warn({ err, turnID: turn.turnID }, 'turn recorder failed');
      if (failures.length === 1) throw failures[0];
      if (failures.length > 1) throw new AggregateError(failures, `${failures.length} turn recorders failed`);
    },
    // A batch is all or nothing in one transaction: only when every recorder can write in it.
    recordBatch: recorders.every((r) => r.recordBatch)
      ? async (tx, turns) => {
          const after: (() => void)[] = [];
          // One transaction is one connection: the recorders write one after another.
          for (const r of recorders) after.push(await r.recordBatch!(tx, turns));
          return () => {
            for (const fn of after) fn();
          };
        }
      : undefined,
  };
}
