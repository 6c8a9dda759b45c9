/**
 * A one-consumer async queue: the turn pushes events as they happen, the subscription reads them.
 * The producer never waits for the consumer, so a slow or departed client cannot slow a turn
 * down; once the consumer leaves (`return()`), pushes are dropped.
 */
export interface EventQueue<T> extends AsyncIterable<T> {
  push(value: T): void;
  /** No more values: the consumer's iteration ends after the buffered ones. */
  close(): void;
  /** The consumer stopped reading (a client that disconnected). */
  readonly detached: boolean;
}

export function createEventQueue<T>(): EventQueue<T> {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let closed = false;
  let detached = false;

  const iterator: AsyncIterator<T> = {
    next() {
      if (buffer.length) return Promise.resolve({ value: buffer.shift()!, done: false });
      if (closed || detached) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    return() {
      detached = true;
      buffer.length = 0;
      const resolve = waiting;
      waiting = null;
      resolve?.({ value: undefined, done: true });
      return Promise.resolve({ value: undefined, done: true });
    },
  };

  return {
    push(value) {
      if (closed || detached) return;
      if (waiting) {
        const resolve = waiting;
        waiting = null;
        resolve({ value, done: false });
      } else buffer.push(value);
    },
    close() {
      closed = true;
      const resolve = waiting;
      waiting = null;
      resolve?.({ value: undefined, done: true });
    },
    get detached() {
      return detached;
    },
    [Symbol.asyncIterator]: () => iterator,
  };
}
