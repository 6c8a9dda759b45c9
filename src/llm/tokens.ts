import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import type { ChatMessage } from './types';

/** The encoding of OpenAI's current models; js-tiktoken bundles it, so counting works offline. */
export const TOKENIZER_ENCODING = 'o200k_base';

// Building the encoder parses a 2 MB rank table (close to a second on a slow core). It is
// immutable and has no side effects, so one per process, built on first use, is enough.
let encoder: Tiktoken | undefined;
function getEncoder(): Tiktoken {
  encoder ??= new Tiktoken(o200kBase);
  return encoder;
}

/** Tokens of a text. Special-token markers such as `<|endoftext|>` count as ordinary text. */
export function countTokens(text: string): number {
  if (!text) return 0;
  return getEncoder().encode(text, [], []).length;
}

/**
 * Tokens of a chat prompt as OpenAI's chat format bills them (the OpenAI cookbook's rule for
 * current models): 3 per message plus its role and content, plus 3 that prime the reply.
 */
export function countChatTokens(messages: readonly ChatMessage[]): number {
  let total = 3;
  for (const m of messages) total += 3 + countTokens(m.role) + countTokens(m.content);
  return total;
}
