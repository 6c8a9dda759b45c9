import { LlmError } from './errors';
import type { ChatRequest, EmbedRequest } from './types';

const roles = new Set(['system', 'user', 'assistant']);

/**
 * A request the provider would refuse anyway fails here, before any HTTP, with a message that
 * names the option (the message never quotes the prompt).
 */
export function checkChatRequest(request: ChatRequest, provider: string): void {
  const fail = (what: string): never => {
    throw new LlmError('bad_request', `Invalid model request: ${what}`, { provider, model: request.model });
  };
  if (!Array.isArray(request.messages) || request.messages.length === 0) fail('messages must not be empty');
  request.messages.forEach((m, i) => {
    if (!roles.has(m?.role)) fail(`messages[${i}].role must be system, user or assistant`);
    if (typeof m.content !== 'string') fail(`messages[${i}].content must be text`);
  });
  if (request.model !== undefined && (typeof request.model !== 'string' || request.model.trim() === '')) {
    fail('model must be a non-empty name');
  }
  if (request.temperature !== undefined && !(request.temperature >= 0 && request.temperature <= 2)) {
    fail('temperature must be between 0 and 2');
  }
  if (request.maxTokens !== undefined && !(Number.isInteger(request.maxTokens) && request.maxTokens >= 1)) {
    fail('maxTokens must be a positive integer');
  }
  checkTimeout(request.timeoutMs, fail);
}

export function checkEmbedRequest(request: EmbedRequest, provider: string): void {
  const fail = (what: string): never => {
    throw new LlmError('bad_request', `Invalid embeddings request: ${what}`, { provider, model: request.model });
  };
  if (!Array.isArray(request.texts) || request.texts.some((t) => typeof t !== 'string')) {
    fail('texts must be a list of strings');
  }
  checkTimeout(request.timeoutMs, fail);
}

function checkTimeout(timeoutMs: number | undefined, fail: (what: string) => never): void {
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 1)) {
    fail('timeoutMs must be a positive integer');
  }
}
