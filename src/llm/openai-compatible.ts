import OpenAI from 'openai';
import type {
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { Agent, type RequestInit as UndiciRequestInit, fetch as undiciFetch } from 'undici';
import type { Logger } from '../lib/logger';
import { type CallControl, createCallControl, type StopReason } from './call-control';
import { LlmError, type LlmErrorKind } from './errors';
import { collectChatStream, meterChatStream, type ProviderChatEvent } from './metering';
import { createCostCalculator, type PriceTable } from './prices';
import { checkChatRequest, checkEmbedRequest } from './request-checks';
import { backoffDelayMs, isRetryableStatus, retryAfterMsFromHeaders, sleep as sleepFor } from './retry';
import { countTokens } from './tokens';
import type {
  ChatMessage,
  ChatRequest,
  ChatStreamEvent,
  EmbedRequest,
  EmbedResult,
  FinishReason,
  LlmProvider,
  LlmProviderInfo,
  TokenUsage,
  ToolCall,
} from './types';

export const OPENAI_COMPATIBLE = 'openai-compatible';

export interface OpenAiCompatibleOptions {
  /** Includes the API version path, e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …`; without it no Authorization header is sent (local servers). */
  apiKey?: string;
  defaultModel: string;
  /** Embeddings are off without it. */
  embeddingModel?: string;
  prices: PriceTable;
  /** See ChatRequest.timeoutMs. */
  timeoutMs: number;
  /** Further attempts after a 429, 5xx or a dropped connection, before the first token only. */
  maxRetries: number;
  /** A longer Retry-After is not waited for: the call fails at once with `rate_limit`. */
  maxRetryWaitMs: number;
  /** First backoff step when the provider gives no Retry-After (default 500 ms, doubling). */
  retryBaseDelayMs?: number;
  /** OpenAI's reasoning models take `max_completion_tokens`; most servers take `max_tokens`. */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
  /** Texts per embeddings request (default 64). */
  embeddingBatchSize?: number;
  logger?: Logger;
  /** How to wait between attempts; tests pass one that records the waits. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/**
 * A provider for any server that speaks OpenAI's chat-completions and embeddings API (OpenAI,
 * Azure-style gateways, vLLM, Ollama, LM Studio, llama.cpp's server…), through the official
 * `openai` client. The client parses the SSE stream and maps HTTP errors; retries, timeouts and
 * cancellation are ours, because the client's own retry neither stops at the first token nor
 * wakes up when the caller aborts, and its timeout ends once headers arrive.
 */
export function createOpenAiCompatibleProvider(options: OpenAiCompatibleOptions): LlmProvider {
  const logger = options.logger;
  const costs = createCostCalculator({ prices: options.prices, logger });
  const maxTokensField = options.maxTokensField ?? 'max_tokens';
  const retryBaseDelayMs = options.retryBaseDelayMs ?? 500;
  const embeddingBatchSize = options.embeddingBatchSize ?? 64;
  const waitFor = options.sleep ?? sleepFor;
  const apiKey = options.apiKey;

  // Our own connection pool, so close() can end its sockets; Node's global fetch pool cannot be
  // closed. Timeouts are ours (per call), so undici's own are off.
  const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  const fetchThroughAgent = ((input: string | URL | Request, init?: RequestInit) =>
    // undici's fetch and the DOM fetch the `openai` types name are the same API under two sets of
    // type declarations; the casts only bridge those declarations.
    undiciFetch(input as string | URL, {
      ...(init as UndiciRequestInit),
      dispatcher: agent,
    })) as unknown as typeof fetch;

  const client = new OpenAI({
    baseURL: options.baseUrl,
    // The client insists on a key; with none, the Authorization header is removed below.
    apiKey: apiKey ?? 'unused',
    defaultHeaders: apiKey ? undefined : { Authorization: null },
    // Explicit values, so the client never falls back to OPENAI_* variables of the environment.
    organization: null,
    project: null,
    webhookSecret: null,
    maxRetries: 0,
    timeout: options.timeoutMs,
    fetch: fetchThroughAgent,
    // Its logger would print raw stream chunks on a parse error; our errors say what happened.
    logLevel: 'off',
  });

  const closeController = new AbortController();
  let closed: Promise<void> | null = null;

  const info: LlmProviderInfo = {
    provider: OPENAI_COMPATIBLE,
    isLanguageModel: true,
    defaultModel: options.defaultModel,
    embeddingModel: options.embeddingModel ?? null,
    baseUrl: withoutCredentials(options.baseUrl),
  };

  const scrub = (text: string): string => {
    let out = text;
    if (apiKey) out = out.split(apiKey).join('[redacted]');
    out = out.replace(/Bearer\s+\S+/gi, 'Bearer [redacted]');
    return out.length > 300 ? `${out.slice(0, 300)}…` : out;
  };

  function stopError(reason: StopReason, model: string, timeoutMs: number): LlmError {
    if (reason === 'timeout') {
      return new LlmError('timeout', `No answer from the language model server within ${timeoutMs} ms`, {
        provider: OPENAI_COMPATIBLE,
        model,
      });
    }
    const message =
      reason === 'closed' ? 'The language model provider was closed' : 'The language model call was aborted';
    return new LlmError('aborted', message, { provider: OPENAI_COMPATIBLE, model });
  }

  /** Every failure becomes an LlmError whose message is ours (see LlmError). */
  function toLlmError(err: unknown, control: CallControl, model: string, timeoutMs: number): LlmError {
    if (control.stopReason) return stopError(control.stopReason, model, timeoutMs);
    if (err instanceof LlmError) return err;
    const base = { provider: OPENAI_COMPATIBLE, model };
    if (err instanceof OpenAI.APIConnectionTimeoutError) return stopError('timeout', model, timeoutMs);
    if (err instanceof OpenAI.APIUserAbortError) return stopError('aborted', model, timeoutMs);
    if (err instanceof OpenAI.APIConnectionError) {
      return new LlmError('provider_down', 'Could not connect to the language model server', base);
    }
    if (err instanceof OpenAI.APIError) {
      const status = typeof err.status === 'number' ? err.status : undefined;
      const body = err.error as { message?: unknown; code?: unknown } | undefined;
      const rawMessage = typeof body?.message === 'string' ? body.message : undefined;
      const details = {
        ...base,
        status,
        providerMessage: rawMessage ? scrub(rawMessage) : undefined,
        providerCode: typeof body?.code === 'string' ? scrub(body.code) : undefined,
        providerRequestId: err.requestID ?? undefined,
      };
      if (status === undefined) {
        // An `error` object inside the stream: the server failed while answering.
        return new LlmError('provider_down', 'The language model server reported an error while answering', details);
      }
      const kind = kindOfStatus(status);
      // Servers send Retry-After with 503 as well as 429 (RFC 9110 §10.2.3).
      const retryAfterMs = isRetryableStatus(status) ? retryAfterMsFromHeaders(err.headers) : undefined;
      return new LlmError(kind, messageOfStatus(kind, status, model), { ...details, retryAfterMs });
    }
    if (err instanceof SyntaxError) {
      return new LlmError('malformed_response', 'The language model server sent a chunk that is not valid JSON', base);
    }
    // undici ends a body whose connection dropped with `TypeError: terminated`, a failed connect
    // with `TypeError: fetch failed` (the client wraps that one as APIConnectionError).
    logger?.debug({ errName: (err as Error)?.name, errCode: errorCode(err) }, 'llm transport failure');
    return new LlmError('provider_down', 'The connection to the language model server was lost', base);
  }

  /** Milliseconds to wait before another attempt, or null when this error must not be retried. */
  function retryWait(error: LlmError, attempt: number): number | null {
    if (attempt > options.maxRetries) return null;
    const retryable =
      error.kind === 'rate_limit'
        ? // An exhausted quota (OpenAI answers it with 429 too) does not come back after a wait.
          error.providerCode !== 'insufficient_quota'
        : error.kind === 'provider_down' || error.status === 408;
    if (!retryable) return null;
    const wait = error.retryAfterMs ?? backoffDelayMs(attempt - 1, retryBaseDelayMs);
    return wait > options.maxRetryWaitMs ? null : wait;
  }

  async function waitBeforeRetry(error: LlmError, attempt: number, wait: number, control: CallControl) {
    logger?.info(
      { kind: error.kind, status: error.status, attempt, waitMs: wait, model: error.model },
      'language model call failed before its first token; retrying',
    );
    control.pause();
    await waitFor(wait, control.signal);
  }

  function newCallControl(signal: AbortSignal | undefined, timeoutMs: number): CallControl {
    return createCallControl({ callerSignal: signal, closeSignal: closeController.signal, timeoutMs });
  }

  async function* chatEvents(request: ChatRequest, model: string): AsyncGenerator<ProviderChatEvent> {
    checkChatRequest(request, OPENAI_COMPATIBLE);
    const timeoutMs = request.timeoutMs ?? options.timeoutMs;
    const control = newCallControl(request.signal, timeoutMs);
    const body: ChatCompletionCreateParamsStreaming = {
      model,
      messages: request.messages.map(toWireMessage),
      stream: true,
      ...(request.tools?.length && {
        tools: request.tools.map((t) => ({
          type: 'function' as const,
          function: { name: t.name, description: t.description, parameters: t.parameters },
        })),
      }),
      stream_options: { include_usage: true },
      ...(request.temperature !== undefined && { temperature: request.temperature }),
      ...(request.maxTokens !== undefined && { [maxTokensField]: request.maxTokens }),
      ...(request.responseFormat === 'json_object' && { response_format: { type: 'json_object' as const } }),
    };
    let finished = false;
    try {
      for (let attempt = 1; ; attempt++) {
        let startedText = false;
        let usage: TokenUsage | null = null;
        let finishReason: FinishReason = 'unknown';
        const toolCalls = new ToolCallAssembler(model);
        try {
          if (control.stopReason) throw stopError(control.stopReason, model, timeoutMs);
          control.touch();
          const stream = await client.chat.completions.create(body, { signal: control.signal, timeout: timeoutMs });
          for await (const chunk of stream) {
            control.touch();
            const read = readChunk(chunk, model);
            if (read.usage) usage = read.usage;
            if (read.finishReason) finishReason = read.finishReason;
            if (read.toolCalls.length) {
              // A tool call is something the caller acts on: like text, it must not be repeated.
              startedText = true;
              toolCalls.add(read.toolCalls);
            }
            if (read.content) {
              startedText = true;
              // The timeout measures the provider, not a consumer that is slow to take the piece.
              control.pause();
              yield { type: 'delta', text: read.content };
              control.touch();
            }
          }
          // The client ends the iteration quietly when its request is aborted.
          if (control.stopReason) throw stopError(control.stopReason, model, timeoutMs);
          control.pause();
          finished = true;
          yield { type: 'end', finishReason, usage, attempts: attempt, toolCalls: toolCalls.finish() };
          return;
        } catch (err) {
          const error = toLlmError(err, control, model, timeoutMs).with({ attempts: attempt });
          // After the first token the caller has text in hand: a retry would repeat or contradict it.
          const wait = startedText ? null : retryWait(error, attempt);
          if (wait === null) throw error;
          await waitBeforeRetry(error, attempt, wait, control).catch(() => {
            throw stopError(control.stopReason ?? 'aborted', model, timeoutMs).with({ attempts: attempt });
          });
        }
      }
    } finally {
      // Reached early when the consumer breaks out of its loop: end the HTTP request too.
      if (!finished) control.stop('consumer_left');
      control.dispose();
    }
  }

  function stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const model = request.model ?? options.defaultModel;
    return meterChatStream(
      { provider: OPENAI_COMPATIBLE, model, messages: request.messages, costs, logger },
      chatEvents(request, model),
    );
  }

  async function embedBatch(
    texts: string[],
    model: string,
    control: CallControl,
    timeoutMs: number,
  ): Promise<{ vectors: number[][]; tokens: number; fromProvider: boolean; attempts: number }> {
    for (let attempt = 1; ; attempt++) {
      try {
        if (control.stopReason) throw stopError(control.stopReason, model, timeoutMs);
        control.touch();
        // `float` explicitly: the client otherwise asks for base64, which Ollama does not support.
        const response = await client.embeddings.create(
          { model, input: texts, encoding_format: 'float' },
          { signal: control.signal, timeout: timeoutMs },
        );
        control.pause();
        const vectors = readEmbeddings(response, texts.length, model);
        const promptTokens = (response as { usage?: { prompt_tokens?: unknown } }).usage?.prompt_tokens;
        return typeof promptTokens === 'number'
          ? { vectors, tokens: promptTokens, fromProvider: true, attempts: attempt }
          : {
              vectors,
              tokens: texts.reduce((n, t) => n + countTokens(t), 0),
              fromProvider: false,
              attempts: attempt,
            };
      } catch (err) {
        const error = toLlmError(err, control, model, timeoutMs).with({ attempts: attempt });
        const wait = retryWait(error, attempt);
        if (wait === null) throw error;
        await waitBeforeRetry(error, attempt, wait, control).catch(() => {
          throw stopError(control.stopReason ?? 'aborted', model, timeoutMs).with({ attempts: attempt });
        });
      }
    }
  }

  async function embed(request: EmbedRequest): Promise<EmbedResult> {
    const model = request.model ?? options.embeddingModel;
    if (!model) {
      throw new LlmError('unsupported', 'Embeddings are off: no EMBEDDING_MODEL is configured', {
        provider: OPENAI_COMPATIBLE,
      });
    }
    checkEmbedRequest(request, OPENAI_COMPATIBLE);
    const started = performance.now();
    const timeoutMs = request.timeoutMs ?? options.timeoutMs;
    const control = newCallControl(request.signal, timeoutMs);
    const vectors: number[][] = [];
    let tokens = 0;
    let allFromProvider = true;
    let attempts = 0;
    try {
      for (let i = 0; i < request.texts.length; i += embeddingBatchSize) {
        const batch = await embedBatch(request.texts.slice(i, i + embeddingBatchSize), model, control, timeoutMs);
        vectors.push(...batch.vectors);
        tokens += batch.tokens;
        allFromProvider &&= batch.fromProvider;
        attempts += batch.attempts;
      }
    } finally {
      control.dispose();
    }
    const accounting = {
      provider: OPENAI_COMPATIBLE,
      model,
      inputTokens: tokens,
      outputTokens: 0,
      latencyMs: Math.round(performance.now() - started),
      timeToFirstTokenMs: null,
      cost: costs.costOf(model, tokens, 0),
      usageSource: allFromProvider && attempts > 0 ? ('provider' as const) : ('tokenizer' as const),
      attempts,
    };
    logger?.debug({ llm: accounting, texts: request.texts.length }, 'embeddings call finished');
    return { vectors, model, dimensions: vectors[0]?.length ?? 0, accounting };
  }

  return {
    info,
    isLanguageModel: true,
    supportsEmbeddings: info.embeddingModel !== null,
    stream,
    complete: (request) => collectChatStream(stream(request)),
    embed,
    close() {
      closed ??= (async () => {
        closeController.abort();
        // Calls in flight were just aborted; destroy ends their sockets and the idle ones at once.
        await agent.destroy();
      })();
      return closed;
    },
  };
}

function kindOfStatus(status: number): LlmErrorKind {
  if (status === 401 || status === 403) return 'auth';
  if (status === 404) return 'bad_model';
  if (status === 408) return 'timeout';
  if (status === 429) return 'rate_limit';
  if (status >= 500) return 'provider_down';
  return 'bad_request';
}

function messageOfStatus(kind: LlmErrorKind, status: number, model: string): string {
  switch (kind) {
    case 'auth':
      return `The language model server refused the credentials (HTTP ${status}); check LLM_API_KEY`;
    case 'bad_model':
      return `The language model server does not know the model "${model}" (HTTP ${status}; or LLM_BASE_URL lacks its path, such as /v1)`;
    case 'timeout':
      return `The language model server timed out (HTTP ${status})`;
    case 'rate_limit':
      return `The language model server is rate limiting requests (HTTP ${status})`;
    case 'provider_down':
      return `The language model server failed (HTTP ${status})`;
    default:
      return `The language model server rejected the request (HTTP ${status})`;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function malformed(what: string, model: string): LlmError {
  return new LlmError('malformed_response', `The language model server sent ${what}`, {
    provider: OPENAI_COMPATIBLE,
    model,
  });
}

const finishReasons: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'length',
  content_filter: 'content_filter',
  tool_calls: 'tool_calls',
  // The older name of the same thing (OpenAI's deprecated `function_call`).
  function_call: 'tool_calls',
};

function toWireMessage(m: ChatMessage): ChatCompletionMessageParam {
  if (m.role === 'tool') return { role: 'tool', content: m.content, tool_call_id: m.toolCallId ?? '' };
  if (m.role === 'assistant' && m.toolCalls?.length) {
    return {
      role: 'assistant',
      content: m.content || null,
      tool_calls: m.toolCalls.map((c) => ({
        id: c.id,
        type: 'function' as const,
        function: { name: c.name, arguments: c.arguments },
      })),
    };
  }
  return { role: m.role, content: m.content } as ChatCompletionMessageParam;
}

/** One piece of a streamed tool call: the first names it (id, name), later ones add argument text. */
interface ToolCallDelta {
  index: number;
  id: string | null;
  name: string | null;
  arguments: string;
}

/**
 * Puts streamed `tool_calls` deltas together: OpenAI sends each call's `id` and `function.name`
 * once, in its first piece, and its `function.arguments` JSON text spread over later pieces, all
 * keyed by `index` (several calls of one reply may interleave).
 */
class ToolCallAssembler {
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();
  constructor(private readonly model: string) {}

  add(deltas: ToolCallDelta[]) {
    for (const d of deltas) {
      const call = this.calls.get(d.index) ?? { id: '', name: '', arguments: '' };
      if (d.id) call.id = d.id;
      if (d.name) call.name += d.name;
      call.arguments += d.arguments;
      this.calls.set(d.index, call);
    }
  }

  finish(): ToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, call]) => {
        if (!call.name) throw malformed(`a tool call (index ${index}) without a function name`, this.model);
        // Some local servers leave out the ID; one is made up so results can still answer the call.
        return { id: call.id || `call_${index}`, name: call.name, arguments: call.arguments };
      });
  }
}

/** Checks one `chat.completion.chunk`; the client parses JSON but does not check the shape. */
function readChunk(
  chunk: unknown,
  model: string,
): { content: string | null; finishReason: FinishReason | null; usage: TokenUsage | null; toolCalls: ToolCallDelta[] } {
  if (!isObject(chunk) || !Array.isArray(chunk.choices)) {
    throw malformed('a stream chunk without a `choices` list', model);
  }
  let content: string | null = null;
  let finishReason: FinishReason | null = null;
  const toolCalls: ToolCallDelta[] = [];
  const choice: unknown = chunk.choices[0];
  if (choice !== undefined) {
    if (!isObject(choice)) throw malformed('a stream chunk whose choice is not an object', model);
    const delta = choice.delta;
    if (delta !== undefined && delta !== null) {
      if (!isObject(delta)) throw malformed('a stream chunk whose delta is not an object', model);
      if (delta.content !== undefined && delta.content !== null) {
        if (typeof delta.content !== 'string') throw malformed('a stream chunk whose content is not text', model);
        content = delta.content;
      }
      if (delta.tool_calls !== undefined && delta.tool_calls !== null) {
        if (!Array.isArray(delta.tool_calls)) throw malformed('a stream chunk whose tool_calls is not a list', model);
        delta.tool_calls.forEach((raw: unknown, position: number) => {
          if (!isObject(raw)) throw malformed('a tool call delta that is not an object', model);
          const fn = raw.function;
          if (fn !== undefined && fn !== null && !isObject(fn)) {
            throw malformed('a tool call delta whose function is not an object', model);
          }
          const text = (v: unknown) => (typeof v === 'string' ? v : null);
          toolCalls.push({
            index: typeof raw.index === 'number' ? raw.index : position,
            id: text(raw.id),
            name: text(fn?.name),
            arguments: text(fn?.arguments) ?? '',
          });
        });
      }
    }
    if (typeof choice.finish_reason === 'string') finishReason = finishReasons[choice.finish_reason] ?? 'unknown';
  }
  let usage: TokenUsage | null = null;
  if (isObject(chunk.usage)) {
    const { prompt_tokens: input, completion_tokens: output } = chunk.usage;
    if (typeof input === 'number' && typeof output === 'number') usage = { inputTokens: input, outputTokens: output };
  }
  return { content, finishReason, usage, toolCalls };
}

/** Checks an embeddings response and returns its vectors in input order. */
function readEmbeddings(response: unknown, expected: number, model: string): number[][] {
  if (!isObject(response) || !Array.isArray(response.data)) {
    throw malformed('an embeddings response without a `data` list', model);
  }
  if (response.data.length !== expected) {
    throw malformed(`${response.data.length} embeddings for ${expected} texts`, model);
  }
  const vectors: number[][] = new Array(expected);
  response.data.forEach((item: unknown, position: number) => {
    if (!isObject(item) || !Array.isArray(item.embedding) || !item.embedding.every((x) => typeof x === 'number')) {
      throw malformed('an embedding that is not a list of numbers', model);
    }
    const index = typeof item.index === 'number' ? item.index : position;
    if (index < 0 || index >= expected || vectors[index]) throw malformed('embeddings with wrong indexes', model);
    vectors[index] = item.embedding as number[];
  });
  const dimensions = vectors[0]?.length ?? 0;
  if (vectors.some((v) => v.length !== dimensions)) throw malformed('embeddings of different lengths', model);
  return vectors;
}

function withoutCredentials(baseUrl: string): string {
  try {
    const url = new URL(baseUrl);
    url.username = '';
    url.password = '';
    return url.toString().replace(/\/$/, '');
  } catch {
    return baseUrl;
  }
}

function errorCode(err: unknown): string | undefined {
  const cause = (err as { cause?: { code?: unknown } } | undefined)?.cause;
  return typeof cause?.code === 'string' ? cause.code : undefined;
}
