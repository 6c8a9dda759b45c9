import { type Attributes, SpanKind } from '@opentelemetry/api';
import { withSpan } from './tracing';

/**
 * Spans of the agent step in the OpenTelemetry GenAI semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/gen-ai/): `invoke_agent {name}` per agent turn,
 * `chat {model}` per model call, `execute_tool {name}` per tool call, with the `gen_ai.*`
 * attributes tools that understand the conventions read. Kept here so the runtime's step needs
 * no OpenTelemetry import.
 */

export interface GenAiSpan {
  /** Sets attributes known only once the work is done (token counts, the finish reason). */
  set(attributes: Attributes): void;
}

const dropUndefined = (attributes: Record<string, string | number | boolean | undefined>): Attributes =>
  Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined)) as Attributes;

export function traceInvokeAgent<T>(
  agent: { id: string; name: string; conversationId?: string; provider: string; model: string },
  run: (span: GenAiSpan) => Promise<T>,
): Promise<T> {
  return withSpan(
    `invoke_agent ${agent.name}`,
    dropUndefined({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.id': agent.id,
      'gen_ai.agent.name': agent.name,
      'gen_ai.conversation.id': agent.conversationId,
      'gen_ai.provider.name': agent.provider,
      'gen_ai.request.model': agent.model,
    }),
    (span) => run({ set: (a) => span.setAttributes(a) }),
  );
}

export function traceChat<T>(
  call: { provider: string; model: string; conversationId?: string; temperature?: number; maxTokens?: number },
  run: (span: GenAiSpan) => Promise<T>,
): Promise<T> {
  return withSpan(
    `chat ${call.model}`,
    dropUndefined({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': call.provider,
      'gen_ai.request.model': call.model,
      'gen_ai.conversation.id': call.conversationId,
      'gen_ai.request.temperature': call.temperature,
      'gen_ai.request.max_tokens': call.maxTokens,
    }),
    (span) => run({ set: (a) => span.setAttributes(a) }),
    { kind: SpanKind.CLIENT },
  );
}

export function traceExecuteTool<T>(
  tool: { name: string; callId: string; type: string; description?: string; conversationId?: string },
  run: (span: GenAiSpan) => Promise<T>,
): Promise<T> {
  return withSpan(
    `execute_tool ${tool.name}`,
    dropUndefined({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': tool.name,
      'gen_ai.tool.call.id': tool.callId,
      'gen_ai.tool.type': tool.type,
      'gen_ai.tool.description': tool.description?.slice(0, 200),
      'gen_ai.conversation.id': tool.conversationId,
    }),
    (span) => run({ set: (a) => span.setAttributes(a) }),
  );
}
