import { type Attributes, ROOT_CONTEXT, type Span, SpanKind } from '@opentelemetry/api';
import type { Db, DriverEvent, QueryEvent } from '../db/client';
import type { JobHandler, JobRunner, RegisterOptions } from '../jobs/runner';
import { isLlmError } from '../llm/errors';
import type { ChatRequest, ChatResult, ChatStreamEvent, LlmAccounting, LlmProvider } from '../llm/types';
import type { TurnRecord } from '../runtime/turn-record';
import { activeConversationId } from './genai-tracing';
import type { Metrics } from './prometheus';
import { failSpan, recordFinishedSpan, tracer, tracingActive } from './tracing';

/**
 * Wrappers that give the instance's long-lived parts their metrics and spans without those parts
 * knowing about either: the database (through its query listeners), the job runner (every
 * handler registered on it), the LLM provider and the turn recorder.
 */

/** A histogram observation and a span for every Prisma operation and every driver call. */
export function instrumentDb(db: Db, metrics: Metrics | null): () => void {
  const listener = (event: QueryEvent) => {
    if (!metrics && !tracingActive()) return;
    const model = event.model ?? 'raw';
    metrics?.dbQueryDuration.observe({ model, operation: event.operation }, event.durationMs / 1000);
    recordFinishedSpan(
      `prisma ${model}.${event.operation}`,
      { 'db.system.name': db.provider, 'db.collection.name': model, 'db.operation.name': event.operation },
      event.durationMs,
    );
  };
  // Statements run straight on the driver (the turn's lease, commit and record batch, the job
  // runner's claim, …) by their call's label, under the model "driver".
  const driverListener = (event: DriverEvent) => {
    if (!metrics && !tracingActive()) return;
    metrics?.dbQueryDuration.observe({ model: 'driver', operation: event.label }, event.durationMs / 1000);
    recordFinishedSpan(
      `driver ${event.label}`,
      { 'db.system.name': db.provider, 'db.operation.name': event.label },
      event.durationMs,
    );
  };
  db.queryListeners.add(listener);
  db.driverListeners.add(driverListener);
  return () => {
    db.queryListeners.delete(listener);
    db.driverListeners.delete(driverListener);
  };
}

/**
 * Wraps every handler registered on the runner: a root span per attempt (a job is its own
 * trace: the request that enqueued it may be long gone) and the attempt counter and duration.
 */
export function instrumentJobs(jobs: JobRunner, metrics: Metrics | null): JobRunner {
  const register = jobs.register.bind(jobs);
  jobs.register = (queue: string, handler: JobHandler, opts?: RegisterOptions) => {
    register(
      queue,
      async (job) => {
        const started = performance.now();
        const attributes: Attributes = {
          'parley.job.id': job.id,
          'parley.job.queue': job.queue,
          'parley.job.attempt': job.attempt,
          'parley.job.max_attempts': job.maxAttempts,
        };
        return tracer().startActiveSpan(
          `job ${queue}`,
          { kind: SpanKind.CONSUMER, attributes },
          ROOT_CONTEXT,
          async (span: Span) => {
            let outcome = 'ok';
            try {
              await handler(job);
            } catch (err) {
              outcome = job.signal.aborted ? 'aborted' : 'error';
              failSpan(span, err);
              throw err;
            } finally {
              metrics?.jobRuns.inc({ queue, outcome });
              metrics?.jobDuration.observe({ queue }, (performance.now() - started) / 1000);
              span.end();
            }
          },
        );
      },
      opts,
    );
  };
  return jobs;
}

/**
 * Counts a finished turn and its duration by outcome. Called once per turn by the runtime, not by
 * the recorder, which may record a turn again after a failure (src/runtime/turn-outbox.ts).
 */
export function observeTurn(metrics: Metrics | null, turn: TurnRecord): void {
  metrics?.turns.inc({ outcome: turn.outcome });
  metrics?.turnDuration.observe(
    { outcome: turn.outcome },
    (turn.finishedAt.getTime() - turn.startedAt.getTime()) / 1000,
  );
}

/**
 * Counts calls, tokens, cost and duration per model, and puts one span around each call in the
 * OpenTelemetry GenAI semantic conventions (`chat {model}` / `embeddings {model}`, kind client,
 * `gen_ai.*` attributes; the conversation ID when an agent step makes the call). It is the only
 * span of a model call: the agent step adds none of its own. The accounting every call already
 * carries (src/llm/metering.ts) is the source, so the numbers equal those billed to projects.
 */
export function instrumentLlm(llm: LlmProvider, metrics: Metrics | null): LlmProvider {
  const provider = llm.info.provider;
  type Kind = 'chat' | 'embed';
  const operation = (kind: Kind) => (kind === 'chat' ? 'chat' : 'embeddings');
  const account = (kind: Kind, accounting: LlmAccounting, span: Span) => {
    const model = metrics ? metrics.modelName(accounting.model) : accounting.model;
    metrics?.llmCalls.inc({ provider, model, kind, outcome: 'ok' });
    metrics?.llmTokens.inc({ provider, model, direction: 'input' }, accounting.inputTokens);
    if (accounting.outputTokens)
      metrics?.llmTokens.inc({ provider, model, direction: 'output' }, accounting.outputTokens);
    if (accounting.cost > 0) metrics?.llmCost.inc({ provider, model }, accounting.cost);
    metrics?.llmDuration.observe({ provider, model, kind }, accounting.latencyMs / 1000);
    span.setAttributes({
      'gen_ai.response.model': accounting.model,
      'gen_ai.usage.input_tokens': accounting.inputTokens,
      ...(kind === 'chat' ? { 'gen_ai.usage.output_tokens': accounting.outputTokens } : {}),
      'parley.llm.cost': accounting.cost,
      'parley.llm.attempts': accounting.attempts,
    });
  };
  const finished = (result: ChatResult, span: Span) => {
    account('chat', result.accounting, span);
    span.setAttribute('gen_ai.response.finish_reasons', [result.finishReason]);
  };
  const failed = (kind: Kind, requested: string, err: unknown, span: Span) => {
    const model = metrics ? metrics.modelName(requested) : requested;
    const errorKind = isLlmError(err) ? err.kind : 'error';
    metrics?.llmCalls.inc({ provider, model, kind, outcome: errorKind });
    failSpan(span, err);
    span.setAttribute('error.type', errorKind);
    if (isLlmError(err)) span.setAttribute('parley.llm.error_kind', err.kind);
  };
  const startSpan = (kind: Kind, model: string, request?: ChatRequest) => {
    const attributes: Attributes = {
      'gen_ai.operation.name': operation(kind),
      'gen_ai.provider.name': provider,
      'gen_ai.request.model': model,
    };
    if (request?.temperature !== undefined) attributes['gen_ai.request.temperature'] = request.temperature;
    if (request?.maxTokens !== undefined) attributes['gen_ai.request.max_tokens'] = request.maxTokens;
    const conversationId = activeConversationId();
    if (conversationId) attributes['gen_ai.conversation.id'] = conversationId;
    return tracer().startSpan(`${operation(kind)} ${model}`, { kind: SpanKind.CLIENT, attributes });
  };

  async function* stream(request: ChatRequest): AsyncGenerator<ChatStreamEvent, void, undefined> {
    const model = request.model ?? llm.info.defaultModel;
    const span = startSpan('chat', model, request);
    try {
      for await (const event of llm.stream(request)) {
        if (event.type === 'end') finished(event.result, span);
        yield event;
      }
    } catch (err) {
      failed('chat', model, err, span);
      throw err;
    } finally {
      span.end();
    }
  }

  return {
    get info() {
      return llm.info;
    },
    get isLanguageModel() {
      return llm.isLanguageModel;
    },
    get supportsEmbeddings() {
      return llm.supportsEmbeddings;
    },
    async complete(request) {
      const model = request.model ?? llm.info.defaultModel;
      const span = startSpan('chat', model, request);
      try {
        const result = await llm.complete(request);
        finished(result, span);
        return result;
      } catch (err) {
        failed('chat', model, err, span);
        throw err;
      } finally {
        span.end();
      }
    },
    stream,
    async embed(request) {
      const model = request.model ?? llm.info.embeddingModel ?? 'none';
      const span = startSpan('embed', model);
      try {
        const result = await llm.embed(request);
        account('embed', result.accounting, span);
        return result;
      } catch (err) {
        failed('embed', model, err, span);
        throw err;
      } finally {
        span.end();
      }
    },
    close: () => llm.close(),
  };
}
