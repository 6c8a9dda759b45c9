import { type Authenticator, createAuthenticator } from './auth/authenticate';
import { createDb, type Db } from './db/client';
import { applyMigrations } from './db/migrate';
import type { Config } from './env';
import { createJobRunner, type JobRunner } from './jobs/runner';
import { createLogger, type Logger } from './lib/logger';
import { type AppPubSub, createAppPubSub } from './lib/pubsub';
import { createLlmProvider, type LlmProvider } from './llm';
import { registerTranscriptJobs, transcriptRecurringJobs } from './transcripts/jobs';

/**
 * The long-lived parts of one Parley instance, built once by `createServices` and handed to the
 * GraphQL context, the REST adapter and the CLI. Nothing here is a module-level singleton, so a
 * test can run several instances (SQLite and PostgreSQL, or two sharing Redis) in one process.
 */
export interface AppServices {
  config: Config;
  logger: Logger;
  db: Db;
  pubsub: AppPubSub;
  auth: Authenticator;
  /** Durable background jobs. Areas register their handlers here; the server (or `parley worker`) starts it. */
  jobs: JobRunner;
  /** Language models: OpenAI-compatible when LLM_BASE_URL is set, else the built-in offline provider. */
  llm: LlmProvider;
  /** Closes what was opened, in reverse order. */
  close(): Promise<void>;
}

export interface CreateServicesOptions {
  logger?: Logger;
  /** Apply pending migrations before opening (default true). */
  migrate?: boolean;
}

export async function createServices(config: Config, opts: CreateServicesOptions = {}): Promise<AppServices> {
  const logger = opts.logger ?? createLogger(config.LOG_LEVEL);
  if (opts.migrate !== false) {
    const applied = await applyMigrations(config.DATABASE_URL);
    if (applied.length) logger.info({ applied }, 'applied database migrations');
  }
  const db = await createDb(config.DATABASE_URL);
  const { pubsub, close: closePubSub } = createAppPubSub(config.REDIS_URL, {
    prefix: config.REDIS_PREFIX,
    onError: (err) => logger.warn({ err }, 'redis connection error'),
  });
  const auth = createAuthenticator({
    db,
    adminToken: config.ADMIN_TOKEN,
    cacheTtlMs: config.KEY_CACHE_TTL_MS,
    logger,
  });
  const jobs = createJobRunner({
    db,
    logger,
    pubsub,
    concurrency: config.JOB_CONCURRENCY,
    pollIntervalMs: config.JOB_POLL_MS,
    leaseMs: config.JOB_LEASE_MS,
    recurring: [...transcriptRecurringJobs({ purgeEveryMs: config.TRANSCRIPT_PURGE_INTERVAL_MS })],
  });
  const llm = createLlmProvider(
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
  registerTranscriptJobs(jobs, { db, pubsub, llm, logger: logger.child({ component: 'evaluations' }) });
  return {
    config,
    logger,
    db,
    pubsub,
    auth,
    jobs,
    llm,
    async close() {
      await jobs.stop({ graceMs: config.SHUTDOWN_GRACE_MS });
      await llm.close();
      await closePubSub();
      await db.close();
    },
  };
}
