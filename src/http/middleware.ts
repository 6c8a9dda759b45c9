import { context as otelContext, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import cors from 'cors';
import type { NextFunction, Request, Response } from 'express';
import helmet from 'helmet';
import { constantTimeEqual } from '../auth/keys';
import type { Config } from '../env';
import { graphiqlCsp } from '../ops/graphiql';
import type { Metrics } from '../ops/prometheus';
import type { OpenStreams } from '../ops/streams';
import { extractContext, tracer, tracingActive } from '../ops/tracing';
import { sendError } from '../rest/errors';

/**
 * The HTTP hygiene and signals around every request: CORS, security headers, a span and metrics
 * per request labelled by route pattern, adding event-stream responses to the instance's open
 * streams (src/ops/streams.ts, for the gauge and for shutdown), and GET /metrics.
 */

/** Headers a browser client may send, and those it may read, across origins. */
const allowedHeaders = ['Authorization', 'Content-Type', 'Accept', 'X-Request-Id', 'versionID', 'Last-Event-ID'];
const exposedHeaders = [
  'X-Request-Id',
  'Retry-After',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'Content-Type',
];

/** CORS from CORS_ORIGINS; without it, no CORS headers at all (same-origin only). */
export function corsMiddleware(config: Pick<Config, 'CORS_ORIGINS'>) {
  const origins = config.CORS_ORIGINS;
  if (!origins) return null;
  return cors({
    origin: origins === '*' ? '*' : origins,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders,
    exposedHeaders,
    // Keys travel in the Authorization header, never in cookies: no credentialed CORS.
    credentials: false,
    maxAge: 600,
    optionsSuccessStatus: 204,
  });
}

/** JSON answers need no scripts, styles or frames. */
const apiCsp = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
/** helmet's headers, with a Content-Security-Policy fit for each kind of response. */
export function securityHeaders(opts: { graphiql: boolean; graphqlEndpoint: string }) {
  const headers = helmetHeaders();
  return (req: Request, res: Response, next: NextFunction) => {
    const graphiqlPage =
      opts.graphiql &&
      req.method === 'GET' &&
      (req.path === opts.graphqlEndpoint || req.path === `${opts.graphqlEndpoint}/`) &&
      Boolean(req.accepts('text/html'));
    res.setHeader('Content-Security-Policy', graphiqlPage ? graphiqlCsp : apiCsp);
    for (const [name, value] of headers.set) res.setHeader(name, value);
    for (const name of headers.removed) res.removeHeader(name);
    next();
  };
}

/**
 * The headers helmet sets (its defaults, without its CSP) and those it removes. With these options
 * they are the same for every request, so helmet runs once, against a recorder, instead of its
 * chain of a dozen middleware functions per request.
 */
function helmetHeaders(): { set: [string, string | number | readonly string[]][]; removed: string[] } {
  const set: [string, string | number | readonly string[]][] = [];
  const removed: string[] = [];
  const recorder = {
    setHeader(name: string, value: string | number | readonly string[]) {
      set.push([name, value]);
    },
    removeHeader(name: string) {
      removed.push(name);
    },
  };
  let finished = false;
  helmet({ contentSecurityPolicy: false })(
    {} as Parameters<ReturnType<typeof helmet>>[0],
    recorder as unknown as Parameters<ReturnType<typeof helmet>>[1],
    (err?: unknown) => {
      if (err) throw err;
      finished = true;
    },
  );
  if (!finished || set.length === 0) throw new Error('helmet did not finish synchronously against the recorder');
  return { set, removed };
}

function isEventStreamType(value: unknown): boolean {
  return typeof value === 'string' && value.toLowerCase().startsWith('text/event-stream');
}

/** Whether a writeHead call (or the headers set before it) makes this response an event stream. */
function isEventStream(res: Response, args: unknown[]): boolean {
  if (isEventStreamType(res.getHeader('content-type'))) return true;
  for (const arg of args) {
    if (Array.isArray(arg)) {
      for (let i = 0; i < arg.length; i++) {
        const item = arg[i] as unknown;
        if (Array.isArray(item) && String(item[0]).toLowerCase() === 'content-type' && isEventStreamType(item[1]))
          return true;
        if (typeof item === 'string' && item.toLowerCase() === 'content-type' && isEventStreamType(arg[i + 1]))
          return true;
      }
    } else if (arg && typeof arg === 'object') {
      for (const [name, value] of Object.entries(arg)) {
        if (name.toLowerCase() === 'content-type' && isEventStreamType(value)) return true;
      }
    }
  }
  return false;
}

export interface RequestObservabilityOptions {
  metrics: Metrics | null;
  streams: OpenStreams;
  /** The route pattern of a request, for labels and span names. */
  routeOf: (req: Request) => string;
  isGraphQL: (path: string) => boolean;
}

/**
 * One span per request (continuing the caller's trace when it sends `traceparent`), and the
 * request counter and duration histogram, labelled by route pattern, when the response is done.
 */
export function requestObservability(opts: RequestObservabilityOptions) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = performance.now();
    const tracing = tracingActive();
    const parent = tracing ? extractContext(req.headers) : undefined;
    const span = tracing
      ? tracer().startSpan(
          `${req.method}`,
          {
            kind: SpanKind.SERVER,
            attributes: {
              'http.request.method': req.method,
              'url.path': req.path,
              'client.address': req.ip ?? '',
              'user_agent.original': req.get('user-agent') ?? '',
            },
          },
          parent,
        )
      : undefined;
    // The functions made per request are anonymous (an argument or a member, not a named
    // constant): Parley runs through tsx, whose esbuild transform keeps names, and it would name
    // each one with Object.defineProperty on every request.
    const writeHead = res.writeHead as (...args: unknown[]) => Response;
    res.writeHead = function (this: Response, ...args: unknown[]) {
      const result = writeHead.apply(this, args);
      if (isEventStream(res, args)) opts.streams.add(opts.isGraphQL(req.path) ? 'graphql' : 'rest', res);
      return result;
    } as Response['writeHead'];
    // A response emits 'close' once it is done, finished or not (after 'finish' when it finished).
    if (opts.metrics || span)
      res.once('close', () => {
        const route = opts.routeOf(req);
        const status = res.headersSent ? res.statusCode : 499;
        const labels = { method: req.method, route, status: String(status) };
        opts.metrics?.httpRequests.inc(labels);
        opts.metrics?.httpDuration.observe(labels, (performance.now() - started) / 1000);
        if (!span) return;
        span.updateName(`${req.method} ${route}`);
        span.setAttributes({ 'http.route': route, 'http.response.status_code': status });
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      });
    // Without tracing there is no span to make current: no context switch for every request.
    if (span && parent) otelContext.with(trace.setSpan(parent, span), next);
    else next();
  };
}

/** GET /metrics in the Prometheus text format, behind METRICS_TOKEN when it is set. */
export function metricsHandler(metrics: Metrics, token: string | undefined) {
  return async (req: Request, res: Response) => {
    if (token) {
      const header = req.get('authorization')?.trim() ?? '';
      const sent = header.replace(/^bearer\s+/i, '');
      if (!sent || !constantTimeEqual(sent, token)) {
        res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
        sendError(res, 401, 'UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.');
        return;
      }
    }
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.end(await metrics.registry.metrics());
  };
}
