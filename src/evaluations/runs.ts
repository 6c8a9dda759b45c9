import type { PrismaTx } from '../db/transaction';
import { enqueueJob } from '../jobs/queue';
import { newId } from '../lib/ids';

/**
 * An evaluation run as a durable job: the queue, its payload, and starting a run inside a caller's
 * transaction. Ending a transcript (src/transcripts/service.ts), queueing evaluations and "run now"
 * (./service.ts) all start runs here; ./jobs.ts registers the handler that executes them.
 */

export const EVALUATION_QUEUE = 'evaluation';

export interface EvaluationJobPayload {
  evaluationId: string;
  transcriptId: string;
  /** The run this job computes; a newer run of the same pair makes it a no-op. */
  runId: string;
  [key: string]: unknown;
}

/**
 * Starts a new run of an evaluation on a transcript inside the caller's transaction: the result
 * becomes pending under a new run ID, and a durable job for that run is enqueued.
 */
export async function startEvaluationRun(
  tx: PrismaTx,
  input: { projectId: string; evaluationId: string; transcriptId: string; enqueue?: boolean },
): Promise<{ runId: string }> {
  const runId = newId();
  await tx.evaluationResult.upsert({
    where: { evaluationId_transcriptId: { evaluationId: input.evaluationId, transcriptId: input.transcriptId } },
    create: {
      id: newId(),
      evaluationId: input.evaluationId,
      transcriptId: input.transcriptId,
      status: 'pending',
      runId,
    },
    update: {
      status: 'pending',
      runId,
      valueBoolean: null,
      valueNumber: null,
      valueString: null,
      reason: null,
      cost: null,
      model: null,
      inputTokens: null,
      outputTokens: null,
      error: null,
    },
  });
  if (input.enqueue !== false) {
    const payload: EvaluationJobPayload = { evaluationId: input.evaluationId, transcriptId: input.transcriptId, runId };
    await enqueueJob(tx, {
      queue: EVALUATION_QUEUE,
      payload,
      dedupeKey: `evaluation:${runId}`,
      projectId: input.projectId,
    });
  }
  return { runId };
}
