import type { Logger } from '../lib/logger';
import { createBuiltinProvider } from './builtin';
import { createOpenAiCompatibleProvider } from './openai-compatible';
import type { PriceTable } from './prices';
import type { LlmProvider } from './types';

export { BUILTIN, createBuiltinProvider } from './builtin';
export { isLlmError, LlmError, type LlmErrorKind, llmErrorToAppError } from './errors';
export { answerExtractively } from './extractive-answer';
export { collectChatStream } from './metering';
export { createOpenAiCompatibleProvider, OPENAI_COMPATIBLE, type OpenAiCompatibleOptions } from './openai-compatible';
export {
  BUILTIN_MODEL,
  type CostCalculator,
  createCostCalculator,
  DEFAULT_PRICES,
  type ModelPrice,
  type PriceTable,
  parsePriceTable,
} from './prices';
export { countChatTokens, countTokens, TOKENIZER_ENCODING } from './tokens';
export type * from './types';

/** Plain settings for `createLlmProvider`; src/env.ts reads them from the environment. */
export interface LlmSettings {
  /** Without it the built-in provider answers. */
  baseUrl?: string;
  apiKey?: string;
  /** Required with baseUrl. */
  defaultModel?: string;
  embeddingModel?: string;
  prices: PriceTable;
  timeoutMs: number;
  maxRetries: number;
  maxRetryWaitMs: number;
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
}

/** The instance's provider: OpenAI-compatible when a base URL is configured, else the built-in one. */
export function createLlmProvider(settings: LlmSettings, deps: { logger?: Logger } = {}): LlmProvider {
  if (!settings.baseUrl) return createBuiltinProvider({ logger: deps.logger });
  if (!settings.defaultModel) throw new Error('a default model is required with an LLM base URL');
  return createOpenAiCompatibleProvider({
    baseUrl: settings.baseUrl,
    apiKey: settings.apiKey,
    defaultModel: settings.defaultModel,
    embeddingModel: settings.embeddingModel,
    prices: settings.prices,
    timeoutMs: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    maxRetryWaitMs: settings.maxRetryWaitMs,
    maxTokensField: settings.maxTokensField,
    logger: deps.logger,
  });
}
