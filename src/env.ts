import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseSecretKey } from './lib/secret-box';
import { DEFAULT_PRICES, type PriceTable, parsePriceTable } from './llm/prices';
import { opsSettings } from './ops/settings';
import { DEFAULT_PHONE_REGIONS, parsePhoneRegions } from './transcripts/redaction';

const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/**
 * Every setting Parley reads from the environment, with its default. This module is the one reader
 * of process.env: the entry points call `loadConfig(process.env)`, tests call it with their own values.
 */
const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^(file:|postgres(ql)?:\/\/)/, 'must start with file:, postgres:// or postgresql://')
    .default('file:./data/parley.db'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  /** Prefix of every Redis key and channel, so several deployments can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_.-]{0,64}$/)
    .default('parley:'),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: logLevel.default('info'),
  /** Largest accepted JSON request body, in bytes. */
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** How long a verified API key is trusted before it is looked up again (revocations made on
   * another instance take effect within this time; on this instance, at once). */
  KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).default(5000),
  GRAPHIQL: booleanFlag.optional(),
  /** Run background jobs (evaluations, ingestion) in this process. A deployment may run them only in
   * `parley worker` processes instead. */
  JOBS_ENABLED: booleanFlag.default(true),
  /** Jobs one instance runs at the same time. */
  JOB_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  /** How often an idle worker looks for due jobs, in milliseconds (enqueueing also wakes it). */
  JOB_POLL_MS: z.coerce.number().int().min(10).default(1000),
  /** How long a worker owns a claimed job before another may take it over (renewed while it runs). */
  JOB_LEASE_MS: z.coerce.number().int().min(100).default(60_000),
  // Transcripts and evaluations (docs/transcripts.md).
  /** How long the unredacted original of a redacted transcript log is kept, in days. */
  TRANSCRIPT_UNREDACTED_RETENTION_DAYS: z.coerce.number().min(0).max(3650).default(30),
  /**
   * The regions (ISO 3166-1 alpha-2, comma-separated) whose national phone formats redaction reads;
   * numbers written with a + or 00 country code are recognised in every region (docs/transcripts.md).
   */
  TRANSCRIPT_PHONE_REGIONS: z
    .string()
    .default(DEFAULT_PHONE_REGIONS.join(','))
    .transform((value, ctx) => {
      const parsed = parsePhoneRegions(value);
      if (parsed.ok) return parsed.regions;
      ctx.addIssue({ code: 'custom', message: parsed.message });
      return z.NEVER;
    }),
  /** How often the sweep that ends idle runtime sessions' transcripts runs (once per period across instances). */
  TRANSCRIPT_IDLE_SWEEP_INTERVAL_MS: z.coerce.number().int().min(1000).default(60_000),
  /** How often the job that purges originals past their retention runs, in milliseconds. */
  TRANSCRIPT_PURGE_INTERVAL_MS: z.coerce.number().int().min(1000).default(3_600_000),
  /** Most evaluation jobs a project may have queued or running; the queue endpoint answers 429 beyond. */
  EVALUATION_QUEUE_LIMIT: z.coerce.number().int().min(1).default(1000),
  /** On SIGTERM: how long in-flight requests may take before the process exits anyway. */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),

  // Language models (docs/models.md). Without LLM_BASE_URL the built-in offline provider answers.
  /** An OpenAI-compatible API, version path included: https://api.openai.com/v1, http://127.0.0.1:11434/v1 */
  LLM_BASE_URL: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
  LLM_API_KEY: z.string().optional(),
  /** Required with LLM_BASE_URL: the model used when a caller names none. */
  LLM_DEFAULT_MODEL: z.string().optional(),
  /** Turns embeddings on (same server as LLM_BASE_URL). */
  EMBEDDING_MODEL: z.string().optional(),
  /** Prices per million tokens as JSON, {"model": {"input": 0.15, "output": 0.6}}; wins over the file. */
  LLM_PRICES: z.string().optional(),
  /** A JSON file of prices in the LLM_PRICES format. */
  LLM_PRICES_FILE: z.string().optional(),
  /** Longest wait for a model's answer to start, and then for each next piece of it. */
  LLM_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** Further attempts after 429, 5xx or a dropped connection, before the first token only. */
  LLM_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  /** A longer Retry-After fails the call at once (kind rate_limit) instead of waiting. */
  LLM_MAX_RETRY_WAIT_MS: z.coerce.number().int().min(0).default(30_000),
  /** OpenAI's reasoning models (o-series, gpt-5) take max_completion_tokens. */
  LLM_MAX_TOKENS_FIELD: z.enum(['max_tokens', 'max_completion_tokens']).default('max_tokens'),
  // Runtime (docs/runtime.md "Settings").
  /** A turn's time limit; the turn then ends with a `debug` trace of type `timeout`. */
  RUNTIME_TURN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  /**
   * A runtime session with no turn for this long is over: its transcript is ended (evaluations
   * run) by the idle sweep, and the user's next turn starts a new session (docs/runtime.md).
   */
  RUNTIME_SESSION_IDLE_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30 * 60_000),
  /** Steps one turn may run before it is stopped as an endless loop. */
  RUNTIME_STEP_LIMIT: z.coerce.number().int().min(1).max(100_000).default(1000),
  /** How long a turn waits for another turn of the same user to finish. */
  RUNTIME_LOCK_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /**
   * How long a user's lease outlives the instance holding it: extended every third of it while a
   * turn runs, so after a kill -9 the user's next turn waits this long at most (docs/runtime.md).
   */
  RUNTIME_LEASE_MS: z.coerce.number().int().min(1000).max(600_000).default(15_000),
  /**
   * The key that encrypts integration header values (MCP credentials) at rest with AES-256-GCM:
   * 32 bytes as 64 hex characters or base64 (`openssl rand -hex 32`). Without it, integrations
   * cannot be given header values (docs/agent-step.md "Credentials at rest").
   */
  INTEGRATION_SECRETS_KEY: z
    .string()
    .refine((text) => parseSecretKey(text) !== null, 'must be 32 bytes as 64 hex characters or base64')
    .optional(),
  /**
   * Keys that sealed integration header values before INTEGRATION_SECRETS_KEY (key rotation),
   * comma-separated: values sealed with them are still read, and re-sealed with
   * INTEGRATION_SECRETS_KEY at start and by `parley secrets reseal` (docs/agent-step.md).
   */
  INTEGRATION_SECRETS_PREVIOUS_KEYS: z
    .string()
    .transform((text) =>
      text
        .split(',')
        .map((k) => k.trim())
        .filter(Boolean),
    )
    .refine(
      (keys) => keys.every((k) => parseSecretKey(k) !== null),
      'each key must be 32 bytes as 64 hex characters or base64, separated by commas',
    )
    .optional(),
  /**
   * How long an MCP client session (one per integration, shared by all conversations) stays open
   * without use before it is closed (docs/agent-step.md "MCP servers").
   */
  MCP_SESSION_IDLE_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .max(86_400_000)
    .default(5 * 60_000),
  /** Longest time one API step may take, whatever the step asks for. */
  RUNTIME_API_TIMEOUT_MS: z.coerce.number().int().min(1).max(600_000).default(30_000),
  /**
   * Let API steps call private, loopback and link-local addresses (services on the server's own
   * network). Off by default: an agent author could otherwise reach internal services (SSRF).
   */
  RUNTIME_ALLOW_PRIVATE_URLS: booleanFlag.default(false),
  /** Redirects an API step follows (each one checked against the address guard). */
  RUNTIME_API_MAX_REDIRECTS: z.coerce.number().int().min(0).max(20).default(5),
  /** Largest API response an API step reads. */
  RUNTIME_API_MAX_RESPONSE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** Longest time one code step may run, whatever the step asks for. */
  RUNTIME_CODE_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(5000),
  /** Memory of one code step's sandbox. */
  RUNTIME_CODE_MEMORY_MB: z.coerce.number().int().min(1).max(1024).default(32),
  /** Worker threads running code steps. */
  RUNTIME_SANDBOX_WORKERS: z.coerce.number().int().min(1).max(64).default(2),
  // Knowledge base (docs/knowledge-base.md).
  /** Largest file a knowledge-base upload accepts (DECISIONS.md §7: 10 MB). */
  KB_MAX_FILE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(10 * 1024 * 1024),
  /**
   * Let URL uploads fetch private, loopback and link-local addresses. Off by default: anyone with
   * a kb:write key could otherwise make the server read internal services (SSRF).
   */
  KB_ALLOW_PRIVATE_URLS: booleanFlag.default(false),
  /** Longest time fetching a URL document may take, body included. */
  KB_URL_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(15_000),
  /** Largest URL response read. */
  KB_URL_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(10 * 1024 * 1024),
  /** Redirects a URL fetch follows (each one checked against the address guard). */
  KB_URL_MAX_REDIRECTS: z.coerce.number().int().min(0).max(20).default(5),
  /** How long `?wait=true` waits for ingestion before answering with the PENDING document. */
  KB_WAIT_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(60_000),
  /** How often the sweep embeds chunks that have no vector for EMBEDDING_MODEL (after a model change). */
  KB_EMBED_SWEEP_MS: z.coerce.number().int().min(1000).default(600_000),
  /** Interval of the `:` comment that keeps an idle SSE stream open through proxies. */
  SSE_KEEPALIVE_MS: z.coerce.number().int().min(10).default(15_000),

  // Operations and protection (docs/operations.md).
  ...opsSettings,
});

export type Config = z.infer<typeof configSchema> & {
  GRAPHIQL: boolean;
  GRAPHQL_INTROSPECTION: boolean;
  /** DEFAULT_PRICES, then LLM_PRICES_FILE, then LLM_PRICES: a later source wins per model. */
  llmPrices: PriceTable;
};

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined>): Config {
  // An empty variable means "not set", as in most twelve-factor apps.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const config = parsed.data;
  if (config.INTEGRATION_SECRETS_PREVIOUS_KEYS?.length && !config.INTEGRATION_SECRETS_KEY) {
    throw new ConfigError(
      'Invalid configuration:\n  INTEGRATION_SECRETS_PREVIOUS_KEYS: needs INTEGRATION_SECRETS_KEY (the key that seals from now on)',
    );
  }
  return {
    ...config,
    GRAPHIQL: config.GRAPHIQL ?? config.NODE_ENV !== 'production',
    GRAPHQL_INTROSPECTION: config.GRAPHQL_INTROSPECTION ?? config.NODE_ENV !== 'production',
    llmPrices: checkLlmSettings(config),
  };
}

/** The language-model settings that depend on each other, and the price table they name. */
function checkLlmSettings(config: z.infer<typeof configSchema>): PriceTable {
  const problems: string[] = [];
  if (config.LLM_BASE_URL && !config.LLM_DEFAULT_MODEL) {
    problems.push('LLM_DEFAULT_MODEL: is required when LLM_BASE_URL is set');
  }
  if (config.EMBEDDING_MODEL && !config.LLM_BASE_URL) {
    problems.push('EMBEDDING_MODEL: needs LLM_BASE_URL (the server that computes embeddings)');
  }
  let fromFile: PriceTable = {};
  let fromEnv: PriceTable = {};
  const file = config.LLM_PRICES_FILE;
  try {
    if (file) fromFile = parsePriceTable(readFileSync(file, 'utf8'), `LLM_PRICES_FILE (${file})`);
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    problems.push(missing ? `LLM_PRICES_FILE: no file at ${file}` : (err as Error).message);
  }
  try {
    if (config.LLM_PRICES) fromEnv = parsePriceTable(config.LLM_PRICES, 'LLM_PRICES');
  } catch (err) {
    problems.push((err as Error).message);
  }
  if (problems.length) throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  return { ...DEFAULT_PRICES, ...fromFile, ...fromEnv };
}
