import { randomUUID } from 'node:crypto';
import type { Response } from 'express';

/**
 * Server-sent events for the streams of SPEC.md. A framing says how a stream numbers its events,
 * whether it starts with a `retry:` line, and how it closes; the REST adapter feeds it one
 * message per subscription result. Every event is written (and so flushed: nothing buffers or
 * compresses these responses) the moment it is sent.
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

  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
  res.setHeader('Connection', 'keep-alive');
  res.socket?.setNoDelay(true);
  res.flushHeaders();

  const write = (text: string) => {
    if (finished || res.destroyed || res.writableEnded) return;
    res.write(text);
  };

  const keepAlive = setInterval(() => write(':\n\n'), opts.keepAliveMs);
  keepAlive.unref();

  res.on('close', () => {
    if (!res.writableFinished) disconnected = true;
    finished = true;
    clearInterval(keepAlive);
  });

  if (framing.retryMs !== undefined) write(`retry: ${framing.retryMs}\n\n`);

  const stream: SseStream = {
    send(message) {
      if (ended) return;
      const id = framing.ids === 'sequence' ? String(++sequence) : randomUUID();
      const data = message.data === undefined ? '' : `data: ${JSON.stringify(message.data)}\n`;
      write(`event: ${message.event}\nid: ${id}\n${data}\n`);
      if (message.event === framing.end.event) ended = true;
    },
    close() {
      if (!ended) stream.send(framing.end);
      clearInterval(keepAlive);
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
