import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBuiltinProvider, createOpenAiCompatibleProvider, isLlmError, type LlmProvider } from '../../src/llm';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';

/** Tool calls through the OpenAI-compatible provider, against the fake server's streamed wire format. */

let fake: FakeOpenAiServer;
let llm: LlmProvider;

beforeAll(async () => {
  fake = await startFakeOpenAiServer();
  llm = createOpenAiCompatibleProvider({
    baseUrl: fake.baseUrl,
    defaultModel: 'gpt-4o-mini',
    prices: {},
    timeoutMs: 10_000,
    maxRetries: 0,
    maxRetryWaitMs: 0,
  });
});
afterAll(async () => {
  await llm.close();
  await fake.close();
});
beforeEach(() => fake.reset());

const tools = [
  {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
  { name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} } },
];

describe('tool calls', () => {
  it('sends the tools and assembles several streamed calls of one reply, interleaved', async () => {
    fake.script({
      type: 'chat',
      chunks: ['Let me', ' check.'],
      toolCalls: [
        { id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}', argumentPieces: 4 },
        { id: 'call_b', name: 'get_time', arguments: '{}' },
      ],
      interleaveToolCalls: true,
    });
    const deltas: string[] = [];
    let result: Awaited<ReturnType<LlmProvider['complete']>> | null = null;
    for await (const event of llm.stream({ messages: [{ role: 'user', content: 'weather?' }], tools })) {
      if (event.type === 'delta') deltas.push(event.text);
      else result = event.result;
    }
    expect(deltas.join('')).toBe('Let me check.');
    expect(result?.finishReason).toBe('tool_calls');
    expect(result?.toolCalls).toEqual([
      { id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { id: 'call_b', name: 'get_time', arguments: '{}' },
    ]);
    const body = fake.requests[0]!.body;
    expect(body.tools).toEqual(tools.map((t) => ({ type: 'function', function: t })));
  });

  it('sends earlier calls and their results back in the wire format', async () => {
    fake.script({ type: 'chat', chunks: ['Sunny.'] });
    const result = await llm.complete({
      tools,
      messages: [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ id: 'c1', name: 'get_weather', arguments: '{"city":"Oslo"}' }],
        },
        { role: 'tool', content: '{"sky":"sunny"}', toolCallId: 'c1' },
      ],
    });
    expect(result.text).toBe('Sunny.');
    expect(result.toolCalls).toEqual([]);
    expect(fake.requests[0]!.body.messages).toEqual([
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      },
      { role: 'tool', content: '{"sky":"sunny"}', tool_call_id: 'c1' },
    ]);
  });

  it('refuses a tool result that names no call, and a bad tool name, before any HTTP', async () => {
    const err = await llm.complete({ messages: [{ role: 'tool', content: 'x' }] }).catch((e) => e);
    expect(isLlmError(err) && err.kind).toBe('bad_request');
    const bad = await llm
      .complete({ messages: [{ role: 'user', content: 'x' }], tools: [{ ...tools[0]!, name: 'has space' }] })
      .catch((e) => e);
    expect(isLlmError(bad) && bad.message).toMatch(/tools\[0\]\.name/);
    expect(fake.requests).toHaveLength(0);
  });

  it('fails a call whose streamed tool call has no name as a malformed response', async () => {
    fake.script({
      type: 'chat',
      chunks: [],
      inject: {
        afterChunks: 0,
        data: [
          JSON.stringify({
            id: 'x',
            object: 'chat.completion.chunk',
            created: 1,
            model: 'm',
            choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{}' } }] } }],
          }),
        ],
      },
    });
    const err = await llm.complete({ messages: [{ role: 'user', content: 'x' }], tools }).catch((e) => e);
    expect(isLlmError(err) && err.kind).toBe('malformed_response');
  });
});

describe('the built-in provider', () => {
  it('refuses tools instead of ignoring them', async () => {
    const builtin = createBuiltinProvider();
    const err = await builtin
      .complete({ messages: [{ role: 'user', content: 'weather?' }], tools: [tools[0]!] })
      .catch((e) => e);
    expect(isLlmError(err) && err.kind).toBe('unsupported');
    expect((err as Error).message).toMatch(/cannot call tools/);
    await builtin.close();
  });
});
