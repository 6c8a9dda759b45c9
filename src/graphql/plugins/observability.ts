import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type DocumentNode, type ExecutionResult, getOperationAST } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { Metrics } from '../../ops/prometheus';
import { tracer, tracingActive } from '../../ops/tracing';
import type { Context, RestOperationMarker } from '../context';

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function';
}

/**
 * Counts and times one execution. A function of the module, not a constant made per operation:
 * tsx (esbuild's kept names) names such a constant with Object.defineProperty each time.
 */
function recordExecution(
  metrics: Metrics,
  labels: { operation_name: string; operation_type: string },
  started: number,
  outcome: 'ok' | 'error',
): void {
  metrics.graphqlOperations.inc({ ...labels, outcome });
  metrics.graphqlDuration.observe(labels, (performance.now() - started) / 1000);
}

/**
 * A span and metrics per GraphQL operation (when metrics are on or spans are exported; otherwise
 * the plugin does nothing), whether it came over /graphql or through a REST route
 * (whose route the span names). Resolvers, and the database calls they make, run inside the span.
 */
export function useGraphQLObservability(metrics: Metrics | null): Plugin<Context> {
  const describe = (args: { document: DocumentNode; operationName?: string | null }) => {
    const operation = getOperationAST(args.document, args.operationName ?? undefined);
    const type = operation?.operation ?? 'unknown';
    const rawName = operation?.name?.value ?? 'anonymous';
    return { type, rawName, name: metrics ? metrics.operationName(rawName) : rawName };
  };
  const outcomeOf = (result: unknown) =>
    !isAsyncIterable(result) && (result as ExecutionResult | undefined)?.errors?.length ? 'error' : 'ok';

  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      // Nothing to record: leave execution as it is (no span, no timer, no wrapper).
      if (!metrics && !tracingActive()) return;
      const { type, rawName, name } = describe(args);
      const rest = (args.contextValue as Context & RestOperationMarker).restRoute;
      if (metrics && !tracingActive()) {
        // Metrics without spans: a timer and a counter, no span (even a no-op one) and no context switch.
        setExecuteFn((execArgs) => {
          const started = performance.now();
          const labels = { operation_name: name, operation_type: type };
          let result: ReturnType<typeof executeFn>;
          try {
            result = executeFn(execArgs);
          } catch (err) {
            recordExecution(metrics, labels, started, 'error');
            throw err;
          }
          if (!isPromiseLike(result)) {
            recordExecution(metrics, labels, started, outcomeOf(result));
            return result;
          }
          return Promise.resolve(result).then(
            (value) => {
              recordExecution(metrics, labels, started, outcomeOf(value));
              return value;
            },
            (err: unknown) => {
              recordExecution(metrics, labels, started, 'error');
              throw err;
            },
          );
        });
        return;
      }
      setExecuteFn((execArgs) => {
        const started = performance.now();
        return tracer().startActiveSpan(
          `graphql.${type} ${rawName}`,
          {
            kind: SpanKind.INTERNAL,
            attributes: {
              'graphql.operation.type': type,
              'graphql.operation.name': rawName,
              ...(rest ? { 'parley.rest.route': rest } : {}),
            },
          },
          context.active(),
          async (span) => {
            try {
              const result = await executeFn(execArgs);
              const outcome = outcomeOf(result);
              if (outcome === 'error') {
                const first = (result as ExecutionResult).errors?.[0];
                span.setAttribute('graphql.error.code', String(first?.extensions?.code ?? 'unknown'));
                span.setStatus({ code: SpanStatusCode.ERROR, message: first?.message.slice(0, 200) });
              }
              metrics?.graphqlOperations.inc({ operation_name: name, operation_type: type, outcome });
              return result;
            } catch (err) {
              metrics?.graphqlOperations.inc({ operation_name: name, operation_type: type, outcome: 'error' });
              span.setStatus({ code: SpanStatusCode.ERROR });
              throw err;
            } finally {
              metrics?.graphqlDuration.observe(
                { operation_name: name, operation_type: type },
                (performance.now() - started) / 1000,
              );
              span.end();
            }
          },
        );
      });
    },
    onSubscribe({ args, subscribeFn, setSubscribeFn }) {
      if (!metrics && !tracingActive()) return;
      const { type, rawName, name } = describe(args);
      if (metrics && !tracingActive()) {
        // Metrics without spans, as for execute: a timer and a counter, no no-op span and no context switch.
        setSubscribeFn(async (subArgs) => {
          const started = performance.now();
          try {
            const result = await subscribeFn(subArgs);
            metrics.graphqlOperations.inc({ operation_name: name, operation_type: type, outcome: outcomeOf(result) });
            return result;
          } finally {
            metrics.graphqlDuration.observe(
              { operation_name: name, operation_type: type },
              (performance.now() - started) / 1000,
            );
          }
        });
        return;
      }
      setSubscribeFn(async (subArgs) => {
        // The span covers the start of the subscription (auth, validation, the first await);
        // its results stream afterwards under their own spans (a runtime turn, its steps).
        const span = tracer().startSpan(`graphql.${type} ${rawName}`, {
          attributes: { 'graphql.operation.type': type, 'graphql.operation.name': rawName },
        });
        const started = performance.now();
        try {
          const result = await context.with(trace.setSpan(context.active(), span), () => subscribeFn(subArgs));
          metrics?.graphqlOperations.inc({ operation_name: name, operation_type: type, outcome: outcomeOf(result) });
          return result;
        } finally {
          metrics?.graphqlDuration.observe(
            { operation_name: name, operation_type: type },
            (performance.now() - started) / 1000,
          );
          span.end();
        }
      });
    },
  };
}
