import type { Express, Request, RequestHandler } from 'express';
import type { Authenticator } from '../auth/authenticate';
import type { Config } from '../env';
import type { Logger } from '../lib/logger';
import type { Ops } from '../ops';
import { graphiqlAssetsPrefix } from '../ops/graphiql';
import { corsMiddleware, metricsHandler, requestObservability, securityHeaders } from './middleware';
import { rateLimitMiddleware } from './rate-limit';
import { createRouteMatcher } from './route-matcher';
import { isWebChatPath } from './web-chat';

/** Paths of the instance itself, never rate limited: health, readiness and metrics. */
const ownPaths = ['/healthz', '/readyz', '/metrics'];

/** What the HTTP edge needs of the instance (`AppServices` satisfies it). */
export interface EdgeServices {
  config: Config;
  logger: Logger;
  auth: Pick<Authenticator, 'authenticate'>;
  ops: Pick<Ops, 'metrics' | 'rateLimiter' | 'streams'>;
}

export interface EdgeOptions {
  graphqlEndpoint: string;
  /** The REST routes' method and path pattern, which name requests in metrics and spans. */
  routes: readonly { method: string; path: string }[];
}

/**
 * The HTTP edge's operational middleware, installed first: a span and metrics per request,
 * CORS (preflights answered here), security headers, and GET /metrics. Returns the middleware
 * every request passes through, in the order installed, for a path that runs them itself
 * (the GraphQL JSON path in src/app.ts).
 */
export function useEdgeMiddleware(app: Express, services: EdgeServices, opts: EdgeOptions): RequestHandler[] {
  const { config, ops } = services;
  const { graphqlEndpoint } = opts;
  const matchRoute = createRouteMatcher(opts.routes);
  const isGraphQL = (path: string) => path === graphqlEndpoint || path.startsWith(`${graphqlEndpoint}/`);
  const routeOf = (req: Request) => {
    if (isGraphQL(req.path))
      return req.path.startsWith(`${graphqlEndpoint}/stream`) ? `${graphqlEndpoint}/stream` : graphqlEndpoint;
    if (ownPaths.includes(req.path)) return req.path;
    // GraphiQL's static files: one label, not one per file.
    if (req.path.startsWith(`${graphiqlAssetsPrefix}/`)) return graphiqlAssetsPrefix;
    return matchRoute(req.method, req.path) ?? 'unmatched';
  };
  const handlers: RequestHandler[] = [
    requestObservability({ metrics: ops.metrics, streams: ops.streams, routeOf, isGraphQL }),
  ];
  const cors = corsMiddleware(config);
  // The web chat widget's public routes answer CORS per project (src/http/web-chat.ts).
  if (cors) handlers.push((req, res, next) => (isWebChatPath(req.path) ? next() : cors(req, res, next)));
  handlers.push(securityHeaders({ graphiql: config.GRAPHIQL, graphqlEndpoint }));
  for (const handler of handlers) app.use(handler);
  if (ops.metrics) app.get('/metrics', metricsHandler(ops.metrics, config.METRICS_TOKEN));
  return handlers;
}

/**
 * Rate limits for every request but the instance's own paths and GraphQL (whose operations are
 * limited in the GraphQL pipeline, by the groups of their fields).
 */
export function edgeRateLimit(services: EdgeServices, graphqlEndpoint: string) {
  return rateLimitMiddleware(
    {
      limiter: services.ops.rateLimiter,
      auth: services.auth,
      logger: services.logger,
      metrics: services.ops.metrics ?? undefined,
    },
    (path) => ownPaths.includes(path) || path === graphqlEndpoint || path.startsWith(`${graphqlEndpoint}/`),
  );
}
