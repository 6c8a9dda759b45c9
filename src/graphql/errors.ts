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
      return {
        onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, shapeResults(ctx)),
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

/**
 * Yoga uses `extensions.http` to set the response status, then removes it from the JSON body.
 * DECISIONS.md §3 promises it to GraphQL clients, whose errors in one response may have different
 * statuses: keep Yoga's status and headers, and serialise the errors with their `http` member.
 */
export function useHttpStatusInErrorExtensions(): Plugin<Context> {
  return {
    onResultProcess({ request, result, resultProcessor, setResultProcessor }) {
      if (resultProcessor !== processRegularResult || isAsyncIterable(result) || Array.isArray(result)) return;
      if (!result.errors?.length) return;
      // The media type Yoga picks: application/json whenever the client accepts it.
      const accept = request.headers.get('accept') ?? '*/*';
      const mediaType = /(^|,)\s*(application\/json|application\/\*|\*\/\*)\s*(;|,|$)/i.test(accept)
        ? 'application/json'
        : 'application/graphql-response+json';
      setResultProcessor((processed, fetchAPI) => {
        const response = processRegularResult(processed, fetchAPI, mediaType);
        const errors = (result.errors ?? []).map((e) => {
          const json = (typeof (e as GraphQLError).toJSON === 'function' ? (e as GraphQLError).toJSON() : e) as {
            extensions?: Record<string, unknown>;
          };
          const { unexpected: _unexpected, ...extensions } = json.extensions ?? {};
          return { ...json, extensions };
        });
        const { http: _http, ...extensions } = (result.extensions ?? {}) as Record<string, unknown>;
        const body = JSON.stringify({
          errors,
          ...('data' in result ? { data: result.data } : {}),
          ...(Object.keys(extensions).length ? { extensions } : {}),
        });
        const headers = new fetchAPI.Headers(response.headers);
        headers.delete('content-length');
        return new fetchAPI.Response(body, { status: response.status, headers });
      }, mediaType);
    },
  };
}
