import { type DocumentNode, type ExecutionResult, type GraphQLError, getOperationAST } from 'graphql';
import { createHandler } from 'graphql-sse/lib/use/fetch';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { Context } from './context';

type SseResponse = [body: string, init: { status: number; statusText: string; headers: Record<string, string> }];

/** A refused operation as a JSON response: the status its errors carry (401, 404, …) and the errors. */
function refusal(
  errors: readonly GraphQLError[] | readonly { message: string }[],
  fallbackStatus: number,
): SseResponse {
  const list = errors.map((e) => ('toJSON' in e && typeof e.toJSON === 'function' ? e.toJSON() : e)) as {
    message: string;
    extensions?: Record<string, unknown>;
  }[];
  const status = list
    .map((e) => (e.extensions?.http as { status?: number } | undefined)?.status)
    .find((s): s is number => typeof s === 'number' && s >= 400);
  const chosen = status ?? fallbackStatus;
  return [
    JSON.stringify({ errors: list }),
    {
      status: chosen,
      statusText: chosen === 401 ? 'Unauthorized' : chosen === 404 ? 'Not Found' : 'Bad Request',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    },
  ];
}

/**
 * The graphql-sse protocol's single connection mode, served at `endpoint` through the same Yoga
 * pipeline (parse, validate, context, subscribe with every plugin). It differs from
 * `@graphql-yoga/plugin-graphql-sse` in one way: an operation refused before its first event (no
 * key, a project the key does not reach, a document that does not validate) is answered with that
 * error's status and its GraphQL errors as JSON. That plugin hands graphql-sse an error result
 * without `data`, which graphql-sse does not recognise as a result and reports as "Unable to
 * detect operation AST", hiding why.
 */
export function useGraphQLSSESingleConnection(opts: { endpoint: string }): Plugin<Context> {
  const serverContextOf = new WeakMap<Request, Record<string, unknown>>();
  let handler: ((request: Request) => Promise<Response>) | undefined;
  return {
    onYogaInit({ yoga }) {
      handler = createHandler(
        {
          async onSubscribe(req, params) {
            const enveloped = yoga.getEnveloped({
              ...serverContextOf.get(req.raw),
              request: req.raw,
              params,
            } as never);
            let document: DocumentNode;
            try {
              document = enveloped.parse(params.query);
            } catch (err) {
              return refusal(
                [{ message: err instanceof Error ? err.message : 'The query is not valid GraphQL.' }],
                400,
              );
            }
            const errors = enveloped.validate(enveloped.schema, document);
            if (errors.length > 0) return refusal(errors, 400);
            const contextValue = await enveloped.contextFactory();
            const args = {
              schema: enveloped.schema,
              document,
              contextValue,
              variableValues: params.variables,
              operationName: params.operationName,
            };
            const operation = getOperationAST(document, params.operationName);
            const result = (await (operation?.operation === 'subscription'
              ? enveloped.subscribe(args)
              : enveloped.execute(args))) as ExecutionResult | AsyncIterable<ExecutionResult>;
            if (!isAsyncIterable(result) && result.errors?.length && result.data == null) {
              return refusal(result.errors, 400);
            }
            return result as ExecutionResult | AsyncGenerator<ExecutionResult>;
          },
        },
        yoga.fetchAPI,
      ) as (request: Request) => Promise<Response>;
    },
    onRequest({ request, endResponse, serverContext }) {
      const [path] = request.url.split('?');
      if (!path?.endsWith(opts.endpoint) || !handler) return;
      serverContextOf.set(request, serverContext as Record<string, unknown>);
      return handler(request).then(endResponse);
    },
  };
}
