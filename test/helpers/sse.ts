import { createParser, type EventSourceMessage } from 'eventsource-parser';

/**
 * Reads a server-sent event stream from a fetch Response with two parsers side by side:
 *
 * - eventsource-parser, the parser real clients use over fetch, which dispatches events the way
 *   the WHATWG algorithm does;
 * - a field-level reader of the same algorithm's line parsing that also keeps the frames the
 *   dispatch step drops: events without a `data` line. The runtime v2 stream ends with exactly
 *   such an event (`event: end`, an id, no data), which neither EventSource nor eventsource-parser
 *   dispatches, so the tests need this reader to see it.
 *
 * Every frame carrying data must also have been dispatched by eventsource-parser, identically;
 * `readSse` checks that, so the two cannot drift apart.
 */

export interface SseFrame {
  event: string | undefined;
  id: string | undefined;
  /** Undefined when the frame had no data line. */
  data: string | undefined;
  /** performance.now() when the frame was complete. */
  receivedAt: number;
}

export interface SseReading {
  frames: SseFrame[];
  /** What eventsource-parser dispatched. */
  dispatched: EventSourceMessage[];
  comments: string[];
  retries: number[];
}

export interface SseReaderOptions {
  /** Called as each frame completes (before the stream ends). */
  onFrame?: (frame: SseFrame) => void;
  onComment?: (comment: string) => void;
  /** Stop reading (and cancel the body) once this returns true. */
  until?: (frame: SseFrame) => boolean;
}

function createFrameReader(onFrame: (frame: SseFrame) => void, onComment: (text: string) => void) {
  let pending = '';
  let event: string | undefined;
  let id: string | undefined;
  let data: string[] = [];
  let sawField = false;
  const line = (text: string) => {
    if (text === '') {
      if (sawField)
        onFrame({ event, id, data: data.length ? data.join('\n') : undefined, receivedAt: performance.now() });
      event = undefined;
      id = undefined;
      data = [];
      sawField = false;
      return;
    }
    if (text.startsWith(':')) {
      onComment(text.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
    else if (field === 'retry') return;
    sawField = true;
  };
  return (chunk: string) => {
    pending += chunk;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(pending);
      // A lone \r at the end may be the first half of \r\n.
      if (!match || (match[0] === '\r' && match.index === pending.length - 1)) break;
      line(pending.slice(0, match.index));
      pending = pending.slice(match.index + match[0].length);
    }
  };
}

export async function readSse(response: Response, opts: SseReaderOptions = {}): Promise<SseReading> {
  const reading: SseReading = { frames: [], dispatched: [], comments: [], retries: [] };
  const parser = createParser({
    onEvent: (message) => reading.dispatched.push(message),
    onRetry: (ms) => reading.retries.push(ms),
  });
  let stop = false;
  const frames = createFrameReader(
    (frame) => {
      reading.frames.push(frame);
      opts.onFrame?.(frame);
      if (opts.until?.(frame)) stop = true;
    },
    (comment) => {
      reading.comments.push(comment);
      opts.onComment?.(comment);
    },
  );
  if (!response.body) throw new Error('the response has no body');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  while (!stop) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    parser.feed(text);
    frames(text);
  }
  if (stop) await reader.cancel().catch(() => {});
  const withData = reading.frames.filter((f) => f.data !== undefined);
  const dispatched = reading.dispatched.slice(0, withData.length);
  for (const [i, frame] of withData.entries()) {
    const message = dispatched[i];
    if (!message || message.data !== frame.data || message.event !== frame.event || message.id !== frame.id) {
      throw new Error(`the two SSE parsers disagree on frame ${i}: ${JSON.stringify({ frame, message })}`);
    }
  }
  return reading;
}

/** The JSON data of the frames named `event` (default all with data). */
export function dataOf<T = Record<string, unknown>>(reading: SseReading, event?: string): T[] {
  return reading.frames
    .filter((f) => f.data !== undefined && (event === undefined || f.event === event))
    .map((f) => JSON.parse(f.data!) as T);
}
