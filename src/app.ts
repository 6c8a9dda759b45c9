import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { requestIdFrom } from './graphql/context';
import { createGraphQLJsonHandler, fastPathBlockers, isPlainJsonOperation } from './graphql/json-fast-path';
import { createParleyYoga, type ParleyYoga } from './graphql/yoga';
import { consoleRouter } from './http/console';
import { edgeRateLimit, useEdgeMiddleware } from './http/edge';
import { graphiqlAssetsHandler } from './http/graphiql';
import { readDeclaredBody, readDeclaredJson } from './http/read-body';
import { createWebChatRouter } from './http/web-chat';
import { fieldGroupsOf } from './ops/route-groups';
import { createRestRouter } from './rest/adapter';
import { sendError } from './rest/errors';
import { routes } from './rest/routes';
import type { AppServices } from './services';

/** A widget request is an action and a little config: 16 KB is ample. */
const webChatBodyLimitBytes = 16 * 1024;

export interface ParleyApp {
  app: express.Express;
  yoga: ParleyYoga;
  /** Readiness turns false (for load balancers) once shutdown begins. */
  setDraining(): void;
}

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  /** For entity.too.large: the limit that was passed. */
  limit?: number;
}

/**
 * Builds the HTTP application: health checks, GraphQL (Yoga) and the REST adapter. Never listens.
 * This is the composition root: the one place that knows the REST route table, the GraphQL
 * pipeline and the HTTP edge together, and hands each what it needs of the others.
 */
export function buildApp(services: AppServices): ParleyApp {
  const { config, logger } = services;
  // An operation over /graphql spends from the budget of the REST route that runs the same fields.
  const yoga = createParleyYoga(services, {
    fieldGroups: fieldGroupsOf(routes),
    persistedDocuments: routes.map((route) => route.operation),
  });
  const app = express();
  let draining = false;

  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.set('trust proxy', config.TRUST_PROXY);

  // A JSON operation on POST /graphql runs the middleware every request passes through (below:
  // the edge's, the request ID) and then the GraphQL handler, in that order, without the router
  // (see `answerBeforeRouter`).
  const blocker = fastPathBlockers(yoga, { graphiql: config.GRAPHIQL });
  if (blocker) logger.warn({ reason: blocker }, 'GraphQL JSON fast path off');
  let graphqlJsonChain: RequestHandler[] = [];

  // Spans, metrics, CORS, security headers and GET /metrics (docs/operations.md).
  const edge = useEdgeMiddleware(app, services, { graphqlEndpoint: yoga.graphqlEndpoint, routes });

  // A request ID on every request and response; the caller's own when it sends a sane one.
  // The request log line is made only when the log level shows it (not at LOG_LEVEL=warn and above).
  const logRequests = logger.isLevelEnabled('info');
  const requestId = (req: Request, res: Response, next: NextFunction) => {
    const id = requestIdFrom(req.get('x-request-id'));
    req.headers['x-request-id'] = id;
    res.setHeader('x-request-id', id);
    if (!logRequests) {
      next();
      return;
    }
    const started = performance.now();
    res.on('finish', () => {
      logger.info(
        {
          requestId: id,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Math.round((performance.now() - started) * 10) / 10,
        },
        'request',
      );
    });
    next();
  };
  app.use(requestId);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    if (draining) {
      sendError(res, 503, 'SERVICE_UNAVAILABLE', 'Shutting down.');
      return;
    }
    try {
      const pending = await services.db.pendingMigrations();
      if (pending.length) {
        sendError(res, 503, 'SERVICE_UNAVAILABLE', `Database migrations pending: ${pending.join(', ')}`);
        return;
      }
      res.json({ status: 'ready', database: services.db.provider });
    } catch (err) {
      logger.warn({ err }, 'readiness check failed');
      sendError(res, 503, 'SERVICE_UNAVAILABLE', 'The database is not reachable.');
    }
  });

  // The console (web/): static files at / that talk to /graphql like any other client (docs/console.md).
  app.use(consoleRouter());
  // GraphiQL's files, from the installed package (src/http/graphiql.ts): static, not rate limited.
  if (config.GRAPHIQL) app.use(graphiqlAssetsHandler());

  app.use(edgeRateLimit(services, yoga.graphqlEndpoint));

  // GraphQL: the body is read here, counting bytes as they arrive, so the limit holds for chunked
  // bodies too (Content-Length alone can be left out); Yoga then uses the buffer as it is. A
  // multipart request (a knowledge-base file upload) may carry a file up to KB_MAX_FILE_BYTES.
  const readGraphQLBody = express.raw({ type: () => true, limit: config.BODY_LIMIT_BYTES });
  const readGraphQLUpload = express.raw({
    type: () => true,
    limit: config.KB_MAX_FILE_BYTES + config.BODY_LIMIT_BYTES,
  });
  // A JSON operation runs through Yoga's pipeline without the Fetch adaptation (src/graphql/json-fast-path.ts),
  // unless the pipeline has hooks that path would skip; everything else goes to Yoga's own handler.
  // Its body, when its length is declared and within the limit, is read without body-parser.
  const serveJson = createGraphQLJsonHandler(yoga, (req: Request, res: Response) => yoga(req, res));
  const graphqlJson = (req: Request, res: Response, next: NextFunction) => {
    // The callback is an anonymous argument: as a named constant, tsx (esbuild's kept names)
    // would name it with Object.defineProperty on every request.
    if (
      readDeclaredBody(req, config.BODY_LIMIT_BYTES, (err, body) => {
        if (err) {
          next(err);
          return;
        }
        req.body = body;
        void serveJson(req, res, body as Buffer, next);
      })
    )
      return;
    readGraphQLBody(req, res, (err?: unknown) => {
      if (err) {
        next(err);
        return;
      }
      if (Buffer.isBuffer(req.body)) void serveJson(req, res, req.body, next);
      else yoga(req, res);
    });
  };
  graphqlJsonChain = [...edge, requestId, graphqlJson];
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (req.path !== yoga.graphqlEndpoint && !req.path.startsWith(`${yoga.graphqlEndpoint}/`)) {
      next();
      return;
    }
    const read = req.is('multipart/form-data') ? readGraphQLUpload : readGraphQLBody;
    read(req, res, (err?: unknown) => {
      if (err) {
        next(err);
        return;
      }
      yoga(req, res);
    });
  });

  // The web chat widget's public routes: no key; admitted by the project's web chat settings.
  app.use(
    createWebChatRouter(
      { db: services.db, runtime: services.runtime, rateLimiter: services.ops.rateLimiter, logger },
      { bodyLimitBytes: Math.min(config.BODY_LIMIT_BYTES, webChatBodyLimitBytes) },
    ),
  );

  app.use(
    createRestRouter({
      yoga,
      routes,
      logger,
      sseKeepAliveMs: config.SSE_KEEPALIVE_MS,
      maxUploadBytes: config.KB_MAX_FILE_BYTES,
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
      readJsonBody: readDeclaredJson,
    }),
  );

  app.use((req: Request, res: Response) => {
    sendError(res, 404, 'NOT_FOUND', `No route for ${req.method} ${req.path}`);
  });

  const handleError = (err: BodyParserError, req: Request, res: Response, _next: NextFunction) => {
    switch (err.type) {
      case 'entity.too.large':
        sendError(
          res,
          413,
          'PAYLOAD_TOO_LARGE',
          `The request body is larger than ${err.limit ?? config.BODY_LIMIT_BYTES} bytes.`,
        );
        return;
      case 'entity.parse.failed':
        sendError(res, 400, 'MALFORMED_JSON', 'The request body is not valid JSON.');
        return;
      case 'encoding.unsupported':
      case 'charset.unsupported':
        sendError(res, 415, 'UNSUPPORTED_MEDIA_TYPE', err.message);
        return;
      case 'request.aborted':
        return;
    }
    const requestId = String(req.headers['x-request-id']);
    logger.error({ err, requestId }, 'unhandled error');
    sendError(res, 500, 'INTERNAL_ERROR', `Unexpected error. Quote request ID ${requestId} when reporting it.`, {
      requestId,
    });
  };
  app.use(handleError);

  if (!blocker) answerBeforeRouter(app, yoga.graphqlEndpoint, () => graphqlJsonChain, handleError, logger);

  return {
    app,
    yoga,
    setDraining: () => {
      draining = true;
    },
  };
}

/** The part of Express's application object `answerBeforeRouter` replaces (not in its types). */
interface ExpressHandle {
  handle(req: IncomingMessage, res: ServerResponse, callback?: (err?: unknown) => void): void;
  enabled(setting: string): boolean;
  request: object;
  response: object;
}

/**
 * Answers the GraphQL fast path's requests (`isPlainJsonOperation`) in `app.handle`, before
 * Express's router. For every request Express sets up the request and response objects (their
 * prototypes, the circular references, `res.locals`, `X-Powered-By` when enabled), then the router
 * matches the path against each layer, making its restore closures and parsing the URL for each;
 * for this request the only layer that would act is `chain` (the edge's middleware, the request
 * ID, the GraphQL handler). Here the request gets what Express and the router give it before
 * their first layer, then `chain` runs; an error goes to the application's error handler, where
 * the router would send it (no layer between is an error handler). Every other request, and a
 * request handed over with a callback (a mounted sub-app), is Express's.
 */
function answerBeforeRouter(
  app: express.Express,
  endpoint: string,
  chain: () => readonly RequestHandler[],
  handleError: (err: BodyParserError, req: Request, res: Response, next: NextFunction) => void,
  logger: AppServices['logger'],
): void {
  const expressApp = app as unknown as ExpressHandle;
  const expressHandle = expressApp.handle;
  expressApp.handle = function handle(this: ExpressHandle, rawReq, rawRes, callback) {
    if (callback || rawReq.method !== 'POST') {
      expressHandle.call(this, rawReq, rawRes, callback);
      return;
    }
    const req = rawReq as Request;
    const res = rawRes as Response;
    req.res = res;
    res.req = req;
    Object.setPrototypeOf(req, this.request);
    Object.setPrototypeOf(res, this.response);
    if (!isPlainJsonOperation(req, endpoint)) {
      expressHandle.call(this, rawReq, rawRes, callback);
      return;
    }
    if (!res.locals) res.locals = Object.create(null);
    if (this.enabled('x-powered-by')) res.setHeader('X-Powered-By', 'Express');
    // What the router sets before its first layer, which a handler may read (Yoga's fallback reads `originalUrl`).
    req.baseUrl = '';
    req.originalUrl = req.originalUrl || req.url;
    req.params = {};
    runChain(chain(), req, res, (err?: unknown) => {
      try {
        handleError(err as BodyParserError, req, res, () => {});
      } catch (thrown) {
        // What Express's final handler would do: a 500 when nothing was sent yet, otherwise the
        // response is already under way and the connection is cut.
        logger.error({ err: thrown }, 'unhandled error while answering an error');
        if (!res.headersSent) sendError(res, 500, 'INTERNAL_ERROR', 'Unexpected error.');
        else req.socket.destroy();
      }
    });
  };
}

/**
 * Runs `handlers` one after the other as the router would run them for a request they all match:
 * each calls `next()` to go on; an error (passed to `next`, thrown, or a rejected promise) goes to
 * `done` (the application's error handler). The last handler answers.
 */
function runChain(handlers: readonly RequestHandler[], req: Request, res: Response, done: NextFunction): void {
  // `next` is a member, not a named constant: tsx (esbuild's kept names) would name a constant's
  // function with Object.defineProperty on every request.
  const run = { index: 0, next: done };
  run.next = (err?: unknown) => {
    if (err) {
      done(err);
      return;
    }
    const handler = handlers[run.index++];
    if (!handler) {
      done(new Error('the GraphQL JSON chain ended without an answer'));
      return;
    }
    try {
      const returned = handler(req, res, run.next) as unknown;
      if (returned instanceof Promise) returned.catch(done);
    } catch (thrown) {
      done(thrown);
    }
  };
  run.next();
}
