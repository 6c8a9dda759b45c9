import { request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import {
  openSseStream,
  runtimeBetaFraming,
  runtimeV2Framing,
  type SseFraming,
  type SseStream,
} from '../../src/rest/sse';

/**
 * How src/rest/sse.ts writes to the socket: the events sent without waiting leave in one write,
 * headers included, and an event sent before the stream waits reaches the client before the wait
 * ends. Counted at the server's socket (each `_write`/`_writev` is one write to the kernel).
 */

interface Served {
  url: string;
  /** Socket writes of the one response, in order, with the text of each. */
  writes: string[];
  close(): Promise<void>;
}

function countWrites(socket: Socket, writes: string[]): void {
  const target = socket as unknown as {
    _write(chunk: Buffer | string, encoding: BufferEncoding, cb: () => void): void;
    _writev(chunks: { chunk: Buffer | string }[], cb: () => void): void;
  };
  const write = target._write.bind(socket);
  const writev = target._writev.bind(socket);
  target._write = (chunk, encoding, cb) => {
    writes.push(String(chunk));
    write(chunk, encoding, cb);
  };
  target._writev = (chunks, cb) => {
    writes.push(chunks.map((c) => String(c.chunk)).join(''));
    writev(chunks, cb);
  };
}

async function serve(framing: SseFraming, script: (stream: SseStream) => Promise<void>): Promise<Served> {
  const writes: string[] = [];
  const app = express();
  app.get('/stream', async (_req, res) => {
    countWrites(res.socket!, writes);
    const stream = openSseStream(res, framing, { keepAliveMs: 60_000 });
    await script(stream);
    stream.close();
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/stream`,
    writes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Reads the response, noting when each piece of text arrived. */
function read(url: string): Promise<{ status: number; pieces: { text: string; at: number }[] }> {
  return new Promise((resolve, reject) => {
    const req = request(url, (res) => {
      const pieces: { text: string; at: number }[] = [];
      res.setEncoding('utf8');
      res.on('data', (text: string) => pieces.push({ text, at: performance.now() }));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, pieces }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('SSE socket writes', () => {
  let served: Served | undefined;
  afterEach(async () => {
    await served?.close();
    served = undefined;
  });

  it('sends the headers and the events of one pass in one write, then the rest and the end in another', async () => {
    served = await serve(runtimeV2Framing, async (stream) => {
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'one' } } });
      await Promise.resolve();
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'two' } } });
      await sleep(20);
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'three' } } });
    });
    const { status, pieces } = await read(served.url);
    expect(status).toBe(200);
    const body = pieces.map((p) => p.text).join('');
    expect(body).toBe(
      'event: trace\nid: 1\ndata: {"type":"text","payload":{"message":"one"}}\n\n' +
        'event: trace\nid: 2\ndata: {"type":"text","payload":{"message":"two"}}\n\n' +
        'event: trace\nid: 3\ndata: {"type":"text","payload":{"message":"three"}}\n\n' +
        'event: end\nid: 4\n\n',
    );
    expect(served.writes).toHaveLength(2);
    expect(served.writes[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*content-type: text\/event-stream/i);
    expect(served.writes[0]).toContain('"message":"one"');
    expect(served.writes[0]).toContain('"message":"two"');
    expect(served.writes[0]).not.toContain('"message":"three"');
    expect(served.writes[1]).toContain('"message":"three"');
    expect(served.writes[1]).toContain('event: end\nid: 4\n\n');
    // The chunked body's last chunk leaves with the end event.
    expect(served.writes[1]).toMatch(/0\r\n\r\n$/);
  });

  it('hands the events of one pass to the chunked body as one chunk', async () => {
    served = await serve(runtimeV2Framing, async (stream) => {
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'one' } } });
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'two' } } });
      await sleep(20);
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'three' } } });
    });
    const { pieces } = await read(served.url);
    expect(pieces.map((p) => p.text).join('')).toContain('"message":"three"');
    const first =
      'event: trace\nid: 1\ndata: {"type":"text","payload":{"message":"one"}}\n\n' +
      'event: trace\nid: 2\ndata: {"type":"text","payload":{"message":"two"}}\n\n';
    const rest = 'event: trace\nid: 3\ndata: {"type":"text","payload":{"message":"three"}}\n\nevent: end\nid: 4\n\n';
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    expect(served.writes).toHaveLength(2);
    // After the headers, one chunk per pass (not a chunk per event), then the body's last chunk.
    expect(served.writes[0]?.slice(served.writes[0].indexOf('\r\n\r\n') + 4)).toBe(chunk(first));
    expect(served.writes[1]).toBe(`${chunk(rest)}0\r\n\r\n`);
  });

  it('gets an event sent before a wait to the client before the wait is over', async () => {
    let waitEnded = 0;
    served = await serve(runtimeV2Framing, async (stream) => {
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'early' } } });
      await sleep(150);
      waitEnded = performance.now();
      stream.send({ event: 'trace', data: { type: 'text', payload: { message: 'late' } } });
    });
    const { pieces } = await read(served.url);
    const early = pieces.find((p) => p.text.includes('"early"'));
    expect(early).toBeDefined();
    expect(early!.at).toBeLessThan(waitEnded);
    expect(pieces.find((p) => p.text.includes('"late"'))!.at).toBeGreaterThanOrEqual(waitEnded);
  });

  it('sends the headers alone when the first event waits, and keeps the beta framing', async () => {
    served = await serve(runtimeBetaFraming, async (stream) => {
      await sleep(20);
      stream.send({ event: 'trace', data: { type: 'trace', trace: { type: 'text' } } });
    });
    const { pieces } = await read(served.url);
    const body = pieces.map((p) => p.text).join('');
    expect(body).toMatch(
      /^retry: 3000\n\nevent: trace\nid: [0-9a-f-]{36}\ndata: \{"type":"trace","trace":\{"type":"text"\}\}\n\nevent: end\nid: [0-9a-f-]{36}\ndata: \{"type":"end"\}\n\n$/,
    );
    // Headers and the retry line in the first pass; the event and the end after the wait.
    expect(served.writes).toHaveLength(2);
    expect(served.writes[0]).toContain('retry: 3000');
    expect(served.writes[0]).not.toContain('event: trace');
  });
});
