import type { IncomingHttpHeaders } from 'node:http';
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import { type DocumentNode, type ExecutionResult, type GraphQLError, Kind, parse, validate } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import type { z } from 'zod';
import type { Context } from '../graphql/context';
import type { ParleyYoga } from '../graphql/yoga';
import { AppError, type ErrorDetail, issuesToDetails, summarizeDetails } from '../lib/errors';
import type { Logger } from '../lib/logger';
import { sendError } from './errors';
import { readMultipart } from './multipart';
import { foldBracketLists } from './params';
import { openSseStream, type SseFraming, type SseMessage } from './sse';

/** A REST request after its path, query and body passed their schemas. */
export interface RestRequest<Params = Record<string, string>, Query = Record<string, unknown>, Body = unknown> {
  params: Params;
  query: Query;
  body: Body;
  headers: IncomingHttpHeaders;
}

/**
 * One REST route, as data: it runs one GraphQL operation through the Yoga pipeline. The route's
 * own schemas check what REST adds (path and query strings, "no other members allowed" in a
 * body) so that REST clients get REST-shaped errors; the GraphQL layer validates again.
 */
export interface OperationRoute {
  /** Absent or 'operation': a query or mutation answered with JSON. */
  kind?: 'operation';
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Express path, e.g. /v1/transcript/:transcriptID */
  path: string;
  /** One-line description for docs/rest.md. */
  summary: string;
  /**
   * A GraphQL document with one operation, or with several named ones and `operationName` to
   * pick one per request (an upload route runs the file or the URL mutation).
   */
  operation: string;
  // biome-ignore lint/suspicious/noExplicitAny: each route's own schemas give the request its type.
  operationName?: (req: RestRequest<any, any, any>) => string;
  params?: z.ZodType;
  query?: z.ZodType;
  /** Schema of the JSON body; absent when the route takes none. */
  body?: z.ZodType;
  /** Accept a request without a body (the schema then sees `{}`). */
  bodyOptional?: boolean;
  /**
   * Accept multipart/form-data as well: the parts are read by a streaming parser (one file, at
   * most the router's `maxUploadBytes`) and `{fields, file}` (src/rest/multipart.ts) must pass
   * this schema, whose output becomes the request's body.
   */
  multipart?: { body: z.ZodType };
  // biome-ignore lint/suspicious/noExplicitAny: each route's own schemas give these their types.
  variables: (req: RestRequest<any, any, any>) => Record<string, unknown>;
  /** Maps the operation's data (and, for options such as `encode`, the request) to the response body; absent for 204. */
  // biome-ignore lint/suspicious/noExplicitAny: the operation's data shape is the document's.
  result?: (data: any, req: RestRequest<any, any, any>) => unknown;
  status: 200 | 201 | 204;
}

/**
 * A streaming route: runs a GraphQL subscription through the same Yoga pipeline and writes each
 * result as a server-sent event, framed by `framing` (src/rest/sse.ts). Anything refused before
 * the subscription starts is an ordinary JSON error; a failure after the stream started is the
 * framing's failure event and then its `end`, so the client always sees `end`.
 */
export interface StreamRoute extends Omit<OperationRoute, 'kind' | 'result' | 'status'> {
  kind: 'stream';
  framing: SseFraming;
  /** Maps one subscription result's data to the event to send (null sends nothing). */
  // biome-ignore lint/suspicious/noExplicitAny: the subscription's data shape is the document's.
  message: (data: any) => SseMessage | null;
}

export type RestRoute = OperationRoute | StreamRoute;

export interface RestRouterOptions {
  yoga: ParleyYoga;
  routes: readonly RestRoute[];
  logger: Logger;
  /** Interval of the SSE keep-alive comment (default 15 s). */
  sseKeepAliveMs?: number;
  /** Largest file of a multipart route (default 10 MB). */
  maxUploadBytes?: number;
  /** Largest JSON body (default 1 MB). */
  bodyLimitBytes?: number;
  /**
   * A reader for the JSON bodies it can take as `express.json` would take them (the HTTP edge's
   * `readDeclaredJson`, src/http/read-body.ts): answers `false` for a request it leaves to
   * body-parser, else calls `done` with the parsed body or body-parser's error. Without it, every
   * body goes through body-parser.
   */
  readJsonBody?: (
    req: Request,
    limit: number,
    types: string[],
    done: (err: Error | null, value?: unknown) => void,
  ) => boolean;
}

interface PreparedRoute {
  route: RestRoute;
  document: DocumentNode;
  operationName?: string;
}

function prepare(route: RestRoute, yoga: ParleyYoga): PreparedRoute {
  const document = parse(route.operation);
  const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  if (operations.length !== 1 && !route.operationName) {
    throw new Error(`${route.method} ${route.path}: the document must hold one operation, or the route pick one`);
  }
  const { schema } = yoga.getEnveloped({});
  const errors = validate(schema, document);
  if (errors.length) {
    throw new Error(`${route.method} ${route.path}: invalid operation: ${errors.map((e) => e.message).join('; ')}`);
  }
  const op = operations.length === 1 ? operations[0] : undefined;
  return { route, document, operationName: op && 'name' in op ? op.name?.value : undefined };
}

/** Validates every route's operation against the schema; throws naming the first bad route. */
export function validateRoutes(routes: readonly RestRoute[], yoga: ParleyYoga): void {
  for (const route of routes) prepare(route, yoga);
}

function headersOf(req: Request): Headers {
  const headers = new Headers();
  for (const name of ['authorization', 'x-request-id', 'user-agent', 'x-forwarded-for']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers.set(name, value);
  }
  return headers;
}

type ParseOutcome = { ok: true; value: unknown } | { ok: false; details: ErrorDetail[] };

function parseWith(schema: z.ZodType | undefined, value: unknown): ParseOutcome {
  if (!schema) return { ok: true, value };
  const parsed = schema.safeParse(value);
  return parsed.success
    ? { ok: true, value: parsed.data }
    : { ok: false, details: issuesToDetails(parsed.error.issues) };
}

function firstError(result: ExecutionResult): GraphQLError | undefined {
  return result.errors?.[0];
}

/** The REST error for a GraphQL error (its code and status come from the error shaping plugin). */
function sendGraphQLError(res: Response, error: GraphQLError, requestId: string): void {
  const http = (error.extensions?.http ?? {}) as { status?: number; headers?: Record<string, string> };
  const status = http.status ?? 500;
  sendError(res, status, String(error.extensions?.code ?? 'INTERNAL_ERROR'), error.message, {
    details: error.extensions?.details as ErrorDetail[] | undefined,
    headers: http.headers,
    requestId,
  });
}

/**
 * Runs a stream route's subscription and writes its results as SSE. The subscription keeps
 * running its turn when the client goes away (the iterator is only told to stop reading).
 */
async function runStream(
  opts: RestRouterOptions,
  prepared: PreparedRoute & { route: StreamRoute },
  pipeline: Pipeline,
  res: Response,
  variables: Record<string, unknown>,
  requestId: string,
): Promise<void> {
  const { enveloped, contextValue } = pipeline;
  const { subscribe, schema } = enveloped;
  const result = await subscribe({
    schema,
    document: prepared.document,
    variableValues: variables,
    contextValue,
    operationName: prepared.operationName,
  });
  if (!isAsyncIterable(result)) {
    const error = firstError(result as ExecutionResult);
    if (error) sendGraphQLError(res, error, requestId);
    else
      sendError(res, 500, 'INTERNAL_ERROR', `Unexpected error. Quote request ID ${requestId} when reporting it.`, {
        requestId,
      });
    return;
  }
  const { framing } = prepared.route;
  const stream = openSseStream(res, framing, { keepAliveMs: opts.sseKeepAliveMs ?? 15_000 });
  const iterator = (result as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
  res.on('close', () => {
    if (stream.disconnected) iterator.return?.().catch(() => {});
  });
  try {
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      const error = firstError(next.value);
      if (error) {
        for (const message of framing.failure(error.message)) stream.send(message);
        break;
      }
      const message = prepared.route.message(next.value.data);
      if (message) stream.send(message);
      if (stream.ended) break;
    }
  } catch (err) {
    opts.logger.error({ err, requestId, route: `${prepared.route.method} ${prepared.route.path}` }, 'stream failed');
    for (const message of framing.failure(`Unexpected error. Quote request ID ${requestId} when reporting it.`)) {
      stream.send(message);
    }
  } finally {
    stream.close();
    iterator.return?.().catch(() => {});
  }
}

/** One request's Yoga envelope and its context (built first: it authenticates the caller). */
interface Pipeline {
  enveloped: ReturnType<ParleyYoga['getEnveloped']>;
  contextValue: Context;
}

async function openPipeline(yoga: ParleyYoga, route: RestRoute, req: Request): Promise<Pipeline> {
  // restRoute marks the operation as a REST route's (RestOperationMarker: rate-limited at the HTTP edge, named in spans).
  const enveloped = yoga.getEnveloped({
    request: { headers: headersOf(req) },
    restRoute: `${route.method} ${route.path}`,
  } as never);
  const contextValue = (await enveloped.contextFactory()) as unknown as Context;
  return { enveloped, contextValue };
}

/** Runs a prepared operation through the Yoga pipeline: auth, validation, masking, plugins. */
async function run(
  pipeline: Pipeline,
  prepared: PreparedRoute,
  variables: Record<string, unknown>,
): Promise<ExecutionResult> {
  const { contextValue, enveloped } = pipeline;
  const { execute, schema } = enveloped;
  return (await execute({
    schema,
    document: prepared.document,
    variableValues: variables,
    contextValue,
    operationName: prepared.operationName,
  })) as ExecutionResult;
}

/**
 * The variables as a JSON client would send them: a member whose value is undefined is left out.
 * graphql-js treats such a member as absent, graphql-jit (GRAPHQL_JIT) as null; over HTTP it can
 * only be absent, so REST's in-process variables say so for both. Plain objects and arrays only
 * (an uploaded file stays as it is).
 */
function withoutUndefined<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => withoutUndefined(v)) as T;
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    // Object.keys and an indexed loop, not Object.entries: no [key, value] array per member (the
    // same members in the same order; a batch of 1,000 usage events is 7,000 of them).
    const out: Record<string, unknown> = {};
    const keys = Object.keys(value);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i] as string;
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = withoutUndefined(v);
    }
    return out as T;
  }
  return value;
}

function isJsonRequest(req: Request): boolean {
  return req.is('application/json') === 'application/json' || Boolean(req.is('+json'));
}

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** An Express router serving `routes` through `yoga`. */
export function createRestRouter(opts: RestRouterOptions): Router {
  const router = express.Router();
  const bodyLimit = opts.bodyLimitBytes ?? 1024 * 1024;
  const jsonTypes = ['application/json', 'application/*+json'];
  const jsonParser = express.json({ limit: bodyLimit, type: jsonTypes });
  // The body is read once the caller is known to hold a key, so an anonymous request learns
  // nothing about it, not even whether it parses (DECISIONS.md §3: authentication before validation).
  // A UTF-8 JSON body of declared length within the limit is read and parsed as body-parser would
  // (`readJsonBody`) without its per-request machinery; anything else goes to body-parser.
  const readJson = (req: Request, res: Response) =>
    new Promise<unknown>((resolve) => {
      const declared = opts.readJsonBody?.(req, bodyLimit, jsonTypes, (err, value) => {
        if (!err) req.body = value;
        resolve(err ?? undefined);
      });
      if (!declared) jsonParser(req, res, (err?: unknown) => resolve(err));
    });
  for (const route of opts.routes) {
    const prepared = prepare(route, opts.yoga);
    const handler = async (req: Request, res: Response, next: NextFunction) => {
      const requestId = String(req.headers['x-request-id']);
      try {
        const pipeline = await openPipeline(opts.yoga, route, req);
        const { principal } = pipeline.contextValue;
        if (principal.kind === 'anonymous') {
          sendError(res, 401, 'UNAUTHENTICATED', principal.reason);
          return;
        }
        const bodyError = await readJson(req, res);
        if (bodyError) {
          next(bodyError);
          return;
        }
        const params = parseWith(route.params, req.params);
        if (!params.ok) {
          sendError(res, 400, 'VALIDATION_FAILED', summarizeDetails(params.details), { details: params.details });
          return;
        }
        const query = parseWith(route.query, foldBracketLists({ ...(req.query as Record<string, unknown>) }));
        if (!query.ok) {
          sendError(res, 400, 'VALIDATION_FAILED', summarizeDetails(query.details), { details: query.details });
          return;
        }
        let body: unknown;
        if (route.multipart && req.is('multipart/form-data')) {
          const form = await readMultipart(req, { maxFileBytes: opts.maxUploadBytes ?? 10 * 1024 * 1024 });
          const parsedForm = parseWith(route.multipart.body, form);
          if (!parsedForm.ok) {
            sendError(res, 400, 'VALIDATION_FAILED', summarizeDetails(parsedForm.details), {
              details: parsedForm.details,
            });
            return;
          }
          body = parsedForm.value;
        } else if (route.body) {
          if (!hasBody(req)) {
            if (!route.bodyOptional) {
              sendError(res, 400, 'VALIDATION_FAILED', 'This endpoint needs a JSON request body.');
              return;
            }
            body = {};
          } else if (!isJsonRequest(req)) {
            sendError(
              res,
              415,
              'UNSUPPORTED_MEDIA_TYPE',
              route.multipart
                ? 'Send the request body as multipart/form-data or application/json.'
                : 'Send the request body as application/json.',
            );
            return;
          } else {
            body = req.body;
          }
          const parsedBody = parseWith(route.body, body);
          if (!parsedBody.ok) {
            sendError(res, 400, 'VALIDATION_FAILED', summarizeDetails(parsedBody.details), {
              details: parsedBody.details,
            });
            return;
          }
          body = parsedBody.value;
        }
        const restRequest = { params: params.value, query: query.value, body, headers: req.headers };
        const variables = withoutUndefined(route.variables(restRequest));
        if (route.kind === 'stream') {
          await runStream(
            opts,
            prepared as PreparedRoute & { route: StreamRoute },
            pipeline,
            res,
            variables,
            requestId,
          );
          return;
        }
        const operationName = route.operationName?.(restRequest) ?? prepared.operationName;
        const result = await run(pipeline, { ...prepared, operationName }, variables);
        const error = firstError(result);
        if (error) {
          sendGraphQLError(res, error, requestId);
          return;
        }
        if (route.status === 204 || !route.result) {
          res.status(route.status).end();
          return;
        }
        res.status(route.status).json(route.result(result.data, restRequest));
      } catch (err) {
        if (err instanceof AppError) {
          sendError(res, err.status, err.code, err.message, { details: err.details, headers: err.headers });
          return;
        }
        opts.logger.error({ err, requestId, route: `${route.method} ${route.path}` }, 'REST route failed');
        sendError(res, 500, 'INTERNAL_ERROR', `Unexpected error. Quote request ID ${requestId} when reporting it.`, {
          requestId,
        });
      }
    };
    const method = route.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    router[method](route.path, handler as RequestHandler);
  }
  return router;
}
