import type { ExecutionResult } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { Context } from '../graphql/context';
import type { RestOperationMarker } from './rate-limit';

/**
 * Ends a stream of results when `signal` aborts: the consumer sees the stream complete normally
 * (Yoga then sends graphql-sse's `complete` and closes the response), and the source is told to
 * stop (its `return`).
 */
export function endOnAbort<T>(source: AsyncIterable<T>, signal: AbortSignal): AsyncIterableIterator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let finished = false;
  const aborted = new Promise<IteratorResult<T>>((resolve) => {
    if (signal.aborted) resolve({ done: true, value: undefined });
    else signal.addEventListener('abort', () => resolve({ done: true, value: undefined }), { once: true });
  });
  const finish = async (): Promise<IteratorResult<T>> => {
    if (!finished) {
      finished = true;
      await iterator.return?.();
    }
    return { done: true, value: undefined };
  };
  return {
    async next() {
      if (finished) return { done: true, value: undefined };
      const next = await Promise.race([iterator.next(), aborted]);
      if (next.done) return finish();
      return next;
    },
    return: finish,
    async throw(err?: unknown) {
      await finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/**
 * At shutdown, GraphQL subscriptions (which never end by themselves) complete at once, so their
 * clients can reconnect to another instance. The runtime's REST streams are left alone: each is one
 * turn, which finishes and sends its own `end`.
 */
export function useEndSubscriptionsOnShutdown(signal: AbortSignal): Plugin<Context> {
  return {
    onSubscribe({ args }) {
      if ((args.contextValue as Context & RestOperationMarker).restRoute) return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (isAsyncIterable(result)) setResult(endOnAbort(result as AsyncIterable<ExecutionResult>, signal));
        },
      };
    },
  };
}
