import type { Express, Request } from 'express';
import { routes } from '../rest/routes';
import type { AppServices } from '../services';
import { graphiqlAssetsPrefix } from './graphiql';
import { corsMiddleware, metricsHandler, requestObservability, securityHeaders } from './http';
import { rateLimitMiddleware } from './rate-limit';
import { createRouteMatcher } from './route-groups';

/** Paths of the instance itself, never rate limited: health, readiness and metrics. */
const ownPaths = ['/healthz', '/readyz', '/metrics'];

/**
 * The HTTP layer's operational middleware, installed first: a span and metrics per request,
 * CORS (preflights answered here), security headers, and GET /metrics.
 */
export function useOpsMiddleware(app: Express, services: AppServices, graphqlEndpoint: string): void {
  const { config, ops } = services;
  const matchRoute = createRouteMatcher(routes);
  const isGraphQL = (path: string) => path === graphqlEndpoint || path.startsWith(`${graphqlEndpoint}/`);
  const routeOf = (req: Request) => {
    if (isGraphQL(req.path))
      return req.path.startsWith(`${graphqlEndpoint}/stream`) ? `${graphqlEndpoint}/stream` : graphqlEndpoint;
    if (ownPaths.includes(req.path)) return req.path;
    // GraphiQL's static files: one label, not one per file.
    if (req.path.startsWith(`${graphiqlAssetsPrefix}/`)) return graphiqlAssetsPrefix;
    return matchRoute(req.method, req.path) ?? 'unmatched';
  };
  app.use(requestObservability({ metrics: ops.metrics, streams: ops.streams, routeOf, isGraphQL }));
  const cors = corsMiddleware(config);
  if (cors) app.use(cors);
  app.use(securityHeaders({ graphiql: config.GRAPHIQL, graphqlEndpoint }));
  if (ops.metrics) app.get('/metrics', metricsHandler(ops.metrics, config.METRICS_TOKEN));
}

/**
 * Rate limits for every request but the instance's own paths and GraphQL (whose operations are
 * limited in the GraphQL pipeline, by the groups of their fields).
 */
export function opsRateLimit(services: AppServices, graphqlEndpoint: string) {
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
