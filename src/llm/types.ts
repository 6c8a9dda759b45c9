/**
 * The one way Parley talks to language models. Evaluations, the runtime's AI steps and
 * knowledge-base synthesis depend on these types only, never on a provider's implementation.
 */

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

/** A tool the model asked to call: `arguments` is the JSON text the model wrote (not checked). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** On an assistant message: the tool calls it made (OpenAI's `tool_calls`). */
  toolCalls?: ToolCall[];
  /** On a `tool` message: the call it answers. */
  toolCallId?: string;
}

/** A function the model may call: name, what it does, and its parameters as JSON Schema. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** `json_object` asks the provider for its JSON mode (OpenAI's `response_format`). */
export type ResponseFormat = 'text' | 'json_object';

export interface ChatRequest {
  messages: ChatMessage[];
  /** Defaults to the provider's default model. */
  model?: string;
  temperature?: number;
  maxTokens?: number;
  responseFormat?: ResponseFormat;
  /** Functions the model may call; its answer's `toolCalls` lists the calls it made. */
  tools?: ToolDefinition[];
  /** Cancels the call: an in-flight HTTP request is closed and the call fails with kind `aborted`. */
  signal?: AbortSignal;
  /**
   * Longest wait for the provider, in milliseconds: for the answer to start, and then for each next
   * piece of it. Defaults to the provider's setting (LLM_TIMEOUT_MS). A caller that needs a deadline
   * on the whole call passes a signal (e.g. `AbortSignal.timeout`).
   */
  timeoutMs?: number;
}

/** Why the model stopped. `length`: it hit maxTokens. `unknown`: the provider did not say. */
export type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls' | 'unknown';

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/**
 * What one call cost. Callers record it themselves (they know the project, flow and step):
 * usage analytics' `credit_usage` (llm-input / llm-output per model) and evaluation `cost` read it.
 */
export interface LlmAccounting extends TokenUsage {
  /** `builtin` or `openai-compatible`. */
  provider: string;
  /** The model asked for (the provider's default when the request named none). */
  model: string;
  /** Wall time of the whole call, retries and their waits included. */
  latencyMs: number;
  /** From the start of the call to the first piece of text; null when no text came. */
  timeToFirstTokenMs: number | null;
  /** In the currency of the price table (USD by default); 0 for models without a price. */
  cost: number;
  /**
   * `provider`: the counts are the provider's own. `tokenizer`: counted locally with o200k_base,
   * because the provider is the built-in one or sent no usage (some local servers do not).
   */
  usageSource: 'provider' | 'tokenizer';
  /** How many HTTP attempts the call took (1 without retries; 0 for the built-in provider). */
  attempts: number;
}

export interface ChatResult {
  text: string;
  /** The tools the model called (in the order of the reply), empty when it only wrote text. */
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage: TokenUsage;
  accounting: LlmAccounting;
}

/** A stream is text deltas in order, then exactly one `end` (or an LlmError thrown instead). */
export type ChatStreamEvent = { type: 'delta'; text: string } | { type: 'end'; result: ChatResult };

export interface EmbedRequest {
  texts: string[];
  /** Defaults to the configured embedding model. */
  model?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface EmbedResult {
  /** One vector per input text, in input order. */
  vectors: number[][];
  model: string;
  dimensions: number;
  /** outputTokens is 0 for embeddings. */
  accounting: LlmAccounting;
}

export interface LlmProviderInfo {
  /** `builtin` or `openai-compatible`. */
  provider: string;
  /**
   * False for the built-in provider, which only extracts sentences from its context. Evaluations
   * must not ask it for a verdict: they record `skipped` instead.
   */
  isLanguageModel: boolean;
  defaultModel: string;
  /** Null when embeddings are off (no EMBEDDING_MODEL, or the built-in provider). */
  embeddingModel: string | null;
  /** The server's base URL without credentials; null for the built-in provider. */
  baseUrl: string | null;
}

export interface LlmProvider {
  readonly info: LlmProviderInfo;
  /** Shorthand for `info.isLanguageModel`. */
  readonly isLanguageModel: boolean;
  /** Shorthand for `info.embeddingModel !== null`. */
  readonly supportsEmbeddings: boolean;
  /** The whole answer at once (streamed underneath, so timeouts and accounting match `stream`). */
  complete(request: ChatRequest): Promise<ChatResult>;
  /**
   * Lazy: the request starts when iteration starts. Breaking out of the loop cancels the request.
   * Errors are LlmErrors thrown from the iteration.
   */
  stream(request: ChatRequest): AsyncIterable<ChatStreamEvent>;
  /** Throws LlmError `unsupported` when `supportsEmbeddings` is false. */
  embed(request: EmbedRequest): Promise<EmbedResult>;
  /** Cancels calls in flight and closes pooled connections. */
  close(): Promise<void>;
}
