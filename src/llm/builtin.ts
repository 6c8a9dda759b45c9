import type { Logger } from '../lib/logger';
import { LlmError } from './errors';
import { answerExtractively, wordPieces } from './extractive-answer';
import { collectChatStream, meterChatStream, type ProviderChatEvent } from './metering';
import { BUILTIN_MODEL, createCostCalculator } from './prices';
import { checkChatRequest } from './request-checks';
import { countTokens } from './tokens';
import type { ChatRequest, ChatStreamEvent, FinishReason, LlmProvider, LlmProviderInfo } from './types';

export const BUILTIN = 'builtin';

export interface BuiltinProviderOptions {
  logger?: Logger;
  /** Most sentences in an answer (default 3). */
  maxSentences?: number;
}

/**
 * What Parley uses when no model server is configured, so AI steps and knowledge-base synthesis
 * still run end to end. It is NOT a language model: it streams back, word by word, the sentences
 * of the context in its messages that best match the question (see extractive-answer.ts). It
 * cannot follow instructions, judge, or write JSON, and it says so through `isLanguageModel`.
 */
export function createBuiltinProvider(options: BuiltinProviderOptions = {}): LlmProvider {
  const costs = createCostCalculator({ prices: {}, logger: options.logger });
  const closeController = new AbortController();

  const info: LlmProviderInfo = {
    provider: BUILTIN,
    isLanguageModel: false,
    defaultModel: BUILTIN_MODEL,
    embeddingModel: null,
    baseUrl: null,
  };

  const stopped = (signal: AbortSignal | undefined): LlmError | null => {
    if (closeController.signal.aborted) {
      return new LlmError('aborted', 'The built-in provider was closed', { provider: BUILTIN, model: BUILTIN_MODEL });
    }
    if (signal?.aborted) {
      return new LlmError('aborted', 'The call was aborted', { provider: BUILTIN, model: BUILTIN_MODEL });
    }
    return null;
  };

  async function* events(request: ChatRequest): AsyncGenerator<ProviderChatEvent> {
    checkChatRequest(request, BUILTIN);
    if (request.responseFormat === 'json_object') {
      // An extract is not JSON; inventing a JSON verdict is exactly what must not happen.
      throw new LlmError('unsupported', 'The built-in provider is not a language model and cannot answer in JSON', {
        provider: BUILTIN,
        model: BUILTIN_MODEL,
      });
    }
    if (request.tools?.length) {
      // It cannot decide to call a tool; pretending it never wants to would hide that.
      throw new LlmError('unsupported', 'The built-in provider is not a language model and cannot call tools', {
        provider: BUILTIN,
        model: BUILTIN_MODEL,
      });
    }
    const answer = answerExtractively(request.messages, { maxSentences: options.maxSentences });
    let text = '';
    let finishReason: FinishReason = 'stop';
    for (const piece of wordPieces(answer)) {
      const error = stopped(request.signal);
      if (error) throw error;
      if (request.maxTokens !== undefined && countTokens(text + piece) > request.maxTokens) {
        finishReason = 'length';
        break;
      }
      text += piece;
      yield { type: 'delta', text: piece };
      // One piece per turn of the event loop, as a network stream would arrive: consumers can
      // flush each piece, and an abort lands between pieces.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const error = stopped(request.signal);
    if (error) throw error;
    // No usage: metering counts prompt and answer with the tokenizer, as for any provider without it.
    yield { type: 'end', finishReason, usage: null, attempts: 0 };
  }

  function stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    return meterChatStream(
      { provider: BUILTIN, model: BUILTIN_MODEL, messages: request.messages, costs, logger: options.logger },
      events(request),
    );
  }

  return {
    info,
    isLanguageModel: false,
    supportsEmbeddings: false,
    stream,
    complete: (request) => collectChatStream(stream(request)),
    async embed() {
      throw new LlmError(
        'unsupported',
        'The built-in provider has no embeddings (set LLM_BASE_URL and EMBEDDING_MODEL)',
        {
          provider: BUILTIN,
        },
      );
    },
    async close() {
      closeController.abort();
    },
  };
}
