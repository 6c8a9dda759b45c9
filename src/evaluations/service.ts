import type { UsageEvent } from '../analytics/events';
import { publishUsageCounters, recordUsageEvents, writeUsageEvents } from '../analytics/usage-event-writer';
import type { Db } from '../db/client';
import type { Provider } from '../db/schema-source';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { notifyEnqueued } from '../jobs/queue';
import { type GaveUpJob, type JobHandler, PermanentJobError } from '../jobs/runner';
import { AppError, conflict, notFound, validationError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import { isLlmError, type LlmError, llmErrorToAppError } from '../llm/errors';
import type { LlmAccounting, LlmProvider } from '../llm/types';
import { compileTranscriptSearch } from '../transcripts/search';
import type { SearchCriteria } from '../transcripts/validation';
import { buildJudgeMessages, parseVerdict, renderConversation, type TypedValue } from './judge';
import { EVALUATION_QUEUE, type EvaluationJobPayload, startEvaluationRun } from './runs';
import type { CreateEvaluationInput, EvaluationSettings, UpdateEvaluationInput } from './validation';

/**
 * Evaluation definitions and their runs. A run judges one transcript with one evaluation through
 * the models interface and stores value, reason, cost and the call's accounting on the result.
 * Runs come from ending a transcript, from the queue endpoint (durable jobs) or from "run now".
 */

export interface EvaluationDeps {
  db: Db;
  pubsub: AppPubSub;
  llm: LlmProvider;
  logger: Logger;
}

function nameTaken(name: string) {
  return conflict(`The project already has an evaluation named "${name}"`);
}

function settingsJson(settings: EvaluationSettings | null | undefined): { [key: string]: string | number } {
  const out: { [key: string]: string | number } = {};
  if (settings?.model != null) out.model = settings.model;
  if (settings?.temperature != null) out.temperature = settings.temperature;
  if (settings?.maxTokens != null) out.maxTokens = settings.maxTokens;
  return out;
}

export async function createEvaluation(db: Db, input: CreateEvaluationInput) {
  const existing = await db.prisma.evaluation.findUnique({
    where: { projectId_name: { projectId: input.projectID, name: input.name } },
    select: { id: true },
  });
  if (existing) throw nameTaken(input.name);
  try {
    return await db.prisma.evaluation.create({
      data: {
        id: newId(),
        projectId: input.projectID,
        name: input.name,
        description: input.description ?? null,
        enabled: input.enabled ?? true,
        type: input.type,
        prompt: input.prompt,
        settings: settingsJson(input.settings),
        ...(input.type === 'boolean' ? { truePrompt: input.truePrompt, falsePrompt: input.falsePrompt } : {}),
        ...(input.type === 'number'
          ? {
              minimumValue: input.minimumValue,
              minimumPrompt: input.minimumPrompt,
              maximumValue: input.maximumValue,
              maximumPrompt: input.maximumPrompt,
            }
          : {}),
      },
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(input.name);
    throw err;
  }
}

const typeOnlyFields: Record<string, readonly (keyof UpdateEvaluationInput)[]> = {
  boolean: ['truePrompt', 'falsePrompt'],
  number: ['minimumPrompt', 'maximumPrompt'],
};

export async function updateEvaluation(
  db: Db,
  input: { projectId: string; evaluationId: string; patch: UpdateEvaluationInput },
): Promise<void> {
  const { patch } = input;
  try {
    await db.prisma.$transaction(async (tx) => {
      const evaluation = await tx.evaluation.findFirst({
        where: { id: input.evaluationId, projectId: input.projectId },
      });
      if (!evaluation) throw notFound('Evaluation', input.evaluationId);
      const misplaced = Object.entries(typeOnlyFields)
        .filter(([type]) => type !== evaluation.type)
        .flatMap(([type, fields]) => fields.filter((f) => patch[f] !== undefined).map((f) => ({ f, type })));
      if (misplaced.length) {
        throw validationError(
          `${misplaced[0]!.f}: applies only to ${misplaced[0]!.type} evaluations (this one is ${evaluation.type})`,
          misplaced.map(({ f, type }) => ({ path: f, message: `applies only to ${type} evaluations` })),
        );
      }
      if (patch.name && patch.name !== evaluation.name) {
        const clash = await tx.evaluation.findUnique({
          where: { projectId_name: { projectId: input.projectId, name: patch.name } },
          select: { id: true },
        });
        if (clash) throw nameTaken(patch.name);
      }
      await tx.evaluation.update({
        where: { id: evaluation.id },
        data: {
          ...(patch.name !== undefined ? { name: patch.name } : {}),
          ...(patch.description !== undefined ? { description: patch.description } : {}),
          ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
          ...(patch.prompt !== undefined ? { prompt: patch.prompt } : {}),
          ...(patch.settings !== undefined ? { settings: settingsJson(patch.settings) } : {}),
          ...(patch.truePrompt !== undefined ? { truePrompt: patch.truePrompt } : {}),
          ...(patch.falsePrompt !== undefined ? { falsePrompt: patch.falsePrompt } : {}),
          ...(patch.minimumPrompt !== undefined ? { minimumPrompt: patch.minimumPrompt } : {}),
          ...(patch.maximumPrompt !== undefined ? { maximumPrompt: patch.maximumPrompt } : {}),
        },
      });
    });
  } catch (err) {
    if (isUniqueViolation(err) && patch.name) throw nameTaken(patch.name);
    throw err;
  }
}

/** Deletes an evaluation with all its results (cascade); its queued jobs then find nothing to do. */
export async function deleteEvaluation(db: Db, input: { projectId: string; evaluationId: string }): Promise<void> {
  const { count } = await db.prisma.evaluation.deleteMany({
    where: { id: input.evaluationId, projectId: input.projectId },
  });
  if (count === 0) throw notFound('Evaluation', input.evaluationId);
}

// ── Runs ────────────────────────────────────────────────────────────────────────────────────────

/** Why a run could not produce a value; `permanent` when trying again cannot help. */
export class EvaluationRunError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly llmError?: LlmError,
  ) {
    super(message);
    this.name = 'EvaluationRunError';
  }
}

const permanentLlmKinds = new Set(['auth', 'bad_model', 'bad_request', 'unsupported']);

export type RunOutcome =
  | { status: 'done' | 'skipped' | 'failed'; resultId: string }
  /** The run was superseded by a newer one, finished already, or its evaluation or transcript is gone. */
  | { status: 'stale' };

function valueColumns(type: string, value: TypedValue | null) {
  return {
    valueBoolean: type === 'boolean' && typeof value === 'boolean' ? value : null,
    valueNumber: type === 'number' && typeof value === 'number' ? value : null,
    valueString: type === 'string' && typeof value === 'string' ? value : null,
  };
}

function publishResult(pubsub: AppPubSub, transcriptId: string, evaluationId: string): void {
  pubsub.publish('transcriptEvent', transcriptId, { transcriptId, kind: 'result', evaluationId });
}

/**
 * Computes run `runId` of an evaluation on a transcript. Idempotent: it does nothing unless that
 * run is still pending, and stores its outcome with a conditional update, so a job delivered twice
 * records one result. Throws EvaluationRunError when the judge failed; with `final` the failure is
 * recorded on the result first.
 *
 * Every judge call that reports tokens is `credit_usage`, whatever became of its answer: keyed by
 * run and `attempt` (the job's attempt number), written with the result it paid for when there is
 * one, and on its own otherwise (a reply that could not be read or a failed call on a non-final
 * attempt, or a run another delivery finished first). One key per attempt, so an attempt is never
 * counted twice and a retried one never hides the attempts before it.
 */
export async function executeEvaluationRun(
  deps: EvaluationDeps,
  input: {
    evaluationId: string;
    transcriptId: string;
    runId: string;
    final: boolean;
    /** The job's attempt number (1 for "run now"): part of the credit usage's idempotency key. */
    attempt?: number;
    signal?: AbortSignal;
  },
): Promise<RunOutcome> {
  const { db } = deps;
  const attempt = input.attempt ?? 1;
  const pendingRun = {
    evaluationId: input.evaluationId,
    transcriptId: input.transcriptId,
    runId: input.runId,
    status: 'pending',
  };
  const result = await db.prisma.evaluationResult.findFirst({
    where: pendingRun,
    select: {
      id: true,
      evaluation: true,
      transcript: { select: { projectId: true, environmentId: true } },
    },
  });
  if (!result) return { status: 'stale' };
  const evaluation = result.evaluation;

  /** The credit of a call that no stored result carries, in a transaction of its own. */
  const chargeAttempt = async (accounting: LlmAccounting | undefined): Promise<void> => {
    if (!accounting) return;
    await recordUsageEvents(
      { db, pubsub: deps.pubsub },
      judgeCreditEvents(result.transcript, input.runId, attempt, accounting),
    );
  };

  const record = async (
    status: 'done' | 'skipped' | 'failed',
    fields: { value?: TypedValue | null; reason?: string | null; error?: string | null; accounting?: LlmAccounting },
  ): Promise<RunOutcome> => {
    const a = fields.accounting;
    const stored = await db.prisma.$transaction(async (tx) => {
      const { count } = await tx.evaluationResult.updateMany({
        where: pendingRun,
        data: {
          status,
          ...valueColumns(evaluation.type, fields.value ?? null),
          reason: fields.reason ?? null,
          error: fields.error ?? null,
          cost: a ? a.cost : null,
          model: a ? a.model : null,
          inputTokens: a ? a.inputTokens : null,
          outputTokens: a ? a.outputTokens : null,
        },
      });
      if (count === 0) return { stored: false, usage: null };
      // The judge's tokens are credit usage (DECISIONS.md §4), recorded with the result they paid for.
      const usage = a
        ? await writeUsageEvents(tx, judgeCreditEvents(result.transcript, input.runId, attempt, a), {
            provider: db.provider,
          })
        : null;
      if (a && status === 'done') {
        // The average cost that estimates use, kept as results arrive (the row lock of this
        // update holds until commit, so concurrent results add up).
        const totals = await tx.evaluation.update({
          where: { id: evaluation.id },
          data: { costTotal: { increment: a.cost }, costCount: { increment: 1 } },
          select: { costTotal: true, costCount: true },
        });
        await tx.evaluation.update({
          where: { id: evaluation.id },
          data: { averageCost: totals.costTotal / totals.costCount },
        });
      }
      return { stored: true, usage };
    });
    if (!stored.stored) {
      // Another delivery of the run finished first; this call was paid for all the same.
      await chargeAttempt(a);
      return { status: 'stale' };
    }
    if (stored.usage) publishUsageCounters(deps.pubsub, stored.usage);
    publishResult(deps.pubsub, input.transcriptId, input.evaluationId);
    return { status, resultId: result.id };
  };

  if (!deps.llm.isLanguageModel) {
    // DECISIONS.md §8: the built-in provider is not a language model; never guess a verdict.
    return record('skipped', {
      reason: 'No language model is configured (LLM_BASE_URL is not set), so this evaluation was not judged.',
    });
  }

  const logs = await db.prisma.transcriptLog.findMany({
    where: { transcriptId: input.transcriptId },
    orderBy: { seq: 'asc' },
    select: { type: true, data: true },
  });
  const settings = (evaluation.settings ?? {}) as EvaluationSettings;
  const messages = buildJudgeMessages(evaluation, renderConversation(logs));
  let reply: { text: string; accounting: LlmAccounting };
  try {
    reply = await deps.llm.complete({
      messages,
      responseFormat: 'json_object',
      model: settings?.model ?? undefined,
      temperature: settings?.temperature ?? 0,
      maxTokens: settings?.maxTokens ?? 400,
      signal: input.signal,
    });
  } catch (err) {
    if (!isLlmError(err)) throw err;
    if (err.kind === 'aborted') throw err;
    const permanent = permanentLlmKinds.has(err.kind);
    if (permanent || input.final) {
      await record('failed', { error: `The judge model failed: ${err.message}`, accounting: err.partialAccounting });
    } else await chargeAttempt(err.partialAccounting);
    throw new EvaluationRunError(`The judge model failed: ${err.message}`, permanent, err);
  }
  const verdict = parseVerdict(evaluation, reply.text);
  if (!verdict.ok) {
    if (input.final) await record('failed', { error: verdict.message, accounting: reply.accounting });
    else await chargeAttempt(reply.accounting);
    throw new EvaluationRunError(verdict.message, false);
  }
  return record('done', { value: verdict.value, reason: verdict.reason, accounting: reply.accounting });
}

/** The judge call's input and output tokens as `credit_usage` events, keyed by the run and attempt. */
function judgeCreditEvents(
  transcript: { projectId: string; environmentId: string },
  runId: string,
  attempt: number,
  accounting: LlmAccounting,
): UsageEvent[] {
  const common = { projectId: transcript.projectId, environmentId: transcript.environmentId, model: accounting.model };
  return [
    {
      ...common,
      kind: 'credit',
      type: 'llm-input',
      tokens: accounting.inputTokens,
      idempotencyKey: `evaluation:${runId}:${attempt}:in`,
    },
    {
      ...common,
      kind: 'credit',
      type: 'llm-output',
      tokens: accounting.outputTokens,
      idempotencyKey: `evaluation:${runId}:${attempt}:out`,
    },
  ];
}

/** The durable job of an evaluation run (queue `evaluation`); see executeEvaluationRun. */
export function createEvaluationJobHandler(deps: EvaluationDeps): JobHandler {
  return async (job) => {
    const payload = job.payload as Partial<EvaluationJobPayload>;
    if (
      typeof payload.evaluationId !== 'string' ||
      typeof payload.transcriptId !== 'string' ||
      typeof payload.runId !== 'string'
    ) {
      throw new PermanentJobError('malformed evaluation job payload');
    }
    try {
      await executeEvaluationRun(deps, {
        evaluationId: payload.evaluationId,
        transcriptId: payload.transcriptId,
        runId: payload.runId,
        final: job.attempt >= job.maxAttempts,
        attempt: job.attempt,
        signal: job.signal,
      });
    } catch (err) {
      if (err instanceof EvaluationRunError && err.permanent) throw new PermanentJobError(err.message, { cause: err });
      throw err;
    }
  };
}

/**
 * Records `failed` on the pending result of a run whose job the runner gave up on because its
 * worker stopped on every attempt left (the handler never got to record the failure). Conditional
 * on the run ID, like every outcome, so it never touches a newer run.
 */
export async function failAbandonedEvaluationRun(
  deps: Pick<EvaluationDeps, 'db' | 'pubsub'>,
  job: GaveUpJob,
): Promise<void> {
  const payload = job.payload as Partial<EvaluationJobPayload>;
  const { runId, evaluationId, transcriptId } = payload;
  if (typeof runId !== 'string' || typeof evaluationId !== 'string' || typeof transcriptId !== 'string') return;
  const { count } = await deps.db.prisma.evaluationResult.updateMany({
    where: { runId, evaluationId, transcriptId, status: 'pending' },
    data: { status: 'failed', error: `The evaluation job failed: ${job.lastError}`.slice(0, 2000) },
  });
  if (count) publishResult(deps.pubsub, transcriptId, evaluationId);
}

export interface RunNowResult {
  transcriptId: string;
  evaluationId: string;
}

/**
 * Runs an evaluation on a transcript now, while the client waits. The outcome is stored as for a
 * queued run; a judge failure is stored as `failed` and answered with 503 (429 for a rate limit).
 */
export async function runEvaluationNow(
  deps: EvaluationDeps,
  input: { projectId: string; evaluationId: string; transcriptId: string },
): Promise<RunNowResult> {
  const { runId } = await deps.db.prisma.$transaction(async (tx) => {
    const evaluation = await tx.evaluation.findFirst({
      where: { id: input.evaluationId, projectId: input.projectId },
      select: { id: true },
    });
    if (!evaluation) throw notFound('Evaluation', input.evaluationId);
    const transcript = await tx.transcript.findFirst({
      where: { id: input.transcriptId, projectId: input.projectId },
      select: { id: true },
    });
    if (!transcript) throw notFound('Transcript', input.transcriptId);
    return startEvaluationRun(tx, { ...input, enqueue: false });
  });
  try {
    await executeEvaluationRun(deps, { ...input, runId, final: true });
  } catch (err) {
    if (err instanceof EvaluationRunError) {
      if (err.llmError) throw llmErrorToAppError(err.llmError);
      throw new AppError('SERVICE_UNAVAILABLE', `The judge's answer could not be used: ${err.message}`);
    }
    throw err;
  }
  return { transcriptId: input.transcriptId, evaluationId: input.evaluationId };
}

/** Seconds a client is asked to wait when the project's evaluation queue is full. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 30;

/** First key of the PostgreSQL advisory locks of evaluation queues ("evaq"); the second is the project's hash. */
const queueLockClass = 0x65766171;

/**
 * Serialises the enqueues of one project until the transaction ends. PostgreSQL: a transaction
 * advisory lock on (class, hashtext(projectId)); two projects whose hashes collide merely wait
 * for each other. SQLite: a no-op UPDATE of the project row as the first statement takes the
 * database's single write lock, so the count that follows is read under it.
 */
async function lockProjectEvaluationQueue(tx: PrismaTx, provider: Provider, projectId: string): Promise<void> {
  if (provider === 'postgresql') {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(CAST(${queueLockClass} AS INTEGER), hashtext(${projectId}))`;
  } else {
    await tx.$executeRaw`UPDATE "Project" SET "updatedAt" = "updatedAt" WHERE "id" = ${projectId}`;
  }
}

/** The original's `warning` of a queue request that exceeded the project's quota (analytics-api.json). */
export interface QueueQuotaWarning {
  type: 'quota_exceeded';
  message: string;
  skippedTranscriptIDs: string[];
}

export interface QueueOutcome {
  /** Transcripts queued (each with every requested evaluation). */
  transcriptCount: number;
  /** Evaluation runs queued, across all transcripts. */
  evaluationCount: number;
  /** Set when part of the request did not fit in the project's queue. */
  warning: QueueQuotaWarning | null;
  /** Other things worth knowing (disabled evaluations, transcripts still open). */
  notes: string[];
}

/**
 * Queues runs of evaluations on transcripts (each pair a durable job, all in one transaction).
 * The project's queued and running evaluation jobs may not exceed `limit` (counted inside the
 * enqueue transaction, under a per-project lock: the limit holds exactly). What fits is queued,
 * whole transcripts in the order sent (each with every requested evaluation); the rest is named in
 * a `quota_exceeded` warning. 429 with Retry-After only when not one transcript fits.
 */
export async function queueEvaluations(
  deps: Pick<EvaluationDeps, 'db' | 'pubsub'>,
  input: { projectId: string; evaluationIds: readonly string[]; transcriptIds: readonly string[]; limit: number },
): Promise<QueueOutcome> {
  const evaluationIds = [...new Set(input.evaluationIds)];
  const transcriptIds = [...new Set(input.transcriptIds)];
  const { db } = deps;
  const [evaluations, transcripts] = await Promise.all([
    db.prisma.evaluation.findMany({
      where: { projectId: input.projectId, id: { in: evaluationIds } },
      select: { id: true, name: true, enabled: true },
    }),
    db.prisma.transcript.findMany({
      where: { projectId: input.projectId, id: { in: transcriptIds } },
      select: { id: true, endedAt: true },
    }),
  ]);
  const missingEvaluation = evaluationIds.find((id) => !evaluations.some((e) => e.id === id));
  if (missingEvaluation) throw notFound('Evaluation', missingEvaluation);
  const missingTranscript = transcriptIds.find((id) => !transcripts.some((t) => t.id === id));
  if (missingTranscript) throw notFound('Transcript', missingTranscript);

  const { queued, skipped, pending } = await db.prisma.$transaction(async (tx) => {
    // The count and the enqueue happen under one per-project lock, so two requests at once cannot
    // both see room for their jobs and together exceed the limit.
    await lockProjectEvaluationQueue(tx, db.provider, input.projectId);
    const pending = await tx.job.count({
      where: { projectId: input.projectId, queue: EVALUATION_QUEUE, status: { in: ['queued', 'running'] } },
    });
    const room = Math.max(0, input.limit - pending);
    const fitting = Math.min(transcriptIds.length, Math.floor(room / evaluationIds.length));
    if (fitting === 0) {
      throw new AppError(
        'RATE_LIMITED',
        `The project's evaluation queue is full (${pending} pending, limit ${input.limit}); try again later`,
        { headers: { 'Retry-After': String(QUEUE_FULL_RETRY_AFTER_SECONDS) } },
      );
    }
    const queued = transcriptIds.slice(0, fitting);
    for (const transcriptId of queued) {
      for (const evaluationId of evaluationIds) {
        await startEvaluationRun(tx, { projectId: input.projectId, evaluationId, transcriptId });
      }
    }
    return { queued, skipped: transcriptIds.slice(fitting), pending };
  });
  notifyEnqueued(deps.pubsub, EVALUATION_QUEUE);
  const notes: string[] = [];
  const disabled = evaluations.filter((e) => !e.enabled);
  if (disabled.length) notes.push(`${disabled.length} of the evaluations are disabled; they were queued anyway`);
  const open = transcripts.filter((t) => queued.includes(t.id) && !t.endedAt);
  if (open.length) notes.push(`${open.length} of the transcripts have not ended; they are judged as they are now`);
  return {
    transcriptCount: queued.length,
    evaluationCount: queued.length * evaluationIds.length,
    warning: skipped.length
      ? {
          type: 'quota_exceeded',
          message: `The project's evaluation queue had room for ${queued.length} of the ${transcriptIds.length} transcripts (${pending} runs pending, limit ${input.limit}); the others were not queued`,
          skippedTranscriptIDs: skipped,
        }
      : null,
    notes,
  };
}

/** The project of the evaluations named by an estimate: they must all exist and share one project. */
export async function projectOfEvaluations(db: Db, evaluationIds: readonly string[]): Promise<string> {
  const ids = [...new Set(evaluationIds)];
  const rows = await db.prisma.evaluation.findMany({
    where: { id: { in: ids } },
    select: { id: true, projectId: true },
  });
  const missing = ids.find((id) => !rows.some((r) => r.id === id));
  if (missing) throw notFound('Evaluation', missing);
  const projectId = rows.find((r) => r.id === ids[0])!.projectId;
  const stranger = rows.find((r) => r.projectId !== projectId);
  if (stranger) throw notFound('Evaluation', stranger.id);
  return projectId;
}

/** What running evaluations on the transcripts that match `criteria` would cost, from each one's average. */
export async function estimateEvaluations(
  db: Db,
  input: { projectId: string; criteria: SearchCriteria; evaluationIds: readonly string[] },
): Promise<{ totalCost: number; transcriptCount: number; evaluations: { id: string; cost: number }[] }> {
  const evaluationIds = [...new Set(input.evaluationIds)];
  const evaluations = await db.prisma.evaluation.findMany({
    where: { projectId: input.projectId, id: { in: evaluationIds } },
    select: { id: true, averageCost: true },
  });
  const missing = evaluationIds.find((id) => !evaluations.some((e) => e.id === id));
  if (missing) throw notFound('Evaluation', missing);
  const where = await compileTranscriptSearch(db.prisma, db.provider, input.projectId, input.criteria);
  const transcriptCount = await db.prisma.transcript.count({ where });
  const breakdown = evaluationIds.map((id) => {
    const average = evaluations.find((e) => e.id === id)?.averageCost ?? 0;
    return { id, cost: average * transcriptCount };
  });
  return { totalCost: breakdown.reduce((s, e) => s + e.cost, 0), transcriptCount, evaluations: breakdown };
}
