import type { NextFunction, Request, Response } from 'express';
import { type DocumentNode, GraphQLError, getOperationAST, Kind, type SelectionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Authenticator } from '../auth/authenticate';
import type { Principal } from '../auth/principal';
import type { Config } from '../env';
import type { Context } from '../graphql/context';
import type { Logger } from '../lib/logger';
import { sendError } from '../rest/errors';
import type { Metrics } from './metrics';
import { groupOfPath, type RateLimitGroup, rateLimitGroups } from './route-groups';
import type { RateLimitRule } from './settings';

/**
 * Rate limits per API key, and per client address for requests without a valid key, in groups
 * (src/ops/route-groups.ts) with their own budgets. Counters are fixed windows kept in Redis when
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

export function rateLimitMessage(decision: RateLimitDecision): string {
  const seconds = Math.max(1, Math.ceil(decision.resetMs / 1000));
  return `Too many requests: the limit of ${decision.limit} ${decision.group === 'default' ? '' : `${decision.group} `}requests per window is used up. Try again in ${seconds} s.`;
}

export interface RateLimitDeps {
  limiter: RateLimiter;
  auth: Authenticator;
  logger: Logger;
  metrics?: Metrics;
}

/**
 * Limits every HTTP request except the paths `exempt` names (health, readiness, metrics, and
 * /graphql, whose operations are limited by `useGraphQLRateLimit` once their fields are known).
 */
export function rateLimitMiddleware(deps: RateLimitDeps, exempt: (path: string) => boolean) {
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!deps.limiter.enabled || req.method === 'OPTIONS' || exempt(req.path)) {
      next();
      return;
    }
    try {
      const principal = await deps.auth.authenticate(req.get('authorization'));
      const subject = subjectOf(principal, req.ip);
      const decision = subject ? await deps.limiter.consume(groupOfPath(req.path), subject) : null;
      if (decision) {
        for (const [name, value] of Object.entries(rateLimitHeaders(decision))) res.setHeader(name, value);
        if (!decision.allowed) {
          deps.metrics?.rateLimited.inc({ group: decision.group });
          sendError(res, 429, 'RATE_LIMITED', rateLimitMessage(decision));
          return;
        }
      }
    } catch (err) {
      // The key lookup failed (database down): the request will fail on its own, and say why.
      deps.logger.warn({ err }, 'rate limit check failed; request allowed');
    }
    next();
  };
}

/** The root fields an operation selects (fragments on the root type included). */
function rootFieldsOf(document: DocumentNode, operationName?: string | null): string[] {
  const operation = getOperationAST(document, operationName ?? undefined);
  if (!operation) return [];
  const fragments = new Map(
    document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const fields: string[] = [];
  const seen = new Set<string>();
  const walk = (selections: readonly SelectionNode[]) => {
    for (const s of selections) {
      if (s.kind === Kind.FIELD) fields.push(s.name.value);
      else if (s.kind === Kind.INLINE_FRAGMENT) walk(s.selectionSet.selections);
      else if (!seen.has(s.name.value)) {
        seen.add(s.name.value);
        const fragment = fragments.get(s.name.value);
        if (fragment) walk(fragment.selectionSet.selections);
      }
    }
  };
  walk(operation.selectionSet.selections);
  return fields;
}

/** The groups an operation spends from: one per distinct group of its root fields. */
export function groupsOfOperation(
  document: DocumentNode,
  operationName: string | null | undefined,
  fieldGroups: ReadonlyMap<string, RateLimitGroup>,
): RateLimitGroup[] {
  const groups = new Set<RateLimitGroup>();
  for (const field of rootFieldsOf(document, operationName)) {
    if (field.startsWith('__')) continue;
    groups.add(fieldGroups.get(field) ?? 'default');
  }
  if (groups.size === 0) groups.add('default');
  return [...groups];
}

/** The context of an operation run by the REST adapter (already limited at the HTTP layer). */
export interface RestOperationMarker {
  restRoute?: string;
}

/** Express's request, which Yoga passes in the server context when it serves /graphql. */
interface HttpServerContext {
  req?: Request;
}

/**
 * Limits GraphQL operations sent to /graphql and /graphql/stream, in the groups of their root
 * fields. An operation over the limit gets RATE_LIMITED with HTTP status 429 and the headers.
 */
export function useGraphQLRateLimit(
  deps: RateLimitDeps,
  fieldGroups: ReadonlyMap<string, RateLimitGroup>,
): Plugin<Context> {
  const check = async (
    ctx: Context & RestOperationMarker & HttpServerContext,
    document: DocumentNode,
    operationName: string | null | undefined,
  ): Promise<GraphQLError | null> => {
    if (!deps.limiter.enabled || ctx.restRoute) return null;
    const subject = subjectOf(ctx.principal, ctx.req?.ip);
    if (!subject) return null;
    for (const group of groupsOfOperation(document, operationName, fieldGroups)) {
      const decision = await deps.limiter.consume(group, subject);
      if (decision && !decision.allowed) {
        deps.metrics?.rateLimited.inc({ group });
        return new GraphQLError(rateLimitMessage(decision), {
          extensions: { code: 'RATE_LIMITED', http: { status: 429, headers: rateLimitHeaders(decision) } },
        });
      }
    }
    return null;
  };
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const error = await check(args.contextValue as Context, args.document, args.operationName);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    async onSubscribe({ args, setResultAndStopExecution }) {
      const error = await check(args.contextValue as Context, args.document, args.operationName);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}
