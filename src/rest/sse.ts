import { randomUUID } from 'node:crypto';
import type { Response } from 'express';

/**
 * Server-sent events for the streams of SPEC.md. A framing says how a stream numbers its events,
 * whether it starts with a `retry:` line, and how it closes; the REST adapter feeds it one
 * message per subscription result. Nothing buffers or compresses these responses: the events sent
 * while the turn's code runs without waiting go out together in one socket write when it next
 * waits (see `openSseStream`), so an early message always reaches the client before a slow step.
 */

export interface SseMessage {
  event: string;
  /** Serialised as one `data:` line of JSON; absent for events without data (the v2 `end`). */
  data?: unknown;
}

export interface SseFraming {
  /** `sequence`: 1, 2, 3… per response; `uuid`: a random UUID per event. */
  ids: 'sequence' | 'uuid';
  /** Sent first as `retry: <ms>`. */
  retryMs?: number;
  /** The last event of every stream. */
  end: SseMessage;
  /** The event(s) telling the client that the operation failed after the stream started (then `end`). */
  failure(message: string): SseMessage[];
}

/** Runtime v2: ids 1..n, traces as they are, `end` with the next id and no data (DECISIONS.md §6). */
export const runtimeV2Framing: SseFraming = {
  ids: 'sequence',
  end: { event: 'end' },
  failure: (message) => [
    { event: 'trace', data: { type: 'debug', payload: { type: 'error', message }, time: Date.now() } },
  ],
};

/** Beta: UUID ids, a `retry:` line, traces wrapped as `{type: "trace", trace}`, `end` with `{type: "end"}`. */
export const runtimeBetaFraming: SseFraming = {
  ids: 'uuid',
  retryMs: 3000,
  end: { event: 'end', data: { type: 'end' } },
  failure: (message) => [
    { event: 'trace', data: { type: 'trace', trace: { type: 'debug', payload: { type: 'error', message } } } },
  ],
};

export interface SseStream {
  send(message: SseMessage): void;
  /** Sends the framing's `end` unless a message already was the end, then finishes the response. */
  close(): void;
  /** Whether the framing's `end` went out. */
  readonly ended: boolean;
  /** The client went away. */
  readonly disconnected: boolean;
}

/** Starts an SSE response: headers now, then a `:` comment line every `keepAliveMs`. */
export function openSseStream(res: Response, framing: SseFraming, opts: { keepAliveMs: number }): SseStream {
  let sequence = 0;
  let ended = false;
  let finished = false;
  let disconnected = false;
  /** Whether the socket is corked until the current run of synchronous work and microtasks ends. */
  let corked = false;
  /** The frames of the current pass, written to the response as one chunk when the pass ends. */
  let pending = '';

  // A turn of in-memory steps produces its events within one pass of the microtask queue, and
  // each write of its own is a system call (a writev, with no delay on the socket). The first write
  // of a pass corks the response and uncorks it in a nextTick scheduled from a microtask: Node runs
  // a tick scheduled there only once the microtask queue is empty (a tick scheduled directly from a
  // callback would run before that callback's promise continuations). So every event of the pass
  // leaves in one write, and nothing waits longer than until the turn first waits on I/O or a timer
  // (a slow step). The headers are the first write: they leave with the first events when those
  // come in the same pass, else alone. The pass's frames are joined and handed to the response
  // once, as one chunk of the chunked body (the bytes the client reads are the same): a
  // `res.write` per frame made three buffered socket writes each (size line, frame, CRLF).
  const flushPending = () => {
    if (pending === '') return;
    const text = pending;
    pending = '';
    if (!finished && !res.destroyed && !res.writableEnded) res.write(text);
  };
  const uncork = () => {
    flushPending();
    // Not when the response ended meanwhile: end() uncorked it, and a keep-alive socket may already
    // carry the next response, whose own cork this must not undo.
    if (!corked) return;
    corked = false;
    if (!res.destroyed) res.uncork();
  };
  const uncorkAfterMicrotasks = () => process.nextTick(uncork);
  const corkForThisPass = () => {
    if (corked) return;
    corked = true;
    res.cork();
    queueMicrotask(uncorkAfterMicrotasks);
  };
  const write = (text: string) => {
    if (finished || res.destroyed || res.writableEnded) return;
    corkForThisPass();
    pending += text;
  };

  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
  res.setHeader('Connection', 'keep-alive');
  res.socket?.setNoDelay(true);
  corkForThisPass();
  res.flushHeaders();

  const keepAlive = setInterval(() => write(':\n\n'), opts.keepAliveMs);
  keepAlive.unref();

  res.on('close', () => {
    if (!res.writableFinished) disconnected = true;
    finished = true;
    clearInterval(keepAlive);
  });

  if (framing.retryMs !== undefined) write(`retry: ${framing.retryMs}\n\n`);

  const sequential = framing.ids === 'sequence';
  const stream: SseStream = {
    send(message) {
      if (ended) return;
      const id = sequential ? ++sequence : randomUUID();
      write(
        message.data === undefined
          ? `event: ${message.event}\nid: ${id}\n\n`
          : `event: ${message.event}\nid: ${id}\ndata: ${JSON.stringify(message.data)}\n\n`,
      );
      if (message.event === framing.end.event) ended = true;
    },
    close() {
      if (!ended) stream.send(framing.end);
      clearInterval(keepAlive);
      // The pass's frames (the end among them) are still corked: end() uncorks fully, so they leave
      // with the end of the chunked body, in one go.
      flushPending();
      corked = false;
      if (!finished && !res.destroyed) res.end();
      finished = true;
    },
    get ended() {
      return ended;
    },
    get disconnected() {
      return disconnected;
    },
  };
  return stream;
}
