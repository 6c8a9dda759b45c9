import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { describe, expect, it } from 'vitest';
import { databaseLanes } from '../helpers/lanes';
import { publish, stream, v2StreamPath } from '../helpers/runtime';
import { useInMemorySpans } from '../helpers/spans';
import { dataOf } from '../helpers/sse';
import { useAppWithFakeModel } from './helpers';

/**
 * The agent step's spans follow the OpenTelemetry GenAI semantic conventions: `invoke_agent`,
 * `chat` and `execute_tool` with the gen_ai.* attributes, nested under the turn's step span.
 * Spans are captured in memory (the SDK is process-wide, so this file registers its own provider while it runs).
 */

const provider = databaseLanes()[0] ?? 'sqlite';
const exporter = useInMemorySpans();

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe(`agent spans [${provider}]`, () => {
  const t = useAppWithFakeModel(provider, {
    RATE_LIMIT_ENABLED: 'false',
    LLM_DEFAULT_MODEL: 'gpt-spans',
    LLM_MAX_RETRIES: '0',
  });

  it('emits invoke_agent, chat and execute_tool spans with the GenAI attributes', async () => {
    const p = await t.app.createProject({ scopes: ['admin', 'runtime:interact'] });
    await publish(t.app, p.projectID, {
      name: 'Span agent',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'assistant',
          steps: [
            {
              id: 'assistant',
              type: 'agent',
              name: 'Span assistant',
              instructions: 'Be brief.',
              temperature: 0.3,
              tools: [
                {
                  type: 'function',
                  name: 'double',
                  description: 'Doubles a number',
                  parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
                  code: 'return args.n * 2;',
                },
              ],
            },
          ],
        },
      ],
    });
    const path = v2StreamPath(p.projectID, 'spans-user');
    const interactKey = p.apiKey;
    await stream(t.app, path, { key: interactKey, body: { action: { type: 'launch' } } });
    t.fake.reset();
    t.fake.script(
      {
        type: 'chat',
        toolCalls: [{ id: 'call_double_1', name: 'double', arguments: '{"n":21}' }],
        usage: { prompt_tokens: 31, completion_tokens: 7 },
      },
      { type: 'chat', chunks: ['42.'], usage: { prompt_tokens: 45, completion_tokens: 2 } },
    );
    exporter.reset();
    const { reading } = await stream(t.app, path, {
      key: interactKey,
      body: { action: { type: 'text', payload: 'double 21' } },
      query: { state: 'true' },
    });
    const state = dataOf<{ stack: unknown }>(reading, 'state')[0];
    expect(state).toBeDefined();

    await expect.poll(() => exporter.getFinishedSpans().some((s) => s.name.startsWith('invoke_agent'))).toBe(true);
    const spans = exporter.getFinishedSpans();
    const invoke = spans.find((s) => s.name === 'invoke_agent Span assistant')!;
    const chats = spans.filter((s) => s.name === 'chat gpt-spans');
    const tool = spans.find((s) => s.name === 'execute_tool double')!;
    const step = spans.find((s) => s.name === 'runtime.step agent')!;
    expect(invoke.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.id': 'assistant',
      'gen_ai.agent.name': 'Span assistant',
      'gen_ai.provider.name': 'openai-compatible',
      'gen_ai.request.model': 'gpt-spans',
    });
    const conversationId = invoke.attributes['gen_ai.conversation.id'];
    expect(conversationId).toMatch(/^[0-9a-f]{24}$/);
    expect(parentOf(invoke)).toBe(step.spanContext().spanId);

    // One span per model call: the provider's GenAI `chat` span, nothing else around or beside it.
    const modelCallSpans = spans.filter(
      (s) => s.attributes['gen_ai.operation.name'] === 'chat' || s.name.startsWith('llm.'),
    );
    expect(modelCallSpans.map((s) => s.name)).toEqual(['chat gpt-spans', 'chat gpt-spans']);
    expect(chats).toHaveLength(2);
    expect(chats.every((c) => c.kind === SpanKind.CLIENT)).toBe(true);
    expect(chats.every((c) => c.attributes['gen_ai.system'] === undefined)).toBe(true);
    expect(chats.map((c) => parentOf(c))).toEqual([invoke.spanContext().spanId, invoke.spanContext().spanId]);
    expect(chats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai-compatible',
      'gen_ai.request.model': 'gpt-spans',
      'gen_ai.request.temperature': 0.3,
      'gen_ai.conversation.id': conversationId,
      'gen_ai.usage.input_tokens': 31,
      'gen_ai.usage.output_tokens': 7,
      'gen_ai.response.finish_reasons': ['tool_calls'],
    });
    expect(chats[1]!.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 45, 'gen_ai.usage.output_tokens': 2 });

    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'double',
      'gen_ai.tool.call.id': 'call_double_1',
      'gen_ai.tool.type': 'function',
      'gen_ai.conversation.id': conversationId,
      'parley.tool.success': true,
    });
    expect(parentOf(tool)).toBe(invoke.spanContext().spanId);
  });
});
