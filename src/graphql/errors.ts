import { GraphQLError } from 'graphql';
import { handleStreamOrSingleExecutionResult, isAsyncIterable, type Plugin, processRegularResult } from 'graphql-yoga';
import { AppError } from '../lib/errors';
import type { Context } from './context';

function withExtensions(error: GraphQLError, message: string, extensions: Record<string, unknown>): GraphQLError {
  return new GraphQLError(message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    extensions,
  });
}

export function appErrorExtensions(error: AppError): Record<string, unknown> {
  return {
    code: error.code,
    http: { status: error.status, ...(error.headers ? { headers: error.headers } : {}) },
    ...(error.details ? { details: error.details } : {}),
  };
}

/**
 * Gives every error of a result a code: expected errors (AppError) keep their message with
 * `extensions.code` and `extensions.http.status`; GraphQL's own errors about the request itself
 * (a variable of the wrong type) become VALIDATION_FAILED; anything else is logged with the
 * request ID and masked, and the client receives that request ID to quote.
 */
export function shapeError(error: GraphQLError, ctx: Pick<Context, 'requestId' | 'services'>): GraphQLError {
  const original = error.originalError;
  if (original instanceof AppError) {
    // Without a path the error is about the request itself (a variable that failed to coerce):
    // GraphQL's message names the variable and the position, so keep it.
    return withExtensions(error, error.path ? original.message : error.message, appErrorExtensions(original));
  }
  if (!error.path) {
    // A request-level error: a variable of the wrong type, or a scalar refusing a value.
    if (error.extensions?.code) return error;
    return withExtensions(error, error.message, { code: 'VALIDATION_FAILED', http: { status: 400 } });
  }
  if (original instanceof GraphQLError && original.extensions?.code) {
    return withExtensions(error, original.message, original.extensions);
  }
  ctx.services.logger.error(
    { err: original ?? error, requestId: ctx.requestId, path: error.path.join('.') },
    'unexpected error in a GraphQL operation',
  );
  return withExtensions(error, `Unexpected error. Quote request ID ${ctx.requestId} when reporting it.`, {
    code: 'INTERNAL_ERROR',
    requestId: ctx.requestId,
    http: { status: 500 },
  });
}

/** Applies `shapeError` to query, mutation and subscription results, before Yoga's masking. */
export function useErrorShaping(): Plugin<Context> {
  const shapeResults =
    (ctx: Context) => (payload: Parameters<Parameters<typeof handleStreamOrSingleExecutionResult>[1]>[0]) => {
      const { result, setResult } = payload;
      if (!result.errors?.length) return;
      setResult({ ...result, errors: result.errors.map((e) => shapeError(e, ctx)) });
    };
  return {
    onExecute({ args }) {
      const ctx = args.contextValue as Context;
      // A method, not an arrow in a property: tsx (esbuild's kept names) would name the arrow with
      // Object.defineProperty on every operation.
      return {
        onExecuteDone(payload) {
          return handleStreamOrSingleExecutionResult(payload, shapeResults(ctx));
        },
      };
    },
    onSubscribe({ args }) {
      const ctx = args.contextValue as Context;
      return {
        onSubscribeResult: (payload) => handleStreamOrSingleExecutionResult(payload, shapeResults(ctx)),
      };
    },
  };
}

/** Yoga's message for a POST body that is not JSON (its error then carries the parser's message). */
const yogaMalformedJson = 'POST body sent invalid JSON.';

/** Members of a Yoga error's extensions that describe Yoga's internals, not the client's request. */
const internalExtensions = new Set(['http', 'unexpected', 'originalError']);

/**
 * What a client learns of an error that Yoga raised before execution: a malformed body is named as
 * such (the same code as REST's), never with the JSON parser's own message.
 */
function publicError(json: { message: string; extensions?: Record<string, unknown> }): {
  message: string;
  extensions: Record<string, unknown>;
} {
  const source = json.extensions ?? {};
  const extensions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(source)) if (!internalExtensions.has(name)) extensions[name] = value;
  const http = source.http as { status?: number; headers?: Record<string, string> } | undefined;
  if (http?.status) extensions.http = { status: http.status, ...(http.headers ? { headers: http.headers } : {}) };
  if (json.message === yogaMalformedJson) {
    return { message: 'The request body is not valid JSON.', extensions: { ...extensions, code: 'MALFORMED_JSON' } };
  }
  return { message: json.message, extensions };
}

/** The JSON media type of a GraphQL response, per the request's Accept (GraphQL over HTTP). */
export function graphqlResponseMediaType(
  accept: string | null,
): 'application/json' | 'application/graphql-response+json' {
  const value = accept ?? '*/*';
  if (/(^|,)\s*(application\/json|application\/\*|\*\/\*)\s*(;|,|$)/i.test(value)) return 'application/json';
  if (/application\/graphql-response\+json/i.test(value)) return 'application/graphql-response+json';
  // Only text/event-stream (a refused subscription) or something unknown: plain JSON, which every client reads.
  return 'application/json';
}

/**
 * Yoga uses `extensions.http` to set the response status, then removes it from the JSON body.
 * DECISIONS.md §3 promises it to GraphQL clients, whose errors in one response may have different
 * statuses: keep Yoga's status and headers, and serialise the errors with their `http` member.
 * Errors are always JSON (`application/json` or `application/graphql-response+json` per Accept),
 * including a subscription refused before its first event, which answers with its status (401, 404)
 * and a JSON body rather than an event stream, so SSE clients see why.
 */
export function useHttpStatusInErrorExtensions(): Plugin<Context> {
  return {
    onResultProcess({ request, result, resultProcessor, setResultProcessor }) {
      if (isAsyncIterable(result) || Array.isArray(result)) return;
      if (!result.errors?.length) return;
      // A refused subscription (no data at all) over SSE is answered as JSON; a result with data stays in its stream.
      if (resultProcessor !== processRegularResult && result.data != null) return;
      const mediaType = graphqlResponseMediaType(request.headers.get('accept'));
      // A refused subscription takes its errors' status (GraphQL over HTTP's rule for the newer
      // media type): an SSE client must see 4xx, never a 200 that is not an event stream.
      const statusRule = resultProcessor === processRegularResult ? mediaType : 'application/graphql-response+json';
      setResultProcessor((processed, fetchAPI) => {
        const response = processRegularResult(processed, fetchAPI, statusRule);
        const errors = (result.errors ?? []).map((e) => {
          const json = (typeof (e as GraphQLError).toJSON === 'function' ? (e as GraphQLError).toJSON() : e) as {
            message: string;
            extensions?: Record<string, unknown>;
          };
          return { ...json, ...publicError(json) };
        });
        const { http: _http, ...extensions } = (result.extensions ?? {}) as Record<string, unknown>;
        const body = JSON.stringify({
          errors,
          ...('data' in result ? { data: result.data } : {}),
          ...(Object.keys(extensions).length ? { extensions } : {}),
        });
        // A plain object of lower-case names: the fetch ponyfill's Headers keep the case they were
        // given, so copying them and setting content-type again would send it twice.
        const headers: Record<string, string> = {};
        response.headers.forEach((value, name) => {
          headers[name.toLowerCase()] = value;
        });
        delete headers['content-length'];
        headers['content-type'] = `${mediaType}; charset=utf-8`;
        return new fetchAPI.Response(body, { status: response.status, headers });
      }, mediaType);
    },
  };
}
