import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Authenticator } from '../auth/authenticate';
import type { Principal } from '../auth/principal';
import type { Config } from '../env';
import type { Logger } from '../lib/logger';
import type { Metrics } from './prometheus';
import { type RateLimitGroup, rateLimitGroups } from './route-groups';
import type { RateLimitRule } from './settings';

/**
 * The rate limiter of an instance: budgets per API key, and per client address for requests
 * without a valid key, in groups (src/ops/route-groups.ts) with their own budgets. The HTTP edge
 * (src/http/rate-limit.ts) spends from it per REST request, the GraphQL pipeline
 * (src/graphql/plugins/rate-limit.ts) per operation. Counters are fixed windows kept in Redis when
 * REDIS_URL is set, so every instance counts against one budget, and in memory otherwise.
 *
 * When Redis cannot answer (down, or slower than 250 ms), each instance falls back to an
 * in-memory limiter with the same budget: limits keep holding per instance (fail-soft) rather than
 * letting everything through (fail-open) or refusing everything (fail-closed). See docs/operations.md.
 */

export interface RateLimitDecision {
  group: RateLimitGroup;
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
}

export interface RateLimiter {
  readonly enabled: boolean;
  /** Spends one request of `subject` in `group`; null when the group is not limited. */
  consume(group: RateLimitGroup, subject: string): Promise<RateLimitDecision | null>;
  /** Where counters live now: `redis`, `memory` (no REDIS_URL), or `fallback` (Redis unreachable). */
  store(): 'redis' | 'memory' | 'fallback';
  close(): Promise<void>;
}

const groupSetting: Record<RateLimitGroup, keyof Config> = {
  default: 'RATE_LIMIT_DEFAULT',
  usage: 'RATE_LIMIT_USAGE',
  runtime: 'RATE_LIMIT_RUNTIME',
  'kb-upload': 'RATE_LIMIT_KB_UPLOAD',
  'kb-query': 'RATE_LIMIT_KB_QUERY',
};

export function ruleOf(config: Config, group: RateLimitGroup): RateLimitRule | null {
  return (config[groupSetting[group]] as RateLimitRule | null | undefined) ?? null;
}

type Limiter = RateLimiterMemory | RateLimiterRedis;

export function createRateLimiter(config: Config, opts: { logger: Logger; redisUrl?: string }): RateLimiter {
  if (!config.RATE_LIMIT_ENABLED) {
    return { enabled: false, consume: async () => null, store: () => 'memory', close: async () => {} };
  }
  const redisUrl = opts.redisUrl ?? config.REDIS_URL;
  let redis: Redis | null = null;
  if (redisUrl) {
    redis = new Redis(redisUrl, {
      // A command that cannot be sent now fails now, and the in-memory limiter answers instead of
      // the request waiting for Redis to come back.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 250,
    });
    redis.on('error', (err) => opts.logger.warn({ err: err.message }, 'rate limiter: redis connection error'));
  }
  const limiters = new Map<RateLimitGroup, Limiter>();
  for (const group of rateLimitGroups) {
    const rule = ruleOf(config, group);
    if (!rule) continue;
    const base = {
      points: rule.points,
      duration: rule.durationSeconds,
      keyPrefix: `${config.REDIS_PREFIX}rl:${group}`,
    };
    const memory = new RateLimiterMemory(base);
    limiters.set(
      group,
      redis
        ? new RateLimiterRedis({ ...base, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: memory })
        : memory,
    );
  }
  return {
    enabled: true,
    store: () => (!redis ? 'memory' : redis.status === 'ready' ? 'redis' : 'fallback'),
    async consume(group, subject) {
      const limiter = limiters.get(group);
      if (!limiter) return null;
      const decide = (res: RateLimiterRes, allowed: boolean): RateLimitDecision => ({
        group,
        allowed,
        limit: limiter.points,
        remaining: res.remainingPoints,
        resetMs: Math.max(0, res.msBeforeNext),
      });
      try {
        return decide(await limiter.consume(subject, 1), true);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) return decide(rejection, false);
        // Neither Redis nor the in-memory insurance answered: let the request through and say so.
        opts.logger.error({ err: rejection, group }, 'rate limiter failed; request allowed');
        return null;
      }
    },
    async close() {
      redis?.disconnect();
    },
  };
}

/** Whose budget a request spends: the key's, the client address's, or none (the operator). */
export function subjectOf(principal: Principal, clientAddress: string | undefined): string | null {
  switch (principal.kind) {
    case 'operator':
      // ADMIN_TOKEN is the operator's own credential: an incident is the worst time to lock it out.
      return null;
    case 'key':
      return `key:${principal.keyId}`;
    default:
      // Missing, unknown, revoked or made-up keys share their address's budget, so a client cannot
      // get a fresh budget by sending a new random key each time.
      return `ip:${clientAddress ?? 'unknown'}`;
  }
}

export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  const resetSeconds = Math.ceil(decision.resetMs / 1000);
  return {
    'X-RateLimit-Limit': String(decision.limit),
    'X-RateLimit-Remaining': String(decision.remaining),
    // Unix time in seconds when the window resets (GitHub's convention).
    'X-RateLimit-Reset': String(Math.ceil((Date.now() + decision.resetMs) / 1000)),
    ...(decision.allowed ? {} : { 'Retry-After': String(Math.max(1, resetSeconds)) }),
  };
}

/** What the edge and the GraphQL plugin need to spend from the limiter and report refusals. */
export interface RateLimitDeps {
  limiter: RateLimiter;
  auth: Pick<Authenticator, 'authenticate'>;
  logger: Logger;
  metrics?: Metrics;
}

export function rateLimitMessage(decision: RateLimitDecision): string {
  const seconds = Math.max(1, Math.ceil(decision.resetMs / 1000));
  return `Too many requests: the limit of ${decision.limit} ${decision.group === 'default' ? '' : `${decision.group} `}requests per window is used up. Try again in ${seconds} s.`;
}
