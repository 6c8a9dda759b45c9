import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueStats } from '../jobs/queue';

/**
 * Prometheus metrics of one Parley instance (docs/operations.md lists them). Each instance has
 * its own registry, never prom-client's global one, so a test process can run several instances.
 * Label values are bounded: routes are patterns, never raw paths, and names that callers choose
 * (GraphQL operation names, model names) are kept to a fixed number of distinct values.
 */

const secondsBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const dbBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Keeps at most `max` distinct values of a label; the rest count as `other`. */
export function boundedLabel(max: number, pattern = /^[A-Za-z0-9_.:/-]{1,100}$/): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (!pattern.test(value) || seen.size >= max) return 'other';
    seen.add(value);
    return value;
  };
}

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  graphqlOperations: Counter<'operation_name' | 'operation_type' | 'outcome'>;
  graphqlDuration: Histogram<'operation_name' | 'operation_type'>;
  sseOpen: Gauge<'kind'>;
  rateLimited: Counter<'group'>;
  turns: Counter<'outcome'>;
  turnDuration: Histogram<'outcome'>;
  jobRuns: Counter<'queue' | 'outcome'>;
  jobDuration: Histogram<'queue'>;
  dbQueryDuration: Histogram<'model' | 'operation'>;
  llmCalls: Counter<'provider' | 'model' | 'kind' | 'outcome'>;
  llmTokens: Counter<'provider' | 'model' | 'direction'>;
  llmCost: Counter<'provider' | 'model'>;
  llmDuration: Histogram<'provider' | 'model' | 'kind'>;
  usageEventsIngested: Counter<'result'>;
  /** Bounded label values for names that callers choose. */
  operationName: (name: string) => string;
  modelName: (name: string) => string;
}

export interface CreateMetricsOptions {
  /** Queue depth, age and failures, read when Prometheus scrapes (cached briefly). */
  queueStats?: () => Promise<QueueStats[]>;
  /** How long one reading of queueStats serves scrapes (default 5 s). */
  queueStatsCacheMs?: number;
  /** Node's own metrics (memory, event loop, GC) with the parley_ prefix (default true). */
  processMetrics?: boolean;
}

export function createMetrics(opts: CreateMetricsOptions = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'parley_' });

  let cached: { at: number; stats: Promise<QueueStats[]> } | null = null;
  const cacheMs = opts.queueStatsCacheMs ?? 5000;
  const readQueueStats = (): Promise<QueueStats[]> => {
    if (!opts.queueStats) return Promise.resolve([]);
    const now = Date.now();
    if (!cached || now - cached.at > cacheMs) {
      const stats = opts.queueStats().catch(() => [] as QueueStats[]);
      cached = { at: now, stats };
    }
    return cached.stats;
  };

  new Gauge({
    name: 'parley_job_queue_depth',
    help: 'Jobs waiting (queued) or being worked on (running), per queue, across all instances.',
    labelNames: ['queue', 'status'],
    registers,
    async collect() {
      this.reset();
      for (const s of await readQueueStats()) {
        this.set({ queue: s.queue, status: 'queued' }, s.queued);
        this.set({ queue: s.queue, status: 'running' }, s.running);
      }
    },
  });
  new Gauge({
    name: 'parley_job_oldest_queued_age_seconds',
    help: 'Age of the oldest queued job per queue (0 when none waits).',
    labelNames: ['queue'],
    registers,
    async collect() {
      this.reset();
      for (const s of await readQueueStats()) this.set({ queue: s.queue }, s.oldestQueuedAgeMs / 1000);
    },
  });
  new Gauge({
    name: 'parley_jobs_failed',
    help: 'Jobs that failed for good and are still kept (finished jobs are deleted after 7 days), per queue.',
    labelNames: ['queue'],
    registers,
    async collect() {
      this.reset();
      for (const s of await readQueueStats()) this.set({ queue: s.queue }, s.failed);
    },
  });

  return {
    registry,
    httpRequests: new Counter({
      name: 'parley_http_requests_total',
      help: 'HTTP requests by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    httpDuration: new Histogram({
      name: 'parley_http_request_duration_seconds',
      help: 'Time from the request to the end of its response (the whole stream for SSE).',
      labelNames: ['method', 'route', 'status'],
      buckets: secondsBuckets,
      registers,
    }),
    graphqlOperations: new Counter({
      name: 'parley_graphql_operations_total',
      help: 'GraphQL operations executed (over /graphql and through REST routes), by name, type and outcome.',
      labelNames: ['operation_name', 'operation_type', 'outcome'],
      registers,
    }),
    graphqlDuration: new Histogram({
      name: 'parley_graphql_operation_duration_seconds',
      help: 'Execution time of GraphQL queries and mutations (subscriptions: until the first result).',
      labelNames: ['operation_name', 'operation_type'],
      buckets: secondsBuckets,
      registers,
    }),
    sseOpen: new Gauge({
      name: 'parley_sse_streams_open',
      help: 'Server-sent event streams open now: rest (runtime turns) or graphql (subscriptions).',
      labelNames: ['kind'],
      registers,
    }),
    rateLimited: new Counter({
      name: 'parley_rate_limited_total',
      help: 'Requests refused with 429, by rate-limit group.',
      labelNames: ['group'],
      registers,
    }),
    turns: new Counter({
      name: 'parley_runtime_turns_total',
      help: 'Runtime turns finished, by outcome (completed, failed, timeout, step-limit).',
      labelNames: ['outcome'],
      registers,
    }),
    turnDuration: new Histogram({
      name: 'parley_runtime_turn_duration_seconds',
      help: 'Duration of runtime turns, by outcome.',
      labelNames: ['outcome'],
      buckets: secondsBuckets,
      registers,
    }),
    jobRuns: new Counter({
      name: 'parley_job_runs_total',
      help: 'Job attempts run by this instance, by queue and outcome (ok, error, aborted).',
      labelNames: ['queue', 'outcome'],
      registers,
    }),
    jobDuration: new Histogram({
      name: 'parley_job_run_duration_seconds',
      help: 'Duration of job attempts run by this instance.',
      labelNames: ['queue'],
      buckets: secondsBuckets,
      registers,
    }),
    dbQueryDuration: new Histogram({
      name: 'parley_db_query_duration_seconds',
      help: 'Duration of Prisma operations, by model (raw for raw SQL) and operation.',
      labelNames: ['model', 'operation'],
      buckets: dbBuckets,
      registers,
    }),
    llmCalls: new Counter({
      name: 'parley_llm_calls_total',
      help: 'Language-model calls, by provider, model, kind (chat, embed) and outcome (ok or the error kind).',
      labelNames: ['provider', 'model', 'kind', 'outcome'],
      registers,
    }),
    llmTokens: new Counter({
      name: 'parley_llm_tokens_total',
      help: 'Tokens of language-model calls, by direction (input, output).',
      labelNames: ['provider', 'model', 'direction'],
      registers,
    }),
    llmCost: new Counter({
      name: 'parley_llm_cost_total',
      help: 'Cost of language-model calls in the price table’s currency (USD by default).',
      labelNames: ['provider', 'model'],
      registers,
    }),
    llmDuration: new Histogram({
      name: 'parley_llm_call_duration_seconds',
      help: 'Wall time of language-model calls, retries included.',
      labelNames: ['provider', 'model', 'kind'],
      buckets: secondsBuckets,
      registers,
    }),
    usageEventsIngested: new Counter({
      name: 'parley_usage_events_ingested_total',
      help: 'Usage events received through ingestion (POST /v1/usage/events, recordUsageEvents): recorded or duplicate.',
      labelNames: ['result'],
      registers,
    }),
    operationName: boundedLabel(200, /^[A-Za-z_][A-Za-z0-9_]{0,99}$/),
    modelName: boundedLabel(100),
  };
}
