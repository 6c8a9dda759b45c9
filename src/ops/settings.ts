import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * The settings of rate limits, GraphQL limits, metrics, tracing, CORS, timeouts and the proxy
 * (docs/operations.md). src/env.ts spreads them into the one configuration schema, so they are read
 * and validated with every other setting; only the parsing of their formats lives here.
 */

const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** A rate limit: that many requests per window, or nothing when the group is not limited. */
export interface RateLimitRule {
  points: number;
  durationSeconds: number;
}

/** `<requests>/<seconds>` (e.g. `600/60`), or `off`. */
const rateLimitRule = z
  .string()
  .trim()
  .transform((raw, ctx): RateLimitRule | null => {
    if (raw === 'off' || raw === '0') return null;
    const match = /^(\d{1,9})\/(\d{1,6})$/.exec(raw);
    const points = Number(match?.[1]);
    const durationSeconds = Number(match?.[2]);
    if (!match || points < 1 || durationSeconds < 1) {
      ctx.addIssue({ code: 'custom', message: 'must be <requests>/<seconds>, e.g. 600/60, or off' });
      return z.NEVER;
    }
    return { points, durationSeconds };
  });

/** Express `trust proxy`: false, true, a hop count, or addresses, subnets and presets. */
export type TrustProxy = boolean | number | string[];

const trustProxyPresets = new Set(['loopback', 'linklocal', 'uniquelocal']);

const trustProxy = z
  .string()
  .trim()
  .transform((raw, ctx): TrustProxy => {
    if (raw === 'true' || raw === 'false') return raw === 'true';
    if (/^\d{1,2}$/.test(raw)) return Number(raw);
    const entries = raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = entries.filter((entry) => {
      if (trustProxyPresets.has(entry)) return false;
      const [address, bits, ...rest] = entry.split('/');
      if (rest.length || !address || !isIP(address)) return true;
      return bits !== undefined && !/^\d{1,3}$/.test(bits);
    });
    if (entries.length === 0 || bad.length) {
      ctx.addIssue({
        code: 'custom',
        message: `must be true, false, a hop count, or a comma list of addresses, subnets (10.0.0.0/8) and loopback, linklocal, uniquelocal${bad.length ? `; not understood: ${bad.join(', ')}` : ''}`,
      });
      return z.NEVER;
    }
    return entries;
  });

/** `*`, or a comma list of origins (scheme, host and optional port; no path). */
const corsOrigins = z
  .string()
  .trim()
  .transform((raw, ctx): '*' | string[] => {
    if (raw === '*') return '*';
    const origins = raw
      .split(',')
      .map((s) => s.trim().replace(/\/$/, ''))
      .filter(Boolean);
    const bad = origins.filter(
      (o) => !/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$|^https?:\/\/\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(o),
    );
    if (origins.length === 0 || bad.length) {
      ctx.addIssue({
        code: 'custom',
        message: `must be * or a comma list of origins like https://app.example.com${bad.length ? `; not an origin: ${bad.join(', ')}` : ''}`,
      });
      return z.NEVER;
    }
    return origins;
  });

const positiveInt = (min: number, max: number, fallback: number) =>
  z.coerce.number().int().min(min).max(max).default(fallback);

export const opsSettings = {
  // ── Rate limits ──
  /** Limit requests per API key (per client address without a valid key). */
  RATE_LIMIT_ENABLED: booleanFlag.default(true),
  /** Every route and GraphQL operation not in a group below. */
  RATE_LIMIT_DEFAULT: rateLimitRule.default({ points: 1200, durationSeconds: 60 }),
  /** Usage queries: POST /v2/query/usage and the usage GraphQL fields. */
  RATE_LIMIT_USAGE: rateLimitRule.default({ points: 300, durationSeconds: 60 }),
  /** Runtime turns: the interact routes, mutation and subscription. */
  RATE_LIMIT_RUNTIME: rateLimitRule.default({ points: 600, durationSeconds: 60 }),
  /** Knowledge-base uploads (POST /v1/knowledge-base/docs/upload…). */
  RATE_LIMIT_KB_UPLOAD: rateLimitRule.default({ points: 60, durationSeconds: 60 }),
  /** Knowledge-base queries (POST /v1/knowledge-base/query, /knowledge-base/query). */
  RATE_LIMIT_KB_QUERY: rateLimitRule.default({ points: 300, durationSeconds: 60 }),

  // ── GraphQL limits ──
  GRAPHQL_MAX_DEPTH: positiveInt(1, 1000, 12),
  GRAPHQL_MAX_COST: positiveInt(1, 100_000_000, 50_000),
  GRAPHQL_MAX_ALIASES: positiveInt(0, 10_000, 30),
  GRAPHQL_MAX_TOKENS: positiveInt(10, 1_000_000, 5000),
  GRAPHQL_MAX_DIRECTIVES: positiveInt(0, 10_000, 50),
  /** Largest `first`, `last`, `take` or `limit` argument. */
  GRAPHQL_MAX_PAGE_SIZE: positiveInt(1, 1_000_000, 500),
  /** Most items in one list argument (top level or inside an input object). */
  GRAPHQL_MAX_LIST_LENGTH: positiveInt(1, 1_000_000, 1000),
  /** Default: on unless NODE_ENV=production (see loadConfig). */
  GRAPHQL_INTROSPECTION: booleanFlag.optional(),
  /** A JSON file of persisted operations: {"<sha256 of the document>": "<document>"} (or an array of documents). */
  GRAPHQL_PERSISTED_OPERATIONS_FILE: z.string().min(1).optional(),
  /** Refuse documents that are not persisted operations on /graphql (the REST routes keep working). */
  GRAPHQL_PERSISTED_ONLY: booleanFlag.default(false),
  /**
   * Execute queries and mutations with graphql-jit (each document compiled once to a function)
   * instead of graphql-js; the answers are the same but for one case the GraphQL specification
   * allows either way (src/graphql/plugins/compiled-execution.ts).
   */
  GRAPHQL_JIT: booleanFlag.default(true),

  // ── Metrics and tracing ──
  METRICS_ENABLED: booleanFlag.default(true),
  /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** OTLP/HTTP base URL; traces go to <url>/v1/traces. Without it (or the next) no span leaves the process. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
  /** Full OTLP/HTTP traces URL; wins over OTEL_EXPORTER_OTLP_ENDPOINT. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
    .optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('parley'),

  // ── HTTP ──
  /** `*` or a comma list of origins allowed to call the API from a browser; unset: no CORS headers. */
  CORS_ORIGINS: corsOrigins.optional(),
  TRUST_PROXY: trustProxy.default(false),
  /** Longest time to receive a whole request (headers and body); streamed responses are not cut by it. */
  REQUEST_TIMEOUT_MS: positiveInt(0, 3_600_000, 120_000),
  /** Longest time to receive a request's headers. */
  HEADERS_TIMEOUT_MS: positiveInt(100, 3_600_000, 30_000),
  /** How long an idle keep-alive connection stays open; keep it above the load balancer's idle timeout. */
  KEEP_ALIVE_TIMEOUT_MS: positiveInt(0, 3_600_000, 65_000),
} as const;
