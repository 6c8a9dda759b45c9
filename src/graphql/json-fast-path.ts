import type { Request, Response } from 'express';
import type { ExecutionResult } from 'graphql';
import { processRegularResult } from 'graphql-yoga';
import type { ParleyYoga } from './yoga';

/**
 * `POST /graphql` with a JSON body, served through Yoga's own pipeline without building Fetch
 * objects for the request.
 *
 * Yoga's Node adapter turns every request into a Fetch `Request` before its pipeline sees it: it
 * builds the full URL and parses it again (Express defines `req.query`), makes an
 * `AbortController` and three listeners on the response, wraps the body, and runs the server
 * adapter's `onRequest` hooks. For a JSON operation none of that is needed: the body is already a
 * buffer (src/app.ts reads it against the body limit), and the pipeline only reads the request's
 * method, headers and body. This handler runs the same steps as `YogaServer.handle`, in its
 * order, on a light view of the Node request:
 *
 * 1. `parseRequest`: every `onRequestParse` hook (the request parsers, the method check, the
 *    batching limit, introspection switched off when configured) and Yoga's JSON parser;
 * 2. `getResultForParams`: every `onParams` hook (parameter checks, persisted operations), the
 *    envelope (parse and validation caches, context, auth, rate limits, execution, error shaping
 *    and masking) and every `onExecutionResult` hook;
 * 3. `processResult`: every `onResultProcess` hook (the result processor that fits `Accept`, the
 *    HTTP status and headers of errors), whose Fetch `Response` is then written to the socket.
 *    When the processor chosen is Yoga's regular JSON one and the result has neither errors nor
 *    `extensions.http` (every successful operation), what it would answer is fixed: status 200,
 *    `Content-Type: <media type>; charset=utf-8`, the result as JSON. That answer is written
 *    directly, with the same status, headers and body bytes, without a Fetch `Response`, its
 *    `Headers` and the promise that reads its body back (`writeSuccess`).
 *
 * What it leaves out is what does nothing for such a request: the server adapter's `onRequest`
 * hooks answer other paths or methods (Yoga's health check and GraphiQL, its unhandled-route
 * check, which passes the GraphQL endpoint, and the graphql-sse endpoint), and there are no
 * `onResponse` hooks. `fastPathBlockers` checks both when the instance is built: the fast path
 * is off whenever the pipeline has hooks it would skip.
 *
 * Anything that raises before the operation runs (a body that is not JSON, a batch, parameters
 * Yoga refuses, an unknown persisted operation) is handed to Yoga's own handler, which answers
 * exactly as it always has: nothing has run yet, so running it there is safe and costs nothing
 * on the normal path. Requests that may be answered with a stream (`Accept` naming
 * `text/event-stream` or `multipart/mixed`), compressed bodies and other media types go to Yoga
 * directly.
 */

/** The YogaServer members this handler uses that Yoga's types keep private. */
interface YogaInternals {
  onResultProcessHooks: OnResultProcessHook[];
  instrumentation?: unknown;
  plugins: (PluginHooks | undefined | false | null)[];
}

interface PluginHooks {
  onRequest?: unknown;
  onResponse?: unknown;
}

type OnResultProcessHook = (payload: {
  request: globalThis.Request;
  acceptableMediaTypes: string[];
  result: unknown;
  setResult(result: unknown): void;
  resultProcessor: ResultProcessor | undefined;
  setResultProcessor(processor: ResultProcessor, mediaType: string): void;
  serverContext: Record<string, unknown>;
}) => unknown;

type ResultProcessor = (
  result: unknown,
  fetchAPI: ParleyYoga['fetchAPI'],
  acceptedMediaType: string,
) => globalThis.Response | Promise<globalThis.Response>;

/**
 * The `onRequest` hooks of the pipeline as built by src/graphql/yoga.ts: Yoga's health check,
 * GraphiQL (when on), its unhandled-route check, and the graphql-sse single connection endpoint.
 * None of them acts on `POST /graphql` with a JSON body. A plugin that adds one changes this
 * count: the fast path then turns itself off until the new hook has been looked at (a test pins it).
 */
export const knownRequestHooks = (graphiql: boolean) => (graphiql ? 4 : 3);

/** Why the fast path cannot serve this instance, or null when it can. */
export function fastPathBlockers(yoga: ParleyYoga, opts: { graphiql: boolean }): string | null {
  const internals = yoga as unknown as Partial<YogaInternals>;
  if (!Array.isArray(internals.onResultProcessHooks) || !Array.isArray(internals.plugins)) {
    return 'this graphql-yoga version does not expose its result-processing hooks';
  }
  if (internals.instrumentation) return 'a plugin instruments the pipeline';
  const plugins = internals.plugins.filter((p): p is PluginHooks => Boolean(p));
  if (plugins.some((p) => p.onResponse)) return 'a plugin has an onResponse hook';
  const requestHooks = plugins.filter((p) => p.onRequest).length;
  if (requestHooks !== knownRequestHooks(opts.graphiql)) {
    return `the pipeline has ${requestHooks} onRequest hooks, not the ${knownRequestHooks(opts.graphiql)} this path was checked against`;
  }
  return null;
}

/** The `Content-Type` values Yoga's JSON request parser takes (its `isPOSTJsonRequest`). */
function isJsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const first = value.split(',')[0] ?? '';
  return (
    first === 'application/json' ||
    first.startsWith('application/json;') ||
    first === 'application/graphql+json' ||
    first.startsWith('application/graphql+json;')
  );
}

/** Whether the request is one the fast path serves; decided from the request line and headers alone. */
export function isPlainJsonOperation(req: Request, endpoint: string): boolean {
  if (req.method !== 'POST' || req.path !== endpoint) return false;
  const headers = req.headers;
  if (!isJsonContentType(headers['content-type'])) return false;
  // Yoga's adapter would decompress such a body; it is rare enough to leave to it.
  const encoding = headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') return false;
  const accept = headers.accept;
  if (accept && /text\/event-stream|multipart\/mixed/i.test(accept)) return false;
  return true;
}

/**
 * The part of a Fetch `Request` the pipeline reads, over the Node request: method, URL, headers
 * (Yoga's own lazy `Headers` over the Node header object, as its adapter makes them) and the body
 * Express already read. The URL and the abort signal are made only if something asks for them.
 */
class NodeRequestView {
  readonly method: string;
  readonly headers: globalThis.Headers;
  private signalController: AbortController | undefined;

  constructor(
    private readonly req: Request,
    private readonly res: Response,
    private readonly raw: Buffer,
    HeadersClass: ParleyYoga['fetchAPI']['Headers'],
  ) {
    this.method = req.method;
    this.headers = new HeadersClass(req.headers as Record<string, string>);
  }

  get url(): string {
    return `${this.req.protocol}://${this.req.get('host') ?? 'localhost'}${this.req.originalUrl}`;
  }

  /** Aborted when the client goes away before the response is done, as the adapter's signal is. */
  get signal(): AbortSignal {
    if (!this.signalController) {
      const controller = new AbortController();
      this.signalController = controller;
      const abort = () => {
        if (!this.res.writableFinished) controller.abort();
      };
      this.res.once('close', abort);
    }
    return this.signalController.signal;
  }

  get body(): Buffer {
    return this.raw;
  }

  text(): Promise<string> {
    return Promise.resolve(this.raw.toString('utf8'));
  }

  /** As `Body.json()`: a body that is not JSON rejects, and Yoga's JSON parser turns that into its 400. */
  json(): Promise<unknown> {
    try {
      return Promise.resolve(JSON.parse(this.raw.toString('utf8')) as unknown);
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

/**
 * A successful result of Yoga's regular JSON processor, to be written without a Fetch `Response`:
 * the JSON text and the media type the processor was chosen for.
 */
interface DirectJson {
  direct: true;
  body: string;
  mediaType: string;
}

/**
 * Whether `processRegularResult` would answer `result` with status 200 and only its
 * `Content-Type`, the result's own JSON as the body: no errors (the only source of another status
 * or of headers, besides `extensions.http`) and no `extensions.http` (which Yoga strips from the
 * body and turns into a status and headers). Async iterables and batches are answered otherwise.
 */
function isPlainSuccess(result: unknown): result is ExecutionResult & { stringify?: (value: unknown) => string } {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return false;
  if (Symbol.asyncIterator in result) return false;
  const { errors, extensions } = result as ExecutionResult;
  return !errors?.length && !(extensions as { http?: unknown } | undefined)?.http;
}

/** Yoga's `processResult` (graphql-yoga/src/process-request.ts), which its package does not export. */
async function processResult(
  yoga: ParleyYoga,
  hooks: OnResultProcessHook[],
  request: globalThis.Request,
  initial: unknown,
  serverContext: Record<string, unknown>,
): Promise<globalThis.Response | DirectJson> {
  let result = initial;
  let resultProcessor: ResultProcessor | undefined;
  const acceptableMediaTypes: string[] = [];
  let acceptedMediaType = '*/*';
  for (const hook of hooks) {
    await hook({
      request,
      acceptableMediaTypes,
      result,
      setResult(next) {
        result = next;
      },
      resultProcessor,
      setResultProcessor(processor, mediaType) {
        resultProcessor = processor;
        acceptedMediaType = mediaType;
      },
      serverContext,
    });
  }
  if (!resultProcessor) {
    return new yoga.fetchAPI.Response(null, {
      status: 406,
      statusText: 'Not Acceptable',
      headers: { accept: acceptableMediaTypes.join('; charset=utf-8, ') },
    });
  }
  if ((resultProcessor as unknown) === processRegularResult && isPlainSuccess(result)) {
    // What `jsonStringifyResultWithoutInternals` does for a result without errors or `extensions.http`.
    const stringify = result.stringify ?? JSON.stringify;
    return { direct: true, body: stringify(result), mediaType: acceptedMediaType };
  }
  return resultProcessor(result, yoga.fetchAPI, acceptedMediaType);
}

/**
 * Writes what `send` writes for the `Response` of `processRegularResult` on a plain success: its
 * status (200, reason "OK", Node's default), its two headers with the names it gives them
 * (`Content-Type` as the processor spells it, `content-length` as the fetch ponyfill adds it),
 * then the body in the same single write.
 */
function writeSuccess(answer: DirectJson, res: Response): void {
  if (res.writableEnded || res.destroyed) return;
  res.statusCode = 200;
  res.setHeader('Content-Type', `${answer.mediaType}; charset=utf-8`);
  res.setHeader('content-length', Buffer.byteLength(answer.body));
  res.end(answer.body);
}

/**
 * Writes a (non-streamed) Fetch response: the status, every header, then the body. The body goes
 * as a string, so Node sends it in one write with the head (a buffer would take two).
 */
async function send(response: globalThis.Response, res: Response): Promise<void> {
  if (res.writableEnded || res.destroyed) return;
  const body = response.body == null ? null : await response.text();
  res.statusCode = response.status;
  if (response.statusText) res.statusMessage = response.statusText;
  response.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  if (body !== null) res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body ?? undefined);
}

export type GraphQLJsonHandler = (
  req: Request,
  res: Response,
  body: Buffer,
  onError: (err: unknown) => void,
) => Promise<void>;

/**
 * The fast path's handler. `fallback` is Yoga's own handler, for requests that fail before their
 * operation runs; an error after that (a result-processing hook that throws) goes to `onError`,
 * the application's error handler.
 */
export function createGraphQLJsonHandler(
  yoga: ParleyYoga,
  fallback: (req: Request, res: Response) => unknown,
): GraphQLJsonHandler {
  const internals = yoga as unknown as YogaInternals;
  const hooks = internals.onResultProcessHooks;
  // The server adapter is a Proxy that makes a new wrapper function on every property read: read
  // the members once.
  const parseRequest = yoga.parseRequest;
  const getResultForParams = yoga.getResultForParams;
  const waitUntil = yoga.waitUntil;
  const HeadersClass = yoga.fetchAPI.Headers;
  return async (req, res, body, onError) => {
    // The server context Yoga's Node adapter makes; Yoga adds `request` and `params` when the
    // operation starts, which is how a failure is known to have come before it.
    const serverContext: Record<string, unknown> = { req, res, waitUntil };
    const request = new NodeRequestView(req, res, body, HeadersClass) as unknown as globalThis.Request;
    let response: globalThis.Response | DirectJson;
    try {
      const parsed = await parseRequest(request, serverContext as never);
      if (parsed.response) {
        response = parsed.response;
      } else if (Array.isArray(parsed.requestParserResult)) {
        // A batch (refused while batching is off): Yoga answers it.
        fallback(req, res);
        return;
      } else {
        const result = await getResultForParams(
          { params: parsed.requestParserResult, request },
          serverContext as never,
        );
        response = await processResult(
          yoga,
          hooks,
          request,
          result as ExecutionResult | AsyncIterable<ExecutionResult>,
          serverContext,
        );
      }
    } catch (err) {
      if (!('params' in serverContext)) {
        fallback(req, res);
        return;
      }
      onError(err);
      return;
    }
    try {
      if ('direct' in response) writeSuccess(response, res);
      else await send(response, res);
    } catch (err) {
      onError(err);
    }
  };
}
