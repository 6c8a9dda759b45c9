import { type Attributes, context, createContextKey } from '@opentelemetry/api';
import { withSpan } from './tracing';

/**
 * Spans of the agent step in the OpenTelemetry GenAI semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/gen-ai/): `invoke_agent {name}` per agent turn and
 * `execute_tool {name}` per tool call, with the `gen_ai.*` attributes tools that understand the
 * conventions read. Kept here so the runtime's step needs no OpenTelemetry import. The one
 * `chat {model}` span of each model call is the instrumented provider's (./instrument.ts
 * `instrumentLlm`), which reads the conversation ID the agent's span puts in the context.
 */

const conversationKey = createContextKey('parley.gen_ai.conversation.id');

/** The conversation ID of the agent turn the caller runs in (gen_ai.conversation.id), if any. */
export function activeConversationId(): string | undefined {
  const value = context.active().getValue(conversationKey);
  return typeof value === 'string' ? value : undefined;
}

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
    (span) => {
      const inner = agent.conversationId
        ? context.active().setValue(conversationKey, agent.conversationId)
        : context.active();
      return context.with(inner, () => run({ set: (a) => span.setAttributes(a) }));
    },
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
