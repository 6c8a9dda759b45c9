import type { NextFunction, Request, Response } from 'express';
import { type RateLimitDeps, rateLimitHeaders, rateLimitMessage, subjectOf } from '../ops/rate-limit';
import { groupOfPath } from '../ops/route-groups';
import { sendError } from '../rest/errors';

/**
 * Limits every HTTP request except the paths `exempt` names (health, readiness, metrics, and
 * /graphql, whose operations are limited by `useGraphQLRateLimit` in src/graphql/plugins once their
 * fields are known). The group is the path's (src/ops/route-groups.ts); a refusal is the REST error
 * body with status 429 and the X-RateLimit-* and Retry-After headers.
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
