import type { ServerResponse } from 'node:http';
import type { Metrics } from './prometheus';

/** What opened a stream: a runtime turn over REST, or a GraphQL subscription. */
export type StreamKind = 'rest' | 'graphql';

interface OpenStream {
  kind: StreamKind;
  res: ServerResponse;
}

/**
 * The SSE responses open now on this instance: the `parley_sse_open_streams` gauge, and what the
 * server's shutdown waits for. The HTTP edge adds each event-stream response as its headers go out.
 */
export class OpenStreams {
  private readonly open = new Set<OpenStream>();

  constructor(private readonly metrics: Metrics | null) {}

  add(kind: StreamKind, res: ServerResponse): void {
    const entry = { kind, res };
    this.open.add(entry);
    this.metrics?.sseOpen.inc({ kind });
    res.once('close', () => {
      if (this.open.delete(entry)) this.metrics?.sseOpen.dec({ kind });
    });
  }

  count(kind?: StreamKind): number {
    return [...this.open].filter((s) => !kind || s.kind === kind).length;
  }
}
