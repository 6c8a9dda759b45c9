import type { Logger } from '../lib/logger';
import { LlmError } from './errors';
import type { CostCalculator } from './prices';
import { countChatTokens, countTokens } from './tokens';
import type {
  ChatMessage,
  ChatResult,
  ChatStreamEvent,
  FinishReason,
  LlmAccounting,
  TokenUsage,
  ToolCall,
} from './types';

/** What a provider implementation yields; metering turns it into the public stream. */
export type ProviderChatEvent =
  | { type: 'delta'; text: string }
  | { type: 'end'; finishReason: FinishReason; usage: TokenUsage | null; attempts: number; toolCalls?: ToolCall[] };

export interface MeteringContext {
  provider: string;
  model: string;
  messages: readonly ChatMessage[];
  costs: CostCalculator;
  logger?: Logger;
}

/**
 * Adds the accounting record every call must carry: latency, time to first token, tokens (the
 * provider's, or counted locally when it sent none) and cost. Shared by every provider so the
 * numbers mean the same thing whichever one answered.
 */
export async function* meterChatStream(
  ctx: MeteringContext,
  events: AsyncIterable<ProviderChatEvent>,
): AsyncGenerator<ChatStreamEvent, void, undefined> {
  const started = performance.now();
  let firstTokenAt: number | null = null;
  let text = '';

  const account = (usage: TokenUsage | null, attempts: number, toolCalls: readonly ToolCall[] = []): LlmAccounting => {
    const written = text + toolCalls.map((c) => c.name + c.arguments).join('');
    const counted = usage ?? { inputTokens: countChatTokens(ctx.messages), outputTokens: countTokens(written) };
    return {
      provider: ctx.provider,
      model: ctx.model,
      inputTokens: counted.inputTokens,
      outputTokens: counted.outputTokens,
      latencyMs: Math.round(performance.now() - started),
      timeToFirstTokenMs: firstTokenAt === null ? null : Math.round(firstTokenAt - started),
      cost: ctx.costs.costOf(ctx.model, counted.inputTokens, counted.outputTokens),
      usageSource: usage ? 'provider' : 'tokenizer',
      attempts,
    };
  };

  try {
    for await (const event of events) {
      if (event.type === 'delta') {
        if (!event.text) continue;
        firstTokenAt ??= performance.now();
        text += event.text;
        yield event;
        continue;
      }
      const accounting = account(event.usage, event.attempts, event.toolCalls);
      ctx.logger?.debug({ llm: accounting, finishReason: event.finishReason }, 'llm call finished');
      const result: ChatResult = {
        text,
        toolCalls: event.toolCalls ?? [],
        finishReason: event.finishReason,
        usage: { inputTokens: accounting.inputTokens, outputTokens: accounting.outputTokens },
        accounting,
      };
      yield { type: 'end', result };
      return;
    }
    throw new LlmError('malformed_response', 'The provider stream ended without a result', {
      provider: ctx.provider,
      model: ctx.model,
    });
  } catch (err) {
    // Text had arrived and was perhaps shown: the caller may still want to bill it.
    if (err instanceof LlmError && text && !err.partialAccounting) {
      const partial = account(null, err.attempts ?? 1);
      ctx.logger?.debug({ llm: partial, kind: err.kind }, 'llm call failed after text had started');
      throw err.with({ partialAccounting: partial });
    }
    throw err;
  }
}

/** Runs a stream to its end and returns the result (what `complete` is). */
export async function collectChatStream(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatResult> {
  for await (const event of stream) {
    if (event.type === 'end') return event.result;
  }
  throw new Error('chat stream ended without an end event');
}
