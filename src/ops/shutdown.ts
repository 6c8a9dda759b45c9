/**
 * Ends a stream of results when `signal` (the instance's shutdown signal, `Ops.shutdownSignal`)
 * aborts: the consumer sees the stream complete normally (for a GraphQL subscription, Yoga then
 * sends graphql-sse's `complete` and closes the response), and the source is told to stop (its
 * `return`). src/graphql/plugins/end-subscriptions-on-shutdown.ts applies it to subscriptions.
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
