import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, stream, v2StreamPath } from '../helpers/runtime';
import { dataOf, type SseFrame } from '../helpers/sse';

/**
 * The agent step through real HTTP (v2 stream routes), with the fake OpenAI-compatible server
 * scripting streamed tool calls: function tools in the sandbox, API tools against a local server,
 * knowledge-base search, exits, the round limit, bad arguments and failing tools, usage and
 * transcripts.
 */

type Trace = { type: string; payload: Record<string, unknown> };

/** A loopback API whose handlers may hold their answer until the test lets them go. */
async function startToolApi(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void) {
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => handler(req, body, res));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

function program(apiUrl: string, overrides: Record<string, unknown> = {}) {
  return {
    name: 'Order agent',
    startFlow: 'main',
    variables: [{ name: 'shop', default: 'Acme' }],
    flows: [
      {
        id: 'main',
        start: 'assistant',
        steps: [
          {
            id: 'assistant',
            type: 'agent',
            name: 'Order assistant',
            instructions: 'You help customers of {shop} with their orders.',
            greeting: 'Hi! I am the {shop} assistant.',
            tools: [
              {
                type: 'function',
                name: 'lookup_order',
                description: 'Looks up an order by its number',
                parameters: {
                  type: 'object',
                  properties: { id: { type: 'integer' } },
                  required: ['id'],
                  additionalProperties: false,
                },
                code: 'if (args.id === 13) throw new Error("order database unavailable");\nreturn { id: args.id, status: args.id === 42 ? "shipped" : "packing", shop: variables.shop };',
              },
              {
                type: 'api',
                name: 'stock',
                description: 'Stock of a product',
                parameters: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
                method: 'GET',
                url: `${apiUrl}/stock/{args.sku}`,
                headers: { 'x-shop': '{shop}' },
              },
              {
                type: 'api',
                name: 'price',
                description: 'Price of a product',
                parameters: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
                method: 'GET',
                url: `${apiUrl}/price/{args.sku}`,
                timeoutMs: 5000,
              },
              { type: 'knowledge-base', name: 'search_help', description: 'Searches the help center', chunkLimit: 2 },
            ],
            exits: [{ name: 'talk_to_person', description: 'the user wants a person', next: 'handoff' }],
            limits: { toolRounds: 2, turns: 3 },
            turnLimit: 'bye',
            failure: 'sorry',
            ...overrides,
          },
          { id: 'handoff', type: 'message', message: 'Connecting you to a person.', next: 'end' },
          { id: 'bye', type: 'message', message: 'That is all I can do here.' },
          { id: 'sorry', type: 'message', message: 'Something went wrong.' },
          { id: 'end', type: 'end' },
        ],
      },
    ],
  };
}

const traceOf = (frames: Record<string, unknown>[]) => frames as unknown as Trace[];
const toolTraces = (traces: Trace[]) => traces.filter((t) => t.type === 'debug' && t.payload.type === 'tool');
const completionText = (traces: Trace[]) =>
  traces
    .filter((t) => t.type === 'completion' && t.payload.state === 'content')
    .map((t) => t.payload.content)
    .join('');

describeEachDatabase('agent step', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  let api: Awaited<ReturnType<typeof startToolApi>>;
  let project: TestProject;
  /** Holds the `price` answers until released (a slow tool), and the `stock` ones until both arrived. */
  let releasePrice: () => void = () => {};
  let priceGate: Promise<void> = Promise.resolve();
  const apiRequests: { url: string; headers: IncomingMessage['headers'] }[] = [];

  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    api = await startToolApi((req, _body, res) => {
      apiRequests.push({ url: req.url ?? '', headers: req.headers });
      if (req.url?.startsWith('/stock/')) {
        const sku = req.url.slice('/stock/'.length);
        if (sku === 'missing') return json(res, 404, { error: 'no such product' });
        return json(res, 200, { sku, inStock: 7 });
      }
      if (req.url?.startsWith('/price/')) {
        void priceGate.then(() => json(res, 200, { price: 19.5 }));
        return;
      }
      json(res, 404, {});
    });
    app = await startTestApp(provider, {
      env: { LLM_BASE_URL: fake.baseUrl, LLM_DEFAULT_MODEL: 'gpt-agent', LLM_MAX_RETRIES: '0' },
    });
    project = await app.createProject({ scopes: ['admin', 'runtime:interact', 'analytics:read', 'transcripts:read'] });
    await publish(app, project.projectID, program(api.url));
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await api?.close();
  });
  beforeEach(() => {
    fake.reset();
    apiRequests.length = 0;
    priceGate = Promise.resolve();
  });

  const turn = async (userID: string, action: unknown, opts: { onFrame?: (f: SseFrame) => void } = {}) => {
    const { reading } = await stream(app, v2StreamPath(project.projectID, userID), {
      key: project.apiKey,
      body: { action },
      query: { completion_events: 'true' },
      onFrame: opts.onFrame,
    });
    return traceOf(dataOf(reading, 'trace'));
  };

  async function usage(name: string) {
    const res = await app.http('POST', '/v2/query/usage', {
      key: project.apiKey,
      body: { data: { name, filter: { projectID: project.projectID } } },
    });
    expect(res.status, res.text).toBe(200);
    return res.body.result.items as Record<string, unknown>[];
  }

  it('greets, calls a function tool and uses its result in the streamed answer', async () => {
    const launch = await turn('u-function', { type: 'launch' });
    expect(launch).toContainEqual(
      expect.objectContaining({
        type: 'text',
        payload: expect.objectContaining({ message: 'Hi! I am the Acme assistant.' }),
      }),
    );
    expect(fake.requests).toHaveLength(0);

    fake.script(
      {
        type: 'chat',
        chunks: ['Let me', ' check.'],
        toolCalls: [{ name: 'lookup_order', arguments: '{"id": 42}' }],
      },
      { type: 'chat', chunks: ['Order 42', ' has shipped.'] },
    );
    const traces = await turn('u-function', { type: 'text', payload: 'Where is order 42?' });
    expect(completionText(traces)).toBe('Let me check.Order 42 has shipped.');
    const tools = toolTraces(traces);
    expect(tools.map((t) => (t.payload.tool as Record<string, unknown>).event)).toEqual(['call', 'result']);
    expect(tools[1]!.payload.tool).toMatchObject({ name: 'lookup_order', success: true });

    // The model saw the instructions, the greeting, the user and then the tool's result.
    const [first, second] = fake.requests;
    expect(first!.body.messages[0]).toEqual({
      role: 'system',
      content: 'You help customers of Acme with their orders.',
    });
    expect(first!.body.messages.slice(1)).toEqual([
      { role: 'assistant', content: 'Hi! I am the Acme assistant.' },
      { role: 'user', content: 'Where is order 42?' },
    ]);
    expect(first!.body.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual([
      'lookup_order',
      'stock',
      'price',
      'search_help',
      'talk_to_person',
    ]);
    const toolMessage = second!.body.messages.at(-1);
    expect(toolMessage.role).toBe('tool');
    expect(JSON.parse(toolMessage.content)).toEqual({ id: 42, status: 'shipped', shop: 'Acme' });
    expect(toolMessage.tool_call_id).toBe(second!.body.messages.at(-2).tool_calls[0].id);

    // The next turn carries the conversation so far.
    fake.script({ type: 'chat', chunks: ['You are welcome.'] });
    await turn('u-function', { type: 'text', payload: 'Thanks' });
    const history = fake.requests.at(-1)!.body.messages.map((m: { role: string }) => m.role);
    expect(history).toEqual(['system', 'assistant', 'user', 'assistant', 'tool', 'assistant', 'user']);

    const functions = await usage('function_usage');
    expect(functions).toContainEqual(
      expect.objectContaining({
        functionID: 'assistant:lookup_order',
        name: 'lookup_order',
        count: 1,
        successCount: 1,
      }),
    );
    const credit = await usage('credit_usage');
    expect(credit).toContainEqual(
      expect.objectContaining({ type: 'llm-input', model: 'gpt-agent', diagramID: 'main', nodeID: 'assistant' }),
    );
  });

  it('runs several calls of one reply in parallel; bad arguments and failing tools go back to the model', async () => {
    await turn('u-parallel', { type: 'launch' });
    // `price` answers only once released, after `stock` has answered: the calls must run side by side.
    priceGate = new Promise((resolve) => {
      releasePrice = resolve;
    });
    const stockAnswered = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (apiRequests.some((r) => r.url.startsWith('/stock/'))) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    void stockAnswered.then(() => releasePrice());
    fake.script(
      {
        type: 'chat',
        toolCalls: [
          { name: 'price', arguments: '{"sku":"A1"}' },
          { name: 'stock', arguments: '{"sku":"A1"}' },
          { name: 'lookup_order', arguments: '{"id": "forty' },
          { name: 'lookup_order', arguments: '{"id": "x"}' },
          { name: 'lookup_order', arguments: '{"id": 13}' },
          { name: 'stock', arguments: '{"sku":"missing"}' },
          { name: 'no_such_tool', arguments: '{}' },
        ],
        interleaveToolCalls: true,
      },
      { type: 'chat', chunks: ['A1 costs 19.5 and 7 are in stock.'] },
    );
    const traces = await turn('u-parallel', { type: 'text', payload: 'Price and stock of A1?' });
    expect(completionText(traces)).toBe('A1 costs 19.5 and 7 are in stock.');
    const events = toolTraces(traces).map((t) => t.payload.tool as Record<string, unknown>);
    // Every call, then every result, in the reply's order.
    expect(events.map((e) => `${e.event}:${e.name}`)).toEqual([
      'call:price',
      'call:stock',
      'call:lookup_order',
      'call:lookup_order',
      'call:lookup_order',
      'call:stock',
      'call:no_such_tool',
      'result:price',
      'result:stock',
      'result:lookup_order',
      'result:lookup_order',
      'result:lookup_order',
      'result:stock',
      'result:no_such_tool',
    ]);
    expect(events.slice(7).map((e) => e.success)).toEqual([true, true, false, false, false, false, false]);

    const results = fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
    const contents = results.map((m: { content: string }) => JSON.parse(m.content));
    expect(contents[0]).toEqual({ price: 19.5 });
    expect(contents[1]).toEqual({ sku: 'A1', inStock: 7 });
    expect(contents[2].error).toMatch(/not valid JSON/);
    expect(contents[3].error).toMatch(/do not fit.*\/id must be integer/);
    expect(contents[4].error).toMatch(/order database unavailable/);
    expect(contents[5]).toMatchObject({ error: 'status 404' });
    expect(contents[6].error).toMatch(/no tool named "no_such_tool"/);
    // The user saw no error: only the answer.
    expect(traces.some((t) => t.type === 'debug' && t.payload.type === 'error')).toBe(false);
    expect(apiRequests.find((r) => r.url === '/stock/A1')?.headers['x-shop']).toBe('Acme');

    const apiCalls = await usage('api_calls');
    expect(apiCalls).toContainEqual(
      expect.objectContaining({ apiToolID: 'assistant:price', name: 'price', successCount: 1 }),
    );
    expect(apiCalls).toContainEqual(
      expect.objectContaining({ apiToolID: 'assistant:stock', name: 'stock', count: 2, successCount: 1 }),
    );
  });

  it('streams the text before a slow tool call to the client before the call finishes', async () => {
    await turn('u-slow', { type: 'launch' });
    priceGate = new Promise((resolve) => {
      releasePrice = resolve;
    });
    fake.script(
      { type: 'chat', chunks: ['One moment…'], toolCalls: [{ name: 'price', arguments: '{"sku":"B2"}' }] },
      { type: 'chat', chunks: ['B2 costs 19.5.'] },
    );
    // The price API answers only once the client has the text that came before the call.
    const traces = await turn(
      'u-slow',
      { type: 'text', payload: 'Price of B2?' },
      {
        onFrame: (frame) => {
          if (frame.data?.includes('One moment')) releasePrice();
        },
      },
    );
    const result = toolTraces(traces).find((t) => (t.payload.tool as { event: string }).event === 'result');
    expect(result?.payload.tool).toMatchObject({ name: 'price', success: true });
    expect(completionText(traces)).toBe('One moment…B2 costs 19.5.');
  });

  it('saves the turn when the client disconnects while a tool runs', async () => {
    await turn('u-gone', { type: 'launch' });
    priceGate = new Promise((resolve) => {
      releasePrice = resolve;
    });
    fake.script(
      { type: 'chat', chunks: ['Checking the price…'], toolCalls: [{ name: 'price', arguments: '{"sku":"C3"}' }] },
      { type: 'chat', chunks: ['C3 costs 19.5.'] },
    );
    const controller = new AbortController();
    await stream(app, v2StreamPath(project.projectID, 'u-gone'), {
      key: project.apiKey,
      body: { action: { type: 'text', payload: 'Price of C3?' } },
      query: { completion_events: 'true' },
      signal: controller.signal,
      onFrame: (frame) => {
        if (!frame.data?.includes('Checking the price')) return;
        // The client leaves before the tool answers; the tool answers afterwards.
        controller.abort();
        releasePrice();
      },
    }).catch(() => {});
    const memory = async () => {
      const res = await app.http('GET', `/v2/project/${project.projectID}/user/u-gone/state`, { key: project.apiKey });
      const frame = (res.body as { stack?: { storage: Record<string, { history?: { content: string }[] }> }[] })
        .stack?.[0];
      return frame?.storage['agent:assistant']?.history?.map((m) => m.content) ?? [];
    };
    await expect.poll(memory, { timeout: 15_000 }).toContain('C3 costs 19.5.');
    expect(await memory()).toEqual([
      'Hi! I am the Acme assistant.',
      'Price of C3?',
      'Checking the price…',
      JSON.stringify({ price: 19.5 }),
      'C3 costs 19.5.',
    ]);
  });

  it('leaves by an exit to the handoff path and counts one agent invocation', async () => {
    await turn('u-exit', { type: 'launch' });
    fake.script({
      type: 'chat',
      chunks: ['Sure, one moment.'],
      toolCalls: [{ name: 'talk_to_person', arguments: '{"reason":"asked for a human"}' }],
    });
    const traces = await turn('u-exit', { type: 'text', payload: 'I want a human' });
    expect(traces).toContainEqual(
      expect.objectContaining({ type: 'path', payload: { path: 'agent:exit:talk_to_person' } }),
    );
    expect(traces).toContainEqual(
      expect.objectContaining({
        type: 'text',
        payload: expect.objectContaining({ message: 'Connecting you to a person.' }),
      }),
    );
    expect(traces.at(-1)?.type).toBe('end');
    const agents = await usage('agent_usage');
    const agentID = (agents.find((a) => a.name === 'Order agent') as { agentID: string }).agentID;
    expect(agents).toContainEqual(
      expect.objectContaining({ agentID: `${agentID}:assistant`, name: 'Order assistant', successCount: 1 }),
    );
  });

  it('counts an agent invocation when the step is entered, and its success when it is left cleanly', async () => {
    const own = await app.createProject({ scopes: ['admin', 'runtime:interact', 'analytics:read'] });
    await publish(app, own.projectID, program(api.url));
    const ownTurn = async (userID: string, action: unknown) => {
      const { reading } = await stream(app, v2StreamPath(own.projectID, userID), {
        key: own.apiKey,
        body: { action },
      });
      return traceOf(dataOf(reading, 'trace'));
    };
    const stepUsage = async () => {
      const res = await app.http('POST', '/v2/query/usage', {
        key: own.apiKey,
        body: { data: { name: 'agent_usage', filter: { projectID: own.projectID } } },
      });
      expect(res.status, res.text).toBe(200);
      const items = res.body.result.items as { agentID: string; name: string; count: number; successCount: number }[];
      const step = items.filter((i) => i.agentID.endsWith(':assistant'));
      return {
        count: step.reduce((n, i) => n + i.count, 0),
        successCount: step.reduce((n, i) => n + i.successCount, 0),
        names: [...new Set(step.map((i) => i.name))],
      };
    };

    // Entered and still talking: one invocation, no success yet.
    await ownTurn('u-running', { type: 'launch' });
    await expect
      .poll(stepUsage, { timeout: 10_000 })
      .toEqual({ count: 1, successCount: 0, names: ['Order assistant'] });
    fake.script({ type: 'chat', chunks: ['Still here.'] });
    await ownTurn('u-running', { type: 'text', payload: 'Hello' });

    // Left by an exit: its success is counted, the invocation is not counted again.
    await ownTurn('u-leaves', { type: 'launch' });
    fake.script({ type: 'chat', toolCalls: [{ name: 'talk_to_person', arguments: '{"reason":"human"}' }] });
    await ownTurn('u-leaves', { type: 'text', payload: 'A human please' });
    await expect
      .poll(stepUsage, { timeout: 10_000 })
      .toEqual({ count: 2, successCount: 1, names: ['Order assistant'] });

    // Left by the failure path: counted, not a success.
    await ownTurn('u-fails', { type: 'launch' });
    fake.script({ type: 'error', status: 400, message: 'bad request' });
    const failed = await ownTurn('u-fails', { type: 'text', payload: 'Hello?' });
    expect(failed).toContainEqual(expect.objectContaining({ type: 'path', payload: { path: 'agent:failure' } }));
    await expect
      .poll(stepUsage, { timeout: 10_000 })
      .toEqual({ count: 3, successCount: 1, names: ['Order assistant'] });

    // The program's own per-turn count is unchanged beside it: one per turn (DECISIONS §4).
    const res = await app.http('POST', '/v2/query/usage', {
      key: own.apiKey,
      body: { data: { name: 'agent_usage', filter: { projectID: own.projectID } } },
    });
    const programItems = (res.body.result.items as { agentID: string; count: number }[]).filter(
      (i) => !i.agentID.includes(':'),
    );
    expect(programItems.reduce((n, i) => n + i.count, 0)).toBe(6);
  });

  it('stops offering tools after the round limit and has the model answer', async () => {
    await turn('u-rounds', { type: 'launch' });
    fake.script(
      { type: 'chat', toolCalls: [{ name: 'lookup_order', arguments: '{"id":1}' }] },
      { type: 'chat', toolCalls: [{ name: 'lookup_order', arguments: '{"id":2}' }] },
      { type: 'chat', chunks: ['Orders 1 and 2 are packing.'] },
    );
    const traces = await turn('u-rounds', { type: 'text', payload: 'Orders 1 and 2?' });
    expect(fake.requests).toHaveLength(3);
    expect(fake.requests[0]!.body.tools).toBeDefined();
    expect(fake.requests[1]!.body.tools).toBeDefined();
    expect(fake.requests[2]!.body.tools).toBeUndefined();
    expect(traces).toContainEqual(
      expect.objectContaining({
        type: 'debug',
        payload: expect.objectContaining({ type: 'tool', message: expect.stringContaining('round limit (2)') }),
      }),
    );
    expect(completionText(traces)).toBe('Orders 1 and 2 are packing.');
  });

  it('leaves by the turn limit after its last turn, and by the failure path when the model fails', async () => {
    await turn('u-turns', { type: 'launch' });
    for (const n of [1, 2]) {
      fake.script({ type: 'chat', chunks: [`Answer ${n}.`] });
      const traces = await turn('u-turns', { type: 'text', payload: `Question ${n}` });
      expect(traces.some((t) => t.type === 'path')).toBe(false);
    }
    fake.script({ type: 'chat', chunks: ['Answer 3.'] });
    const last = await turn('u-turns', { type: 'text', payload: 'Question 3' });
    expect(completionText(last)).toBe('Answer 3.');
    expect(last).toContainEqual(expect.objectContaining({ type: 'path', payload: { path: 'agent:turn-limit' } }));
    expect(last).toContainEqual(
      expect.objectContaining({
        type: 'text',
        payload: expect.objectContaining({ message: 'That is all I can do here.' }),
      }),
    );

    await turn('u-fail', { type: 'launch' });
    fake.script({ type: 'error', status: 400, message: 'bad request' });
    const failed = await turn('u-fail', { type: 'text', payload: 'Hello?' });
    expect(failed).toContainEqual(expect.objectContaining({ type: 'path', payload: { path: 'agent:failure' } }));
    expect(failed).toContainEqual(
      expect.objectContaining({ type: 'text', payload: expect.objectContaining({ message: 'Something went wrong.' }) }),
    );
  });

  it('refuses at publish tools with bad schemas, duplicate names and unknown placeholders, and code that does not compile', async () => {
    const bad = program(api.url, {
      tools: [
        { type: 'function', name: 'f', description: 'd', parameters: { type: 'string' }, code: 'return 1' },
        { type: 'function', name: 'g', description: 'd', parameters: { type: 'object' }, code: 'return (' },
        {
          type: 'api',
          name: 'f',
          description: 'd',
          parameters: { type: 'object', properties: { a: { type: 'nonsense' } } },
          method: 'GET',
          url: 'https://example.com/{nope}',
        },
      ],
    });
    const res = await app.gql('mutation($input: PublishAgentInput!) { publishAgent(input: $input) { created } }', {
      input: { projectID: project.projectID, program: bad },
    });
    const details = res.body.errors[0].extensions.details as { path: string; message: string }[];
    const paths = details.map((d) => d.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'program.flows.0.steps.0.tools.0.parameters',
        'program.flows.0.steps.0.tools.2.name',
        'program.flows.0.steps.0.tools.2.parameters',
        'program.flows.0.steps.0.tools.2.url',
      ]),
    );
  });
});

describeEachDatabase('agent step with the built-in provider', (provider) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(provider);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('says plainly that it needs a model and takes its failure path', async () => {
    const project = await app.createProject();
    await publish(app, project.projectID, program('http://127.0.0.1:9'));
    const path = v2StreamPath(project.projectID, 'u');
    await stream(app, path, { key: project.apiKey, body: { action: { type: 'launch' } } });
    const { reading } = await stream(app, path, {
      key: project.apiKey,
      body: { action: { type: 'text', payload: 'hi' } },
    });
    const traces = traceOf(dataOf(reading, 'trace'));
    expect(traces).toContainEqual(
      expect.objectContaining({
        type: 'debug',
        payload: expect.objectContaining({ type: 'error', message: expect.stringContaining('needs a language model') }),
      }),
    );
    expect(traces).toContainEqual(expect.objectContaining({ type: 'path', payload: { path: 'agent:failure' } }));
  });
});
