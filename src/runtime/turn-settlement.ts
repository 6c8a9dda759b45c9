import type { Db } from '../db/client';
import type { DbClient } from '../jobs/queue';
import { AppError } from '../lib/errors';
import type { Logger } from '../lib/logger';
import type { StateLease, StateStore, StateWrite } from './state-store';
import { enqueueTurnRecord, recordFinishedTurn, type TurnOutboxDeps, turnRecordJob } from './turn-outbox';
import type { TurnRecord } from './turn-record';
import type { TurnRecordBatcher } from './turn-record-batcher';

/**
 * How a turn settles, on every path, in one place: its record goes to the turn outbox
 * (src/runtime/turn-outbox.ts) before the user's next turn can start — in the transaction of the
 * state commit when the turn completed, otherwise before the user's lease is freed — then the
 * lease is freed and the turn is recorded from the outbox. docs/runtime.md "What is saved".
 *
 * | How the turn ended                         | outcome       | state            | outbox entry written      | lease                 |
 * | ------------------------------------------ | ------------- | ---------------- | ------------------------- | --------------------- |
 * | completed                                  | completed     | committed        | in the commit transaction | freed by the commit   |
 * | completed, but the lease was lost          | failed        | not written      | in the commit transaction | (lost already)        |
 * | completed, but the commit failed           | failed        | rolled back      | after, on its own         | freed by the store    |
 * | stopped: step failed, time or step limit   | as it stopped | unchanged        | before the release        | released              |
 * | threw while holding the lease (a bug)      | failed        | unchanged        | before the release        | released              |
 * | threw before the lease (lock wait, …)      | failed        | unchanged        | on its own                | never held            |
 *
 * When an outbox write fails the turn is recorded directly, without an entry. A lease that cannot
 * be freed is logged and lapses on its own (the store's lease time). Settling adds no statement
 * to a turn: one transaction (state + entry) or one insert and one release, then the recording.
 */

export interface TurnSettlementDeps {
  db: Db;
  states: StateStore;
  outbox: TurnOutboxDeps;
  /** Group commit of turn records, when the recorder can record batches (src/runtime/turn-record-batcher.ts). */
  batcher?: TurnRecordBatcher | null;
  /** The runtime's logger. */
  log: Logger;
  /** Called once the turn is settled, before it is recorded (metrics); a throw is logged. */
  onTurnFinished?(turn: TurnRecord): void;
}

/** The turn being settled, as the settlement sees it. */
export interface SettlingTurn {
  /** Filled by the run; the settlement sets outcome, error, success, stateSaved and the finish. */
  record: TurnRecord;
  /** Adds a `debug` trace to the turn: the client's stream and the record. */
  debug(type: string, message: string): void;
  /** Whether the client has gone away (the turn runs to its end all the same). */
  clientGone(): boolean;
}

/** How the run of a turn ended. */
export type TurnEnd =
  /** The program ran to a waiting step or the end: its new state is to be committed. */
  | { kind: 'completed'; lease: StateLease; next: StateWrite }
  /** The interpreter stopped it (a step failed, the time or step limit): the state stays as it was. */
  | { kind: 'stopped'; lease: StateLease; status: 'failed' | 'timeout' | 'step-limit'; error: Error | null }
  /** Something threw: before the lease was held (`lease` null: the lock wait ran out, …) or after. */
  | { kind: 'threw'; lease: StateLease | null; error: unknown };

const lostLeaseMessage = 'The turn ran past its lease and another write came first; it was not saved';

/**
 * Settles a turn (see the module comment) and records it. Never throws: what goes wrong here is on
 * the record (outcome `failed`, `error`, a debug trace) or in the log, and the client, which has
 * its traces, gets its `end`. After it, `record.stateSaved` tells whether `next` was committed.
 */
export async function settleTurn(deps: TurnSettlementDeps, turn: SettlingTurn, end: TurnEnd): Promise<void> {
  const { record } = turn;
  const { log } = deps;
  const turnId = record.turnID;
  let outboxJobId: string | null = null;

  const finish = () => {
    record.success = record.outcome === 'completed';
    record.finishedAt = new Date();
    record.clientDisconnected = turn.clientGone();
  };
  const writeOutbox = async (client: DbClient) => {
    finish();
    outboxJobId = await enqueueTurnRecord(client, record);
  };
  const writeOutboxOrLog = (client: DbClient) =>
    writeOutbox(client).catch((err: unknown) =>
      log.error({ err, turnId }, 'could not write the turn to the outbox; recording it directly'),
    );
  const release = (lease: StateLease) =>
    deps.states.release(lease).catch((err: unknown) => log.warn({ err, turnId }, 'could not free a lease'));

  let failure: { error: unknown; lease: StateLease | null } | null = null;
  switch (end.kind) {
    case 'completed':
      record.outcome = 'completed';
      try {
        await deps.states.commit(end.lease, end.next, {
          // The record commits exactly when the state does.
          outbox: {
            job(written) {
              record.stateSaved = written;
              if (!written) {
                record.outcome = 'failed';
                record.error = lostLeaseMessage;
                turn.debug('error', lostLeaseMessage);
              }
              finish();
              return turnRecordJob(record);
            },
            committed(jobId) {
              outboxJobId = jobId;
            },
          },
        });
      } catch (err) {
        // Rolled back: neither the state nor the outbox entry was written; the store freed the lease.
        record.stateSaved = false;
        outboxJobId = null;
        failure = { error: err, lease: null };
      }
      break;
    case 'stopped': {
      record.outcome = end.status;
      const message = end.error?.message ?? 'The turn failed';
      record.error = message;
      if (end.status === 'failed') {
        log.error({ err: end.error, turnId, projectId: record.projectID }, 'a turn failed');
        turn.debug('error', `The turn failed: ${message.slice(0, 300)}`);
      } else {
        turn.debug(end.status === 'timeout' ? 'timeout' : 'error', message);
      }
      await writeOutboxOrLog(deps.db.prisma);
      await release(end.lease);
      break;
    }
    case 'threw':
      failure = { error: end.error, lease: end.lease };
      break;
  }

  if (failure) {
    const error = failure.error as Error;
    record.outcome = 'failed';
    record.error = error.message;
    if (error instanceof AppError) {
      turn.debug('error', error.message);
    } else {
      log.error({ err: error, turnId, projectId: record.projectID }, 'a turn failed unexpectedly');
      turn.debug('error', `The turn failed unexpectedly; quote turn ${turnId} when reporting it`);
    }
    if (failure.lease) {
      await writeOutboxOrLog(deps.db.prisma);
      await release(failure.lease);
    }
  }

  // A turn that failed before it held the lease, whose commit failed, or whose outbox write failed.
  if (!outboxJobId) await writeOutboxOrLog(deps.db.prisma);
  try {
    deps.onTurnFinished?.(record);
  } catch (err) {
    log.warn({ err, turnId }, 'onTurnFinished failed');
  }
  // Before the stream ends, so a client that saw `end` can read what was recorded.
  if (outboxJobId && deps.batcher) await deps.batcher.record(record, outboxJobId);
  else await recordFinishedTurn(deps.outbox, record, outboxJobId);
}
