import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A real HTTP server on an ephemeral loopback port that speaks OpenAI's chat-completions and
 * embeddings wire format, so provider tests exercise the real client, real SSE parsing and real
 * sockets. Each request takes the next scripted reply (`script(...)`); with none queued it answers
 * a default chat reply or deterministic embeddings. Everything it was asked is in `requests`.
 */

export interface ChatReply {
  type: 'chat';
  /** Content deltas, one SSE event each. Default: a short sentence in word pieces. */
  chunks?: string[];
  /** Default: prompt_tokens 10, completion_tokens = number of chunks. */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Default `stop`. */
  finishReason?: string;
  /** Wait before the response headers. */
  delayHeadersMs?: number;
  /** Wait before each content chunk. */
  chunkDelayMs?: number;
  /** After this many content chunks, send nothing more and leave the connection open. */
  hangAfterChunks?: number;
  /** After this many content chunks, destroy the socket mid-stream. */
  cutAfterChunks?: number;
  /** Raw `data:` payloads sent after this many content chunks (malformed JSON, error objects…). */
  inject?: { afterChunks: number; data: string[] };
  /** Never send `data: [DONE]`. */
  omitDone?: boolean;
  /** Never send the usage chunk, as servers without stream_options support do. */
  omitUsage?: boolean;
  /**
   * Tool calls after the content, streamed as OpenAI does: a first `tool_calls` delta with the
   * call's index, id, type and function name, then its `function.arguments` text in `argumentPieces`
   * pieces (default 3). The finish reason defaults to `tool_calls`.
   */
  toolCalls?: { id?: string; name: string; arguments: string; argumentPieces?: number }[];
  /** Send the calls' argument pieces interleaved (call 0 piece 1, call 1 piece 1, …), as the wire allows. */
  interleaveToolCalls?: boolean;
}

export interface ErrorReply {
  type: 'error';
  status: number;
  message?: string;
  code?: string | null;
  headers?: Record<string, string>;
  /** A body that is not OpenAI's error object. */
  rawBody?: string;
}

export interface EmbeddingsReply {
  type: 'embeddings';
  /** Default: deterministic vectors of `dimensions` from a hash of each text. */
  vectors?: number[][];
  dimensions?: number;
  /** Default: prompt_tokens = words in the inputs. Null: no usage member. */
  promptTokens?: number | null;
  /** List the items last to first (each keeps its `index`), as the API allows. */
  reversed?: boolean;
}

/** Accept the request and never answer (until the client leaves or the server closes). */
export interface HangReply {
  type: 'hang';
}

/** Destroy the socket before any response. */
export interface DropReply {
  type: 'drop';
}

export type ScriptedReply = ChatReply | ErrorReply | EmbeddingsReply | HangReply | DropReply;

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body. */
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON the tests inspect
  body: any;
  receivedAt: number;
  /** Resolves when the exchange ends; `completed` is false when the connection closed mid-response. */
  closed: Promise<{ completed: boolean }>;
}

export interface FakeOpenAiServer {
  /** Base URL with the /v1 path, as LLM_BASE_URL. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Queues replies, taken one per request in order. */
  script(...replies: ScriptedReply[]): void;
  /** Connections currently open (keep-alive ones included). */
  openConnections(): number;
  /** Resolves once no connection is open (rejects after timeoutMs as a failure guard). */
  waitForNoConnections(timeoutMs?: number): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

const DEFAULT_CHUNKS = ['Hello', ' from', ' the', ' fake', ' server.'];

export async function startFakeOpenAiServer(): Promise<FakeOpenAiServer> {
  const queue: ScriptedReply[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let noConnectionWaiters: (() => void)[] = [];
  let counter = 0;

  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      raw += chunk;
    });
    req.on('end', () => {
      let body: unknown = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = raw;
      }
      const closed = new Promise<{ completed: boolean }>((resolve) => {
        res.on('close', () => resolve({ completed: res.writableFinished }));
      });
      closed.catch(() => {});
      const path = (req.url ?? '').split('?')[0] ?? '';
      requests.push({ method: req.method ?? '', path, headers: req.headers, body, receivedAt: Date.now(), closed });
      const reply = queue.shift() ?? defaultReply(path);
      void respond(reply, path, body, res, req.socket).catch(() => res.destroy());
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) {
        const waiters = noConnectionWaiters;
        noConnectionWaiters = [];
        for (const w of waiters) w();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  function defaultReply(path: string): ScriptedReply {
    return path.endsWith('/embeddings') ? { type: 'embeddings' } : { type: 'chat' };
  }

  async function respond(
    reply: ScriptedReply,
    path: string,
    // biome-ignore lint/suspicious/noExplicitAny: the request's JSON body
    body: any,
    res: ServerResponse,
    socket: Socket,
  ): Promise<void> {
    switch (reply.type) {
      case 'drop':
        socket.destroy();
        return;
      case 'hang':
        return;
      case 'error': {
        const payload =
          reply.rawBody ??
          JSON.stringify({
            error: {
              message: reply.message ?? `fake error ${reply.status}`,
              type: reply.status === 429 ? 'rate_limit_exceeded' : 'server_error',
              param: null,
              code: reply.code ?? null,
            },
          });
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
        res.end(payload);
        return;
      }
      case 'embeddings': {
        if (!path.endsWith('/embeddings')) throw new Error(`embeddings reply scripted for ${path}`);
        const inputs: string[] = Array.isArray(body?.input) ? body.input : [String(body?.input ?? '')];
        const vectors = reply.vectors ?? inputs.map((t) => vectorOf(t, reply.dimensions ?? 8));
        const base64 = body?.encoding_format === 'base64';
        const data = vectors.map((v, index) => ({
          object: 'embedding',
          index,
          embedding: base64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v,
        }));
        if (reply.reversed) data.reverse();
        const promptTokens =
          reply.promptTokens === undefined
            ? inputs.reduce((n, t) => n + t.split(/\s+/).filter(Boolean).length, 0)
            : reply.promptTokens;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            data,
            model: body?.model,
            ...(promptTokens === null ? {} : { usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } }),
          }),
        );
        return;
      }
      case 'chat':
        return respondChat(reply, body, res, socket);
    }
  }

  // biome-ignore lint/suspicious/noExplicitAny: the request's JSON body
  async function respondChat(reply: ChatReply, body: any, res: ServerResponse, socket: Socket): Promise<void> {
    const chunks = reply.chunks ?? (reply.toolCalls?.length ? [] : DEFAULT_CHUNKS);
    const id = `chatcmpl-fake${++counter}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body?.model ?? 'unknown';
    const usage = reply.usage ?? { prompt_tokens: 10, completion_tokens: chunks.length };
    const usageObject = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
    const toolCalls = (reply.toolCalls ?? []).map((call, index) => ({
      ...call,
      index,
      id: call.id ?? `call_fake${counter}_${index}`,
      pieces: splitInto(call.arguments, call.argumentPieces ?? 3),
    }));
    const finishReason = reply.finishReason ?? (toolCalls.length ? 'tool_calls' : 'stop');
    if (reply.delayHeadersMs) await delay(reply.delayHeadersMs);
    if (res.destroyed) return;

    if (body?.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: chunks.join(''), refusal: null },
              logprobs: null,
              finish_reason: finishReason,
            },
          ],
          usage: usageObject,
        }),
      );
      return;
    }

    const includeUsage = body?.stream_options?.include_usage === true && !reply.omitUsage;
    // With include_usage, OpenAI puts `usage: null` in every chunk but the last.
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        system_fingerprint: 'fp_fake',
        choices,
        ...(includeUsage ? { usage: null } : {}),
        ...extra,
      })}\n\n`;
    // Each write resolves once flushed to the socket, so a scripted cut comes after the data.
    const write = (data: string) => new Promise<void>((resolve) => res.write(data, () => resolve()));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    await write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));

    for (let i = 0; i <= chunks.length; i++) {
      if (reply.inject && reply.inject.afterChunks === i) {
        for (const data of reply.inject.data) await write(`data: ${data}\n\n`);
      }
      if (reply.cutAfterChunks === i) {
        socket.destroy();
        return;
      }
      if (reply.hangAfterChunks === i) return;
      if (i === chunks.length) break;
      if (reply.chunkDelayMs) await delay(reply.chunkDelayMs);
      if (res.destroyed) return;
      await write(chunk([{ index: 0, delta: { content: chunks[i] }, logprobs: null, finish_reason: null }]));
    }
    const toolDelta = (tool_calls: unknown[]) =>
      write(chunk([{ index: 0, delta: { tool_calls }, logprobs: null, finish_reason: null }]));
    const argumentDelta = (call: (typeof toolCalls)[number], piece: string) =>
      toolDelta([{ index: call.index, function: { arguments: piece } }]);
    for (const call of toolCalls) {
      await toolDelta([
        { index: call.index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } },
      ]);
      if (!reply.interleaveToolCalls) for (const piece of call.pieces) await argumentDelta(call, piece);
    }
    if (reply.interleaveToolCalls) {
      const longest = Math.max(0, ...toolCalls.map((c) => c.pieces.length));
      for (let i = 0; i < longest; i++) {
        for (const call of toolCalls) if (call.pieces[i] !== undefined) await argumentDelta(call, call.pieces[i]!);
      }
    }
    res.write(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason }]));
    if (includeUsage) res.write(chunk([], { usage: usageObject }));
    if (!reply.omitDone) res.write('data: [DONE]\n\n');
    res.end();
  }

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    script(...replies) {
      queue.push(...replies);
    },
    openConnections: () => sockets.size,
    waitForNoConnections(timeoutMs = 10_000) {
      if (sockets.size === 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${sockets.size} connection(s) still open after ${timeoutMs} ms`)),
          timeoutMs,
        );
        noConnectionWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A deterministic unit-free vector for a text, so tests can compare embeddings across calls. */
export function vectorOf(text: string, dimensions: number): number[] {
  const digest = createHash('sha256').update(text).digest();
  return Array.from({ length: dimensions }, (_, i) => (digest[i % digest.length]! - 128) / 128);
}

/** `text` cut into `parts` pieces of about the same length (at least one piece). */
function splitInto(text: string, parts: number): string[] {
  if (!text) return [''];
  const size = Math.max(1, Math.ceil(text.length / Math.max(1, parts)));
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
