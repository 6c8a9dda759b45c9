import { LlmError } from './errors';
import type { ChatRequest, EmbedRequest } from './types';

const roles = new Set(['system', 'user', 'assistant', 'tool']);
const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

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
    if (!roles.has(m?.role)) fail(`messages[${i}].role must be system, user, assistant or tool`);
    if (typeof m.content !== 'string') fail(`messages[${i}].content must be text`);
    if (m.role === 'tool' && !m.toolCallId) fail(`messages[${i}] (a tool result) must name its toolCallId`);
  });
  const names = new Set<string>();
  (request.tools ?? []).forEach((tool, i) => {
    if (!toolNamePattern.test(tool?.name ?? '')) fail(`tools[${i}].name must be 1 to 64 letters, digits, "_" or "-"`);
    if (names.has(tool.name)) fail(`tools[${i}].name "${tool.name}" is given twice`);
    names.add(tool.name);
    if (typeof tool.parameters !== 'object' || tool.parameters === null)
      fail(`tools[${i}].parameters must be an object`);
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
