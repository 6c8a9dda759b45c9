import type { TurnRecord, TurnRecorder } from '../runtime/turn-record';
import { recordSessionLogs, type SessionKey, type TranscriptDeps } from './service';
import { recordTurnLogsInTx } from './turn-record-sql';
import type { LogInput } from './validation';

/**
 * Records each runtime turn into its session's transcript (docs/runtime.md "Turn records"): the
 * request's action (with the turn's ID, so `history[].id` is the turn ID), every trace of the
 * turn at its own time, and an `end` log when the conversation reached an end, which also ends the
 * transcript (docs/transcripts.md "Ending"). A turn that failed
 * before it knew its session (it never got the user's state) has no transcript to go to.
 * Idempotent per turn ID, as the runtime's outbox needs (src/runtime/turn-outbox.ts).
 */
/** The session logs of a turn: its action (keyed by the turn ID), its traces, and `end` when it ended. */
function sessionLogsOf(turn: TurnRecord): SessionKey & { logs: LogInput[]; onceForLogId: string; end: boolean } {
  const logs: LogInput[] = [
    { id: turn.turnID, type: 'action', data: turn.action, createdAt: turn.startedAt },
    ...turn.traces.map(
      (trace): LogInput => ({
        type: 'trace',
        data: trace,
        createdAt: typeof trace.time === 'number' ? new Date(trace.time) : turn.finishedAt,
      }),
    ),
    ...(turn.conversationEnded ? [{ type: 'end', data: null, createdAt: turn.finishedAt } satisfies LogInput] : []),
  ];
  // The action log's ID is the turn's: recording a turn again (a retry, the outbox) writes nothing.
  // A conversation that reached an end (or hand-off) step ends its transcript with its last
  // logs, queueing the enabled evaluations as `POST …/end` would; one that goes quiet is ended
  // by the idle sweep (endIdleTranscripts).
  return {
    projectId: turn.projectID,
    environmentId: turn.environmentID,
    sessionId: turn.sessionID,
    userId: turn.userID,
    endsWhenIdle: true,
    logs,
    onceForLogId: turn.turnID,
    end: turn.conversationEnded,
  };
}

export function createTranscriptTurnRecorder(deps: TranscriptDeps): TurnRecorder {
  return {
    async record(turn) {
      if (!turn.sessionID) return;
      await recordSessionLogs(deps, sessionLogsOf(turn));
    },

    async recordBatch(tx, turns) {
      // All the turns' logs in a few driver statements (./turn-record-sql.ts); each project's
      // redactor from the cache of deps.redactors when there is one, so usually no read at all.
      return recordTurnLogsInTx(deps, tx, turns.filter((turn) => turn.sessionID).map(sessionLogsOf));
    },
  };
}
