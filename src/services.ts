import { recordUsageEvents } from './analytics/usage-event-writer';
import { createUsageTurnRecorder } from './analytics/usage-turn-recorder';
import { type Authenticator, createAuthenticator } from './auth/authenticate';
import { createDb, type Db } from './db/client';
import { applyMigrations } from './db/migrate';
import type { Config } from './env';
import { registerEvaluationJobs } from './evaluations/jobs';
import { createJobRunner, type JobRunner } from './jobs/runner';
import { KB_INGEST_QUEUE } from './kb/documents';
import { createKbEmbedHandler, KB_EMBED_QUEUE, requestEmbeddingSweep } from './kb/embeddings';
import { parseMetadataFilter } from './kb/filter';
import { createKbIngestHandler } from './kb/ingest';
import { queryKnowledgeBase } from './kb/query';
import { newId } from './lib/ids';
import { createLogger, type Logger } from './lib/logger';
import { createOutboundFetch } from './lib/outbound-http';
import { type AppPubSub, createAppPubSub } from './lib/pubsub';
import { integrationSecretBox, type SecretBox } from './lib/secret-box';
import { createLlmProvider, type LlmProvider } from './llm';
import { createOps, instrumentJobs, instrumentLlm, type Ops, observeTurn } from './ops';
import { createIntegrationPool } from './runtime/integration-pool';
import { createIntegrationAccess, sealStoredIntegrationHeaders } from './runtime/integrations';
import { createRuntime, type Runtime } from './runtime/service';
import type { AnyStepType } from './runtime/steps/step-type';
import { createTurnRecordJobHandler, TURN_RECORD_QUEUE } from './runtime/turn-outbox';
import { combineTurnRecorders, createLoggingTurnRecorder, type TurnRecorder } from './runtime/turn-record';
import { registerTranscriptJobs, transcriptRecurringJobs } from './transcripts/jobs';
import { createRedactorCache, type RedactorCache } from './transcripts/redactor-cache';
import { isSessionTranscriptEnded, retentionMsOf } from './transcripts/service';
import { createTranscriptTurnRecorder } from './transcripts/transcript-turn-recorder';

/**
 * The long-lived parts of one Parley instance, built once by `createServices` and handed to the
 * GraphQL context, the REST adapter and the CLI. Nothing here is a module-level singleton, so a
 * test can run several instances (SQLite and PostgreSQL, or two sharing Redis) in one process.
 */
export interface AppServices {
  config: Config;
  /** Seals integration header values at rest (INTEGRATION_SECRETS_KEY); null without a key. */
  integrationSecrets: SecretBox | null;
  logger: Logger;
  db: Db;
  pubsub: AppPubSub;
  auth: Authenticator;
  /** Durable background jobs. Areas register their handlers here; `startJobs` runs them. */
  jobs: JobRunner;
  /** Starts running background jobs in this process (the server, or `parley worker`). */
  startJobs(): void;
  /** Language models: OpenAI-compatible when LLM_BASE_URL is set, else the built-in offline provider. */
  llm: LlmProvider;
  /** Agent programs, turns and conversation state. */
  runtime: Runtime;
  /** Metrics, rate limits and open streams (src/ops, docs/operations.md). */
  ops: Ops;
  /** The projects' transcript redactors, kept in memory (src/transcripts/redactor-cache.ts). */
  redactors: RedactorCache;
  /** Closes what was opened, in reverse order. */
  close(): Promise<void>;
}

export interface CreateServicesOptions {
  logger?: Logger;
  /** Apply pending migrations before opening (default true). */
  migrate?: boolean;
  /**
   * Where finished turns go (default: a log line, the session's transcript and usage events). A
   * function receives the default recorder and returns the one to use (a test's wrapper).
   */
  turnRecorder?: TurnRecorder | ((defaultRecorder: TurnRecorder) => TurnRecorder);
  /** Step types beyond the built-in ones. */
  extraStepTypes?: readonly AnyStepType[];
}

/**
 * How long a cached redactor is trusted without hearing of a change: the most an instance that
 * missed an announcement (Redis down) redacts with a project's old patterns.
 */
const redactorCacheTtlMs = 5000;

export async function createServices(config: Config, opts: CreateServicesOptions = {}): Promise<AppServices> {
  const logger = opts.logger ?? createLogger(config.LOG_LEVEL);
  if (opts.migrate !== false) {
    const applied = await applyMigrations(config.DATABASE_URL);
    if (applied.length) logger.info({ applied }, 'applied database migrations');
  }
  const db = await createDb(config.DATABASE_URL, {
    onConnectionError: (err) => logger.warn({ err }, 'a PostgreSQL connection was lost; the pool replaces it'),
  });
  const ops = createOps(config, { logger, db });
  const { pubsub, close: closePubSub } = createAppPubSub(config.REDIS_URL, {
    prefix: config.REDIS_PREFIX,
    onError: (err) => logger.warn({ err }, 'redis connection error'),
  });
  const auth = createAuthenticator({
    db,
    adminToken: config.ADMIN_TOKEN,
    cacheTtlMs: config.KEY_CACHE_TTL_MS,
    logger,
    pubsub,
  });
  const jobs = createJobRunner({
    db,
    logger,
    pubsub,
    concurrency: config.JOB_CONCURRENCY,
    pollIntervalMs: config.JOB_POLL_MS,
    leaseMs: config.JOB_LEASE_MS,
    recurring: [
      ...transcriptRecurringJobs({
        purgeEveryMs: config.TRANSCRIPT_PURGE_INTERVAL_MS,
        idleSweepEveryMs: config.TRANSCRIPT_IDLE_SWEEP_INTERVAL_MS,
      }),
      // Embeds chunks that have no vector for the current model (after a model change, or an outage).
      ...(config.EMBEDDING_MODEL ? [{ queue: KB_EMBED_QUEUE, everyMs: config.KB_EMBED_SWEEP_MS }] : []),
    ],
  });
  // Every handler registered from here on gets a span and metrics per attempt.
  instrumentJobs(jobs, ops.metrics);
  const providerLlm = createLlmProvider(
    {
      baseUrl: config.LLM_BASE_URL,
      apiKey: config.LLM_API_KEY,
      defaultModel: config.LLM_DEFAULT_MODEL,
      embeddingModel: config.EMBEDDING_MODEL,
      prices: config.llmPrices,
      timeoutMs: config.LLM_TIMEOUT_MS,
      maxRetries: config.LLM_MAX_RETRIES,
      maxRetryWaitMs: config.LLM_MAX_RETRY_WAIT_MS,
      maxTokensField: config.LLM_MAX_TOKENS_FIELD,
    },
    { logger: logger.child({ component: 'llm' }) },
  );
  const llm = instrumentLlm(providerLlm, ops.metrics);
  // API steps call URLs that agent authors choose: private and loopback addresses are refused
  // unless the operator allows them (src/lib/outbound-http.ts).
  const outboundFetch = createOutboundFetch({
    allowPrivate: config.RUNTIME_ALLOW_PRIVATE_URLS,
    maxRedirects: config.RUNTIME_API_MAX_REDIRECTS,
  });
  const kbQueryDeps = { db, llm, pubsub, logger: logger.child({ component: 'kb' }) };
  // Read once per project, not once per turn; dropped when the patterns change (on any instance).
  const redactors = createRedactorCache(pubsub, {
    ttlMs: redactorCacheTtlMs,
    logger,
    phoneRegions: config.TRANSCRIPT_PHONE_REGIONS,
  });
  // Each turn goes to its session's transcript, to the usage analytics, and to a log line.
  const defaultRecorder = combineTurnRecorders(
    [
      createLoggingTurnRecorder(logger),
      createTranscriptTurnRecorder({
        db,
        pubsub,
        retentionMs: retentionMsOf(config),
        phoneRegions: config.TRANSCRIPT_PHONE_REGIONS,
        redactors,
      }),
      createUsageTurnRecorder({ db, pubsub }),
    ],
    logger,
  );
  const recorder =
    typeof opts.turnRecorder === 'function'
      ? opts.turnRecorder(defaultRecorder)
      : (opts.turnRecorder ?? defaultRecorder);
  // Turn records that their turn could not write (src/runtime/turn-outbox.ts).
  jobs.register(TURN_RECORD_QUEUE, createTurnRecordJobHandler({ db, recorder, logger }));
  // Integration header values (MCP credentials) are sealed at rest with this key; rows written
  // before encryption existed are sealed now (docs/agent-step.md "Credentials at rest").
  const integrationSecrets = integrationSecretBox(config);
  const headerState = await sealStoredIntegrationHeaders({ db, integrationSecrets });
  if (headerState.sealed) logger.info({ sealed: headerState.sealed }, 'encrypted stored integration header values');
  if (headerState.resealed) {
    logger.info(
      { resealed: headerState.resealed, keyId: integrationSecrets?.keyId },
      'integration header values sealed with a previous key were sealed again with INTEGRATION_SECRETS_KEY',
    );
  }
  if (headerState.unreadable.length) {
    logger.warn(
      { integrations: headerState.unreadable },
      'integration header values sealed with a key that is not configured: these integrations cannot be used until it is (INTEGRATION_SECRETS_PREVIOUS_KEYS)',
    );
  }
  if (headerState.plain) {
    logger.warn(
      { integrations: headerState.plain },
      'integration header values are stored unencrypted: set INTEGRATION_SECRETS_KEY to encrypt them',
    );
  }
  // MCP sessions, one per integration, reused across turns and closed when idle.
  const mcpPool = createIntegrationPool({
    fetch: outboundFetch as typeof fetch,
    timeoutMs: config.RUNTIME_API_TIMEOUT_MS,
    idleMs: config.MCP_SESSION_IDLE_MS,
  });
  const runtime = createRuntime({
    db,
    fetch: outboundFetch as typeof fetch,
    pubsub,
    logger,
    llm,
    // AI steps' tokens are credit usage of the turn's project, flow and step (DECISIONS.md §4).
    recordCredit: async (scope, credit, source) => {
      const common = {
        projectId: scope.projectId,
        environmentId: scope.environmentId,
        userId: scope.userId,
        kind: 'credit' as const,
        model: credit.model,
        diagramId: source.flowId,
        nodeId: source.stepId,
      };
      const key = `ai:${newId()}`;
      await recordUsageEvents({ db, pubsub }, [
        { ...common, type: 'llm-input', tokens: credit.inputTokens, idempotencyKey: `${key}:in` },
        { ...common, type: 'llm-output', tokens: credit.outputTokens, idempotencyKey: `${key}:out` },
      ]);
    },
    askKnowledgeBase: (scope, question) =>
      queryKnowledgeBase(kbQueryDeps, {
        projectId: scope.projectId,
        environmentId: scope.environmentId,
        userId: scope.userId,
        question: question.question,
        chunkLimit: question.chunkLimit,
        synthesis: question.synthesis,
        settings: question.settings,
        filter: parseMetadataFilter(question.filters ?? {}),
        diagramId: question.flowId,
        nodeId: question.stepId,
        signal: question.signal,
      }),
    // MCP servers of the turn's project, through the same private-address guard as API steps.
    integrations: createIntegrationAccess({
      db,
      integrationSecrets,
      pool: mcpPool,
      timeoutMs: config.RUNTIME_API_TIMEOUT_MS,
    }),
    recorder,
    onTurnFinished: (turn) => observeTurn(ops.metrics, turn),
    // A session whose transcript ended (an end step, the idle sweep, POST …/end) is over.
    sessionEnded: (key) => isSessionTranscriptEnded(db.prisma, key),
    extraStepTypes: opts.extraStepTypes,
    limits: {
      turnTimeoutMs: config.RUNTIME_TURN_TIMEOUT_MS,
      stepLimit: config.RUNTIME_STEP_LIMIT,
      lockWaitMs: config.RUNTIME_LOCK_WAIT_MS,
      leaseMs: config.RUNTIME_LEASE_MS,
      maxApiTimeoutMs: config.RUNTIME_API_TIMEOUT_MS,
      maxApiResponseBytes: config.RUNTIME_API_MAX_RESPONSE_BYTES,
      maxCodeTimeoutMs: config.RUNTIME_CODE_TIMEOUT_MS,
      codeMemoryBytes: config.RUNTIME_CODE_MEMORY_MB * 1024 * 1024,
      sandboxWorkers: config.RUNTIME_SANDBOX_WORKERS,
    },
  });
  registerEvaluationJobs(jobs, { db, pubsub, llm, logger: logger.child({ component: 'evaluations' }) });
  registerTranscriptJobs(jobs, {
    db,
    pubsub,
    logger: logger.child({ component: 'transcripts' }),
    sessionIdleMs: config.RUNTIME_SESSION_IDLE_MS,
  });
  // Knowledge-base URL uploads fetch addresses that users choose: the same guard as API steps.
  const kbFetch = createOutboundFetch({
    allowPrivate: config.KB_ALLOW_PRIVATE_URLS,
    maxRedirects: config.KB_URL_MAX_REDIRECTS,
  });
  jobs.register(
    KB_INGEST_QUEUE,
    createKbIngestHandler({
      db,
      pubsub,
      llm,
      logger,
      fetch: kbFetch,
      urlTimeoutMs: config.KB_URL_TIMEOUT_MS,
      maxUrlBytes: config.KB_URL_MAX_BYTES,
    }),
  );
  jobs.register(KB_EMBED_QUEUE, createKbEmbedHandler({ db, llm, pubsub, logger: logger.child({ component: 'kb' }) }));
  return {
    config,
    integrationSecrets,
    logger,
    db,
    pubsub,
    auth,
    jobs,
    startJobs() {
      jobs.start();
      // Chunks embedded with another model (EMBEDDING_MODEL changed before this start) are
      // re-embedded now rather than at the next sweep. Instances of one deployment starting in the
      // same minute share this job.
      if (config.EMBEDDING_MODEL) {
        const minute = Math.floor(Date.now() / 60_000);
        requestEmbeddingSweep({ db, pubsub }, `start:${config.EMBEDDING_MODEL}:${minute}`).catch((err) =>
          logger.warn({ err }, 'could not enqueue the embedding sweep'),
        );
      }
    },
    llm,
    runtime,
    ops,
    redactors,
    async close() {
      await runtime.close();
      redactors.close();
      auth.close();
      await mcpPool.close();
      await outboundFetch.close();
      await jobs.stop({ graceMs: config.SHUTDOWN_GRACE_MS });
      await kbFetch.close();
      await llm.close();
      await closePubSub();
      await ops.close();
      await db.close();
    },
  };
}
