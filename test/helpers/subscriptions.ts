import { createClient } from 'graphql-sse';
import type { TestApp } from './app';

export interface SubscriptionRecorder<T = unknown> {
  /** Every result received so far, in order. */
  events: T[];
  /** Resolves once `predicate` holds for the events received (polling), or rejects after `timeoutMs`. */
  waitFor(predicate: (events: T[]) => boolean, timeoutMs?: number): Promise<T[]>;
  /**
   * Repeats `trigger` until the subscription has received something, so a test never races the
   * server's subscribe (graphql-sse's distinct-connections mode gives no "subscribed" signal).
   * Returns how many events had arrived, so later assertions can look past the probes.
   */
  prime(trigger: () => Promise<unknown>, timeoutMs?: number): Promise<number>;
  close(): void;
}

/** Subscribes over SSE with the graphql-sse client, in either of its modes. */
export function recordSubscription<T = unknown>(
  app: TestApp,
  opts: { query: string; variables?: Record<string, unknown>; key: string; singleConnection?: boolean },
): SubscriptionRecorder<T> {
  const client = createClient({
    url: `${app.url}${opts.singleConnection ? '/graphql/stream' : '/graphql'}`,
    singleConnection: opts.singleConnection ?? false,
    headers: { authorization: opts.key },
    retryAttempts: 0,
  });
  const events: T[] = [];
  let failure: unknown = null;
  const dispose = client.subscribe<T>(
    { query: opts.query, variables: opts.variables },
    {
      next: (value) => {
        events.push(value as T);
      },
      error: (err) => {
        failure = err;
      },
      complete: () => {},
    },
  );

  async function waitFor(predicate: (events: T[]) => boolean, timeoutMs = 10_000): Promise<T[]> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(events)) {
      if (failure) throw failure instanceof Error ? failure : new Error(JSON.stringify(failure));
      if (Date.now() > deadline)
        throw new Error(`subscription: condition not met in ${timeoutMs} ms; got ${JSON.stringify(events)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    return events;
  }

  return {
    events,
    waitFor,
    async prime(trigger, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (events.length === 0) {
        if (failure) throw failure instanceof Error ? failure : new Error(JSON.stringify(failure));
        if (Date.now() > deadline) throw new Error('subscription: nothing received while priming');
        await trigger();
        await waitFor((e) => e.length > 0, 250).catch(() => {});
      }
      return events.length;
    },
    close() {
      dispose();
      client.dispose();
    },
  };
}
