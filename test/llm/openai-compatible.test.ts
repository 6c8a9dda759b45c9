import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type ChatRequest,
  type ChatStreamEvent,
  createOpenAiCompatibleProvider,
  isLlmError,
  LlmError,
  type LlmProvider,
  type OpenAiCompatibleOptions,
} from '../../src/llm';
import { type FakeOpenAiServer, startFakeOpenAiServer, vectorOf } from '../helpers/fake-openai-server';

const API_KEY = 'sk-test-SECRET-4f9c2b7e1d';
const PROMPT = 'The secret prompt about the Zanzibar account';
const messages: ChatRequest['messages'] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: PROMPT },
];

let fake: FakeOpenAiServer;
const providers: LlmProvider[] = [];
/** Waits the providers asked for between attempts (the real wait still happens, shortened). */
let waits: number[] = [];

function provider(overrides: Partial<OpenAiCompatibleOptions> = {}): LlmProvider {
  const p = createOpenAiCompatibleProvider({
    baseUrl: fake.baseUrl,
    apiKey: API_KEY,
    defaultModel: 'gpt-4o-mini',
    embeddingModel: 'text-embedding-3-small',
    prices: { 'gpt-4o-mini': { input: 0.15, output: 0.6 }, 'text-embedding-3-small': { input: 0.02, output: 0 } },
    timeoutMs: 10_000,
    maxRetries: 2,
    maxRetryWaitMs: 30_000,
    // Record the wait the provider chose, and wait a token 1 ms so tests stay quick.
    sleep: async (ms) => {
      waits.push(ms);
      await new Promise((r) => setTimeout(r, 1));
    },
    ...overrides,
  });
  providers.push(p);
  return p;
}

async function collect(
  stream: AsyncIterable<ChatStreamEvent>,
): Promise<{ deltas: string[]; events: ChatStreamEvent[] }> {
  const events: ChatStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  return { deltas: events.flatMap((e) => (e.type === 'delta' ? [e.text] : [])), events };
}

async function failureOf(promise: Promise<unknown>): Promise<LlmError> {
  try {
    await promise;
  } catch (err) {
    if (isLlmError(err)) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

beforeAll(async () => {
  fake = await startFakeOpenAiServer();
});
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  fake.reset();
  waits = [];
});
afterAll(async () => {
  await fake.close();
});

describe('OpenAI-compatible provider: streaming', () => {
  it('streams the deltas in order, then one end event with the usage the server reported', async () => {
    fake.script({
      type: 'chat',
      chunks: ['The', ' quick', ' brown', ' fox'],
      usage: { prompt_tokens: 21, completion_tokens: 4 },
    });
    const { deltas, events } = await collect(provider().stream({ messages }));

    expect(deltas).toEqual(['The', ' quick', ' brown', ' fox']);
    expect(events.map((e) => e.type)).toEqual(['delta', 'delta', 'delta', 'delta', 'end']);
    const end = events.at(-1);
    if (end?.type !== 'end') throw new Error('no end event');
    expect(end.result.text).toBe('The quick brown fox');
    expect(end.result.finishReason).toBe('stop');
    expect(end.result.usage).toEqual({ inputTokens: 21, outputTokens: 4 });
    expect(end.result.accounting).toMatchObject({
      provider: 'openai-compatible',
      model: 'gpt-4o-mini',
      inputTokens: 21,
      outputTokens: 4,
      usageSource: 'provider',
      attempts: 1,
    });
    // (21 × 0.15 + 4 × 0.6) / 1e6
    expect(end.result.accounting.cost).toBeCloseTo(0.00000555, 12);
    expect(end.result.accounting.timeToFirstTokenMs).not.toBeNull();
    expect(end.result.accounting.latencyMs).toBeGreaterThanOrEqual(end.result.accounting.timeToFirstTokenMs ?? 0);
  });

  it('sends the OpenAI request: model, messages, options, stream_options.include_usage, bearer key', async () => {
    await provider().complete({
      messages,
      model: 'gpt-4o',
      temperature: 0.2,
      maxTokens: 50,
      responseFormat: 'json_object',
    });
    const [request] = fake.requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe('/v1/chat/completions');
    expect(request?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request?.body).toEqual({
      model: 'gpt-4o',
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      max_tokens: 50,
      response_format: { type: 'json_object' },
    });
  });

  it('leaves out what the caller did not set, and sends max_completion_tokens when so configured', async () => {
    await provider({ maxTokensField: 'max_completion_tokens' }).complete({ messages, maxTokens: 7 });
    await provider().complete({ messages });
    expect(fake.requests[0]?.body).toMatchObject({ model: 'gpt-4o-mini', max_completion_tokens: 7 });
    expect(fake.requests[0]?.body).not.toHaveProperty('max_tokens');
    expect(fake.requests[1]?.body).not.toHaveProperty('temperature');
    expect(fake.requests[1]?.body).not.toHaveProperty('max_tokens');
    expect(fake.requests[1]?.body).not.toHaveProperty('response_format');
  });

  it('sends no Authorization header without an API key (local servers)', async () => {
    await provider({ apiKey: undefined }).complete({ messages });
    expect(fake.requests[0]?.headers.authorization).toBeUndefined();
  });

  it('measures time to first token from the start of the call, waits included', async () => {
    fake.script({ type: 'chat', chunks: ['late', ' start'], delayHeadersMs: 300 });
    const result = await provider().complete({ messages });
    // Lower bounds only: a slow machine makes these longer, never shorter.
    expect(result.accounting.timeToFirstTokenMs).toBeGreaterThanOrEqual(290);
    expect(result.accounting.latencyMs).toBeGreaterThanOrEqual(result.accounting.timeToFirstTokenMs ?? Infinity);
  });

  it('complete() returns the whole text, finish reason and accounting', async () => {
    fake.script({ type: 'chat', chunks: ['{"ok"', ': true}'], finishReason: 'length' });
    const result = await provider().complete({ messages });
    expect(result.text).toBe('{"ok": true}');
    expect(result.finishReason).toBe('length');
    expect(result.accounting.model).toBe('gpt-4o-mini');
  });

  it('counts tokens with the tokenizer when the server sends no usage', async () => {
    fake.script({ type: 'chat', chunks: ['Hello', ' world'], omitUsage: true });
    const result = await provider().complete({ messages });
    expect(result.accounting.usageSource).toBe('tokenizer');
    expect(result.usage.outputTokens).toBe(2);
    expect(result.usage.inputTokens).toBeGreaterThan(10);
  });

  it('accepts a stream that ends without [DONE] once the model has finished', async () => {
    fake.script({ type: 'chat', chunks: ['Done', ' anyway'], omitDone: true });
    const result = await provider().complete({ messages });
    expect(result.text).toBe('Done anyway');
  });
});

describe('OpenAI-compatible provider: cancellation and timeouts', () => {
  it('closes the HTTP connection when the caller aborts mid-stream, and fails with kind aborted', async () => {
    fake.script({ type: 'chat', chunks: ['one', ' two', ' three', ' four'], hangAfterChunks: 2 });
    const controller = new AbortController();
    const p = provider();
    const deltas: string[] = [];
    const error = await failureOf(
      (async () => {
        for await (const e of p.stream({ messages, signal: controller.signal })) {
          if (e.type === 'delta') deltas.push(e.text);
          if (deltas.length === 2) controller.abort();
        }
      })(),
    );
    expect(deltas).toEqual(['one', ' two']);
    expect(error.kind).toBe('aborted');
    // The server sees its response cut short: the request was really cancelled, not left running.
    expect(await fake.requests[0]?.closed).toEqual({ completed: false });
    // Text had arrived: the error carries what it cost so far.
    expect(error.partialAccounting?.outputTokens).toBeGreaterThan(0);
    expect(fake.requests).toHaveLength(1);
  });

  it('closes the connection when the consumer breaks out of its loop', async () => {
    fake.script({ type: 'chat', chunks: ['a', ' b', ' c'], hangAfterChunks: 1 });
    for await (const e of provider().stream({ messages })) {
      if (e.type === 'delta') break;
    }
    expect(await fake.requests[0]?.closed).toEqual({ completed: false });
  });

  it('fails at once when the signal is already aborted, without a request', async () => {
    const error = await failureOf(provider().complete({ messages, signal: AbortSignal.abort() }));
    expect(error.kind).toBe('aborted');
    expect(fake.requests).toHaveLength(0);
  });

  it('times out when the server sends no headers', async () => {
    fake.script({ type: 'hang' });
    const error = await failureOf(provider().complete({ messages, timeoutMs: 200 }));
    expect(error.kind).toBe('timeout');
    expect(error.message).toContain('200 ms');
    expect(await fake.requests[0]?.closed).toEqual({ completed: false });
    // A timeout is not retried: a hung server would only hang again.
    expect(fake.requests).toHaveLength(1);
  });

  it('times out when the stream stalls between pieces', async () => {
    fake.script({ type: 'chat', chunks: ['first', ' second'], hangAfterChunks: 1 });
    const deltas: string[] = [];
    const error = await failureOf(
      (async () => {
        for await (const e of provider({ timeoutMs: 300 }).stream({ messages })) {
          if (e.type === 'delta') deltas.push(e.text);
        }
      })(),
    );
    expect(deltas).toEqual(['first']);
    expect(error.kind).toBe('timeout');
    expect(await fake.requests[0]?.closed).toEqual({ completed: false });
  });

  it('does not time out while pieces keep coming, even when the whole answer takes longer', async () => {
    // Six pieces 100 ms apart against a 400 ms timeout: the timeout is per wait, not per call.
    fake.script({ type: 'chat', chunks: ['1', '2', '3', '4', '5', '6'], chunkDelayMs: 100 });
    const result = await provider({ timeoutMs: 400 }).complete({ messages });
    expect(result.text).toBe('123456');
  });

  it('does not count a slow consumer against the timeout', async () => {
    fake.script({ type: 'chat', chunks: ['slow', ' reader'] });
    const deltas: string[] = [];
    for await (const e of provider({ timeoutMs: 1000 }).stream({ messages })) {
      if (e.type !== 'delta') continue;
      deltas.push(e.text);
      // The consumer takes longer than the timeout; the provider was not the one waiting.
      if (deltas.length === 1) await new Promise((r) => setTimeout(r, 2500));
    }
    expect(deltas).toEqual(['slow', ' reader']);
  });

  it('close() aborts calls in flight and leaves no connection open', async () => {
    fake.script({ type: 'chat' }, { type: 'chat', chunks: ['x', ' y'], hangAfterChunks: 1 });
    const p = provider();
    await p.complete({ messages });
    const iterator = p.stream({ messages })[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value).toEqual({ type: 'delta', text: 'x' });
    // Keep-alive connection of the first call, plus the hanging one.
    expect(fake.openConnections()).toBeGreaterThan(0);
    const pending = failureOf(iterator.next());
    await p.close();
    const error = await pending;
    expect(error.kind).toBe('aborted');
    // The guard is shorter than undici's 4 s keep-alive: idle sockets left to expire would fail it.
    await fake.waitForNoConnections(3000);
    expect(fake.openConnections()).toBe(0);
    const after = await failureOf(p.complete({ messages }));
    expect(after.kind).toBe('aborted');
  });
});

describe('OpenAI-compatible provider: retries', () => {
  it('retries a 429 after the wait its Retry-After asks for, then succeeds', async () => {
    fake.script({ type: 'error', status: 429, headers: { 'retry-after': '2' } }, { type: 'chat', chunks: ['ok'] });
    const result = await provider().complete({ messages });
    expect(result.text).toBe('ok');
    expect(fake.requests).toHaveLength(2);
    expect(waits).toEqual([2000]);
    expect(result.accounting.attempts).toBe(2);
    // The same request both times.
    expect(fake.requests[1]?.body).toEqual(fake.requests[0]?.body);
  });

  it('really waits for Retry-After with the default sleep', async () => {
    fake.script({ type: 'error', status: 429, headers: { 'retry-after': '1' } }, { type: 'chat', chunks: ['late'] });
    const result = await provider({ sleep: undefined }).complete({ messages });
    expect(result.text).toBe('late');
    const [first, second] = fake.requests;
    // A lower bound only: a slow machine makes the gap longer, never shorter.
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(990);
  });

  it('reads retry-after-ms and HTTP-date forms of Retry-After', async () => {
    const date = new Date(Date.now() + 5000).toUTCString();
    fake.script(
      { type: 'error', status: 429, headers: { 'retry-after-ms': '1500' } },
      { type: 'error', status: 503, headers: { 'retry-after': date } },
      { type: 'chat' },
    );
    await provider().complete({ messages });
    expect(waits[0]).toBe(1500);
    // An HTTP-date has one-second resolution: between 3 and 5 s from now.
    expect(waits[1]).toBeGreaterThan(3000);
    expect(waits[1]).toBeLessThanOrEqual(5000);
  });

  it('backs off exponentially on 500s without Retry-After', async () => {
    fake.script({ type: 'error', status: 500 }, { type: 'error', status: 502 }, { type: 'chat', chunks: ['up'] });
    const result = await provider({ retryBaseDelayMs: 400 }).complete({ messages });
    expect(result.text).toBe('up');
    expect(waits).toHaveLength(2);
    // 400 then 800, each less up to a quarter of jitter.
    expect(waits[0]).toBeGreaterThanOrEqual(300);
    expect(waits[0]).toBeLessThanOrEqual(400);
    expect(waits[1]).toBeGreaterThanOrEqual(600);
    expect(waits[1]).toBeLessThanOrEqual(800);
  });

  it('gives up after maxRetries with kind rate_limit and the last retry-after', async () => {
    fake.script(
      { type: 'error', status: 429, headers: { 'retry-after': '1' } },
      { type: 'error', status: 429, headers: { 'retry-after': '1' } },
      { type: 'error', status: 429, headers: { 'retry-after': '3' } },
    );
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('rate_limit');
    expect(error.retryAfterMs).toBe(3000);
    expect(error.status).toBe(429);
    expect(error.attempts).toBe(3);
    expect(fake.requests).toHaveLength(3);
  });

  it('does not wait for a Retry-After longer than maxRetryWaitMs: it fails at once', async () => {
    fake.script({ type: 'error', status: 429, headers: { 'retry-after': '120' } });
    const error = await failureOf(provider({ maxRetryWaitMs: 10_000 }).complete({ messages }));
    expect(error.kind).toBe('rate_limit');
    expect(error.retryAfterMs).toBe(120_000);
    expect(fake.requests).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it('does not retry an exhausted quota', async () => {
    fake.script({ type: 'error', status: 429, code: 'insufficient_quota', message: 'You exceeded your quota' });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('rate_limit');
    expect(error.providerCode).toBe('insufficient_quota');
    expect(fake.requests).toHaveLength(1);
  });

  it('retries a stream cut before its first token', async () => {
    fake.script({ type: 'chat', chunks: ['never'], cutAfterChunks: 0 }, { type: 'chat', chunks: ['second', ' try'] });
    const result = await provider().complete({ messages });
    expect(result.text).toBe('second try');
    expect(fake.requests).toHaveLength(2);
  });

  it('retries a refused or dropped connection, then reports provider_down', async () => {
    fake.script({ type: 'drop' }, { type: 'drop' }, { type: 'drop' });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('provider_down');
    expect(fake.requests).toHaveLength(3);
  });

  it('reports provider_down when nothing listens at the base URL', async () => {
    const closed = await startFakeOpenAiServer();
    const baseUrl = closed.baseUrl;
    await closed.close();
    const error = await failureOf(provider({ baseUrl, maxRetries: 1 }).complete({ messages }));
    expect(error.kind).toBe('provider_down');
    expect(error.message).toBe('Could not connect to the language model server');
    expect(error.attempts).toBe(2);
  });

  it('never retries once the first token has arrived: the cut stream fails with what came', async () => {
    fake.script({ type: 'chat', chunks: ['Hel', 'lo', ' there'], cutAfterChunks: 1 }, { type: 'chat' });
    const deltas: string[] = [];
    const error = await failureOf(
      (async () => {
        for await (const e of provider().stream({ messages })) if (e.type === 'delta') deltas.push(e.text);
      })(),
    );
    expect(deltas).toEqual(['Hel']);
    expect(error.kind).toBe('provider_down');
    expect(fake.requests).toHaveLength(1);
    expect(waits).toEqual([]);
    expect(error.partialAccounting).toMatchObject({ outputTokens: 1, usageSource: 'tokenizer' });
  });

  it('does not retry a 500 that arrives after the first token as an error event either', async () => {
    fake.script({
      type: 'chat',
      chunks: ['partial'],
      inject: { afterChunks: 1, data: [JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })] },
    });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('provider_down');
    expect(error.providerMessage).toBe('overloaded');
    expect(fake.requests).toHaveLength(1);
  });
});

describe('OpenAI-compatible provider: typed errors', () => {
  it('refuses an invalid request before any HTTP, naming the option', async () => {
    const p = provider();
    const cases: [ChatRequest, string][] = [
      [{ messages: [] }, 'messages must not be empty'],
      [{ messages, temperature: 3 }, 'temperature'],
      [{ messages, maxTokens: 0 }, 'maxTokens'],
      [{ messages, timeoutMs: 1.5 }, 'timeoutMs'],
      [{ messages: [{ role: 'function' as 'user', content: 'x' }] }, 'role'],
    ];
    for (const [request, named] of cases) {
      const error = await failureOf(p.complete(request));
      expect(error.kind).toBe('bad_request');
      expect(error.message).toContain(named);
    }
    expect(fake.requests).toHaveLength(0);
  });

  it('maps statuses to kinds and does not retry client errors', async () => {
    const cases = [
      [401, 'auth'],
      [403, 'auth'],
      [404, 'bad_model'],
      [400, 'bad_request'],
      [422, 'bad_request'],
    ] as const;
    for (const [status, kind] of cases) {
      fake.reset();
      fake.script({ type: 'error', status });
      const error = await failureOf(provider().complete({ messages }));
      expect({ status, kind: error.kind }).toEqual({ status, kind });
      expect(error.status).toBe(status);
      expect(fake.requests).toHaveLength(1);
    }
  });

  it('names the model in a bad_model error', async () => {
    fake.script({ type: 'error', status: 404, code: 'model_not_found', message: 'The model `nope` does not exist' });
    const error = await failureOf(provider().complete({ messages, model: 'nope' }));
    expect(error.kind).toBe('bad_model');
    expect(error.message).toContain('"nope"');
    expect(error.providerCode).toBe('model_not_found');
  });

  it('never puts the API key or the prompt in an error, even when the server echoes them', async () => {
    fake.script({
      type: 'error',
      status: 401,
      message: `Incorrect API key provided: ${API_KEY}. Your prompt was: ${PROMPT}`,
      code: 'invalid_api_key',
    });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('auth');
    for (const rendering of [error.message, String(error), JSON.stringify(error), inspect(error, { depth: 5 })]) {
      expect(rendering).not.toContain(API_KEY);
    }
    expect(error.message).not.toContain('Zanzibar');
    expect(error.providerMessage).toContain('[redacted]');
    expect(error.providerMessage).not.toContain(API_KEY);
  });

  it('reports a chunk that is not JSON as malformed_response', async () => {
    fake.script({ type: 'chat', chunks: ['fine', ' then'], inject: { afterChunks: 1, data: ['{"choices": [ oops'] } });
    const deltas: string[] = [];
    const error = await failureOf(
      (async () => {
        for await (const e of provider().stream({ messages })) if (e.type === 'delta') deltas.push(e.text);
      })(),
    );
    expect(deltas).toEqual(['fine']);
    expect(error.kind).toBe('malformed_response');
    expect(fake.requests).toHaveLength(1);
  });

  it('reports JSON of the wrong shape as malformed_response, without retrying', async () => {
    fake.script({ type: 'chat', inject: { afterChunks: 0, data: ['{"object": "chat.completion.chunk"}'] } });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('malformed_response');
    expect(error.message).toContain('choices');
    expect(fake.requests).toHaveLength(1);
  });

  it('reports content that is not text as malformed_response', async () => {
    fake.script({
      type: 'chat',
      inject: { afterChunks: 0, data: [JSON.stringify({ choices: [{ index: 0, delta: { content: 42 } }] })] },
    });
    const error = await failureOf(provider().complete({ messages }));
    expect(error.kind).toBe('malformed_response');
  });
});

describe('OpenAI-compatible provider: embeddings', () => {
  it('embeds texts in order, asks for floats, and accounts the tokens', async () => {
    const p = provider();
    expect(p.supportsEmbeddings).toBe(true);
    const texts = ['alpha beta', 'gamma', 'delta epsilon zeta'];
    const result = await p.embed({ texts });
    expect(result.vectors).toEqual(texts.map((t) => vectorOf(t, 8)));
    expect(result.dimensions).toBe(8);
    expect(result.model).toBe('text-embedding-3-small');
    expect(fake.requests[0]?.path).toBe('/v1/embeddings');
    expect(fake.requests[0]?.body).toEqual({ model: 'text-embedding-3-small', input: texts, encoding_format: 'float' });
    expect(result.accounting).toMatchObject({ inputTokens: 6, outputTokens: 0, usageSource: 'provider' });
    expect(result.accounting.cost).toBeCloseTo((6 * 0.02) / 1e6, 12);
  });

  it('splits large inputs into batches and keeps the order', async () => {
    const texts = Array.from({ length: 7 }, (_, i) => `text number ${i}`);
    const result = await provider({ embeddingBatchSize: 3 }).embed({ texts });
    expect(fake.requests.map((r) => r.body.input.length)).toEqual([3, 3, 1]);
    expect(result.vectors).toEqual(texts.map((t) => vectorOf(t, 8)));
    expect(result.accounting.inputTokens).toBe(21);
  });

  it('puts vectors back in input order when the server lists them out of order', async () => {
    fake.script({ type: 'embeddings', vectors: [[1], [2]], reversed: true });
    const result = await provider().embed({ texts: ['a', 'b'] });
    expect(result.vectors).toEqual([[1], [2]]);
  });

  it('retries a 503 on embeddings', async () => {
    fake.script({ type: 'error', status: 503 }, { type: 'embeddings' });
    const result = await provider().embed({ texts: ['x'] });
    expect(result.vectors).toHaveLength(1);
    expect(result.accounting.attempts).toBe(2);
  });

  it('rejects a response with the wrong number of vectors', async () => {
    fake.script({ type: 'embeddings', vectors: [[1, 2]] });
    const error = await failureOf(provider().embed({ texts: ['a', 'b'] }));
    expect(error.kind).toBe('malformed_response');
  });

  it('makes no request for no texts', async () => {
    const result = await provider().embed({ texts: [] });
    expect(result.vectors).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });

  it('says embeddings are off without an embedding model', async () => {
    const p = provider({ embeddingModel: undefined });
    expect(p.supportsEmbeddings).toBe(false);
    expect(p.info.embeddingModel).toBeNull();
    const error = await failureOf(p.embed({ texts: ['a'] }));
    expect(error.kind).toBe('unsupported');
    expect(fake.requests).toHaveLength(0);
  });
});

describe('OpenAI-compatible provider: info', () => {
  it('is a language model and shows its base URL without credentials', () => {
    const p = provider({ baseUrl: 'https://user:pass@llm.example.com/v1' });
    expect(p.isLanguageModel).toBe(true);
    expect(p.info).toEqual({
      provider: 'openai-compatible',
      isLanguageModel: true,
      defaultModel: 'gpt-4o-mini',
      embeddingModel: 'text-embedding-3-small',
      baseUrl: 'https://llm.example.com/v1',
    });
  });

  it('errors are LlmError instances', async () => {
    fake.script({ type: 'error', status: 400 });
    const error = await failureOf(provider().complete({ messages }));
    expect(error).toBeInstanceOf(LlmError);
    expect(error.name).toBe('LlmError');
  });
});
