import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, stream, v2StreamPath } from '../helpers/runtime';
import { dataOf } from '../helpers/sse';

/**
 * MCP servers as integrations: a real MCP server built with the official SDK, over Streamable
 * HTTP on loopback, registered through GraphQL (headers readable only by admin), its tools listed
 * and called by an agent step, usage under `integrations`, and the private-address guard.
 */

type Trace = { type: string; payload: Record<string, unknown> };

/** A stateless MCP server (a new server and transport per request) that checks a bearer token. */
async function startMcpServer(token: string) {
  const seenAuth: (string | undefined)[] = [];
  /** MCP `initialize` requests received: one per client session Parley opens. */
  const sessions = { initialized: 0 };
  const buildServer = () => {
    const server = new McpServer({ name: 'inventory', version: '1.0.0' });
    server.registerTool(
      'count_items',
      {
        description: 'How many items of a kind are in the warehouse',
        inputSchema: { kind: z.string() },
      },
      async ({ kind }) => ({ content: [{ type: 'text', text: JSON.stringify({ kind, count: kind.length * 10 }) }] }),
    );
    server.registerTool(
      'reserve',
      { description: 'Reserves items (always fails here)', inputSchema: { kind: z.string() } },
      async () => ({ content: [{ type: 'text', text: 'the warehouse is closed' }], isError: true }),
    );
    return server;
  };
  const http: Server = createServer((req, res) => {
    seenAuth.push(req.headers.authorization);
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401).end();
      return;
    }
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', async () => {
      if (raw && (JSON.parse(raw) as { method?: string }).method === 'initialize') sessions.initialized++;
      const server = buildServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, raw ? JSON.parse(raw) : undefined);
    });
  });
  http.listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    seenAuth,
    sessions,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

const agentProgram = (tools: string[] | undefined) => ({
  name: 'Warehouse agent',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      start: 'assistant',
      steps: [
        {
          id: 'assistant',
          type: 'agent',
          instructions: 'You answer questions about the warehouse.',
          tools: [{ type: 'mcp', integration: 'inventory', ...(tools ? { tools } : {}) }],
        },
      ],
    },
  ],
});

const createMutation = `mutation($input: CreateIntegrationInput!) {
  createIntegration(input: $input) { id name url headers headerNames }
}`;

describeEachDatabase('agent step with MCP servers', (provider) => {
  let fake: FakeOpenAiServer;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  let app: TestApp;
  let guarded: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    mcp = await startMcpServer('mcp-secret-token');
    const env = { LLM_BASE_URL: fake.baseUrl, LLM_DEFAULT_MODEL: 'gpt-agent', LLM_MAX_RETRIES: '0' };
    app = await startTestApp(provider, { env });
    guarded = await startTestApp(provider, { env: { ...env, RUNTIME_ALLOW_PRIVATE_URLS: 'false' } });
    project = await app.createProject({ scopes: ['admin', 'runtime:interact', 'analytics:read'] });
  });
  afterAll(async () => {
    await app?.close();
    await guarded?.close();
    await fake?.close();
    await mcp?.close();
  });

  const talk = async (a: TestApp, p: TestProject, userID: string, text: string) => {
    const path = v2StreamPath(p.projectID, userID);
    await stream(a, path, { key: p.apiKey, body: { action: { type: 'launch' } } });
    const { reading } = await stream(a, path, {
      key: p.apiKey,
      body: { action: { type: 'text', payload: text } },
      query: { completion_events: 'true' },
    });
    return dataOf(reading, 'trace') as unknown as Trace[];
  };

  it('registers a server through GraphQL; only admin keys read it back', async () => {
    const created = await app.gql(
      createMutation,
      {
        input: {
          projectID: project.projectID,
          name: 'inventory',
          url: mcp.url,
          headers: { Authorization: 'Bearer mcp-secret-token' },
        },
      },
      project.apiKey,
    );
    expect(created.body.errors).toBeUndefined();
    expect(created.body.data.createIntegration).toMatchObject({
      name: 'inventory',
      headers: { Authorization: 'Bearer mcp-secret-token' },
      headerNames: ['Authorization'],
    });

    const again = await app.gql(
      createMutation,
      { input: { projectID: project.projectID, name: 'inventory', url: mcp.url } },
      project.apiKey,
    );
    expect(again.body.errors[0].extensions.code).toBe('CONFLICT');

    const bad = await app.gql(
      createMutation,
      { input: { projectID: project.projectID, name: 'has space', url: 'ftp://x', headers: { 'bad header': 'x' } } },
      project.apiKey,
    );
    expect(bad.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');

    const reader = await app.createProject({ scopes: ['runtime:interact', 'analytics:read'] });
    const denied = await app.gql(
      'query($p: ID!) { integrations(projectID: $p) { headers } }',
      { p: reader.projectID },
      reader.apiKey,
    );
    expect(denied.body.errors[0].extensions.code).toBe('INSUFFICIENT_SCOPE');
    const listed = await app.gql(
      'query($p: ID!) { integrations(projectID: $p) { name headers } }',
      { p: project.projectID },
      project.apiKey,
    );
    expect(listed.body.data.integrations).toEqual([
      { name: 'inventory', headers: { Authorization: 'Bearer mcp-secret-token' } },
    ]);
  });

  it("lists the server's tools for the model, calls them, and counts them under integrations", async () => {
    await publish(app, project.projectID, agentProgram(undefined));
    fake.reset();
    fake.script(
      {
        type: 'chat',
        toolCalls: [
          { name: 'inventory__count_items', arguments: '{"kind":"chairs"}' },
          { name: 'inventory__reserve', arguments: '{"kind":"chairs"}' },
          { name: 'inventory__count_items', arguments: '{"kind": 5}' },
        ],
      },
      { type: 'chat', chunks: ['There are 60 chairs.'] },
    );
    const traces = await talk(app, project, 'u-mcp', 'How many chairs?');
    const offered = fake.requests[0]!.body.tools.map((t: { function: { name: string } }) => t.function);
    expect(offered.map((f: { name: string }) => f.name)).toEqual(['inventory__count_items', 'inventory__reserve']);
    expect(offered[0].description).toBe('How many items of a kind are in the warehouse');
    expect(offered[0].parameters.properties.kind).toEqual({ type: 'string' });

    const results = fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
    expect(JSON.parse(results[0].content)).toEqual({ kind: 'chairs', count: 60 });
    expect(JSON.parse(results[1].content)).toEqual({ error: 'the warehouse is closed' });
    expect(JSON.parse(results[2].content).error).toMatch(/do not fit/);
    const toolEvents = traces
      .filter((t) => t.type === 'debug' && t.payload.type === 'tool')
      .map((t) => t.payload.tool as { event: string; name: string; success?: boolean });
    expect(toolEvents.filter((e) => e.event === 'result').map((e) => e.success)).toEqual([true, false, false]);
    // The credentials went to the MCP server and nowhere else.
    expect(mcp.seenAuth.every((a) => a === 'Bearer mcp-secret-token')).toBe(true);

    const res = await app.http('POST', '/v2/query/usage', {
      key: project.apiKey,
      body: { data: { name: 'integrations', filter: { projectID: project.projectID } } },
    });
    expect(res.status, res.text).toBe(200);
    const items = res.body.result.items as Record<string, unknown>[];
    expect(items).toContainEqual(
      expect.objectContaining({ integrationToolName: 'inventory.count_items', count: 1, successCount: 1 }),
    );
    expect(items).toContainEqual(
      expect.objectContaining({ integrationToolName: 'inventory.reserve', count: 1, successCount: 0 }),
    );
  });

  it('offers only the tools the step names', async () => {
    await publish(app, project.projectID, agentProgram(['count_items']));
    fake.reset();
    fake.script({ type: 'chat', chunks: ['Ok.'] });
    await talk(app, project, 'u-subset', 'hello');
    expect(fake.requests[0]!.body.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual([
      'inventory__count_items',
    ]);
  });

  it('opens one MCP session for all the turns and conversations of the project (the pool reuses it)', async () => {
    // The listings and calls of the tests above went through one session.
    expect(mcp.sessions.initialized).toBe(1);
    fake.reset();
    fake.script(
      { type: 'chat', toolCalls: [{ name: 'inventory__count_items', arguments: '{"kind":"desks"}' }] },
      { type: 'chat', chunks: ['50 desks.'] },
      { type: 'chat', toolCalls: [{ name: 'inventory__count_items', arguments: '{"kind":"lamps"}' }] },
      { type: 'chat', chunks: ['50 lamps.'] },
    );
    await Promise.all([talk(app, project, 'u-pool-1', 'Desks?'), talk(app, project, 'u-pool-2', 'Lamps?')]);
    expect(fake.requests).toHaveLength(4);
    expect(mcp.sessions.initialized).toBe(1);
  });

  it('refuses a server on a private address unless the runtime allows them; the agent still answers', async () => {
    const p = await guarded.createProject({ scopes: ['admin', 'runtime:interact'] });
    const created = await guarded.gql(
      createMutation,
      { input: { projectID: p.projectID, name: 'inventory', url: mcp.url, headers: {} } },
      p.apiKey,
    );
    expect(created.body.errors).toBeUndefined();
    await publish(guarded, p.projectID, agentProgram(undefined));
    const before = mcp.seenAuth.length;
    fake.reset();
    fake.script({ type: 'chat', chunks: ['I cannot check the warehouse right now.'] });
    const traces = await talk(guarded, p, 'u-guard', 'How many chairs?');
    expect(mcp.seenAuth.length).toBe(before);
    expect(fake.requests[0]!.body.tools).toBeUndefined();
    expect(traces).toContainEqual(
      expect.objectContaining({
        type: 'debug',
        payload: expect.objectContaining({
          type: 'tool',
          message: expect.stringMatching(/inventory.*left out.*private|loopback/i),
        }),
      }),
    );
  });
});
