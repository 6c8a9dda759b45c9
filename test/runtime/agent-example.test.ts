import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { startTestApp, type TestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, stream, v2StreamPath } from '../helpers/runtime';
import { dataOf } from '../helpers/sse';

/**
 * The agent desk example of the README: published, its MCP server registered, a help-center
 * document uploaded, and a conversation in which the model (the fake server, scripting OpenAI's
 * streamed tool calls) uses each kind of tool and then hands off. The transcript shows every
 * tool call; usage counts each kind.
 */

type Trace = { type: string; payload: Record<string, unknown> };

describeEachDatabase('the agent desk example', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  let services: ChildProcess;
  let servicesUrl = '';

  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    services = spawn(process.execPath, [join(projectRoot, 'examples/agent-desk/services.mjs'), '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      cwd: projectRoot,
    });
    const [line] = (await once(services.stdout!, 'data')) as [Buffer];
    servicesUrl = /http:\/\/\S+/.exec(line.toString())![0];
    app = await startTestApp(provider, {
      env: { LLM_BASE_URL: fake.baseUrl, LLM_DEFAULT_MODEL: 'gpt-desk', LLM_MAX_RETRIES: '0' },
    });
  });
  afterAll(async () => {
    services?.kill();
    await app?.close();
    await fake?.close();
  });

  it('uses a function, an API tool, the knowledge base and an MCP server, then hands off', async () => {
    const p = await app.createProject({
      scopes: ['admin', 'runtime:interact', 'kb:read', 'kb:write', 'transcripts:read', 'analytics:read'],
    });
    const program = JSON.parse(readFileSync(join(projectRoot, 'examples/agent-desk/agent.json'), 'utf8'));
    const published = await publish(app, p.projectID, program);
    expect(published.warnings).toEqual([]);
    const integration = await app.gql(
      `mutation($input: CreateIntegrationInput!) { createIntegration(input: $input) { id } }`,
      {
        input: {
          projectID: p.projectID,
          name: 'warehouse',
          url: `${servicesUrl}/mcp`,
          headers: { Authorization: 'Bearer warehouse-token' },
        },
      },
      p.apiKey,
    );
    expect(integration.body.errors).toBeUndefined();
    const upload = await app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: p.apiKey,
      query: { wait: 'true' },
      body: {
        data: {
          name: 'help center',
          schema: { searchableFields: ['text'] },
          items: [
            { text: 'Returns: furniture can be returned within 30 days of delivery.' },
            { text: 'Warranty: every chair has a two year warranty.' },
          ],
        },
      },
    });
    expect(upload.status, upload.text).toBe(200);

    const path = v2StreamPath(p.projectID, 'bob');
    const say = async (action: unknown, extra: Record<string, unknown> = {}) => {
      const { reading } = await stream(app, path, {
        key: p.apiKey,
        body: { action, ...extra },
        query: { completion_events: 'true' },
      });
      return dataOf(reading, 'trace') as unknown as Trace[];
    };

    const hello = await say({ type: 'launch' }, { variables: { desk_api: servicesUrl } });
    expect(hello).toContainEqual(
      expect.objectContaining({
        type: 'text',
        payload: expect.objectContaining({
          message: 'Hi! I can check orders, stock, shipping costs and our policies.',
        }),
      }),
    );

    fake.script(
      {
        type: 'chat',
        chunks: ['Let me check all of that.'],
        toolCalls: [
          { name: 'order_status', arguments: '{"id":"12345"}' },
          { name: 'warehouse__stock_level', arguments: '{"product":"chair"}' },
          { name: 'shipping_cost', arguments: '{"kg":5}' },
          { name: 'search_help', arguments: '{"query":"returned within days"}' },
        ],
      },
      { type: 'chat', chunks: ['Order 12345 has shipped; 42 chairs are in stock; shipping is 8.5 EUR.'] },
    );
    const answer = await say({ type: 'text', payload: 'Order 12345? Chairs in stock? Shipping for 5 kg? Returns?' });
    const results = fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
    expect(JSON.parse(results[0].content)).toMatchObject({ id: '12345', status: 'shipped' });
    expect(JSON.parse(results[1].content)).toEqual({ product: 'chair', units: 42 });
    expect(JSON.parse(results[2].content)).toEqual({ kg: 5, cost: 8.5, currency: 'EUR' });
    expect(JSON.parse(results[3].content).chunks[0].content).toContain('30 days');
    const toolEvents = answer
      .filter((t) => t.type === 'debug' && t.payload.type === 'tool')
      .map((t) => t.payload.tool as { event: string; name: string; success?: boolean });
    expect(toolEvents.filter((e) => e.event === 'result').every((e) => e.success)).toBe(true);

    fake.script({ type: 'chat', toolCalls: [{ name: 'talk_to_person', arguments: '{}' }] });
    const handoff = await say({ type: 'text', payload: 'I want to talk to a person' });
    expect(handoff.map((t) => t.type)).toContain('live-agent-handoff');

    // The transcript has every tool call and result, in order.
    const search = await app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, body: {} });
    expect(search.status, search.text).toBe(200);
    const transcriptID = (search.body as { transcripts: { id: string }[] }).transcripts[0]!.id;
    const transcript = await app.http('GET', `/v1/transcript/${transcriptID}`, { key: p.apiKey });
    const logged = (transcript.body as { transcript: { logs: { type: string; data: Trace }[] } }).transcript.logs
      .filter((l) => l.type === 'trace' && l.data.type === 'debug' && l.data.payload.type === 'tool')
      .map((l) => {
        const tool = l.data.payload.tool as { event: string; name: string };
        return `${tool.event}:${tool.name}`;
      });
    expect(logged).toEqual([
      'call:order_status',
      'call:warehouse__stock_level',
      'call:shipping_cost',
      'call:search_help',
      'result:order_status',
      'result:warehouse__stock_level',
      'result:shipping_cost',
      'result:search_help',
      'call:talk_to_person',
      'result:talk_to_person',
    ]);

    const usage = async (name: string) => {
      const res = await app.http('POST', '/v2/query/usage', {
        key: p.apiKey,
        body: { data: { name, filter: { projectID: p.projectID } } },
      });
      return res.body.result.items as Record<string, unknown>[];
    };
    expect(await usage('integrations')).toEqual([
      expect.objectContaining({ integrationToolName: 'warehouse.stock_level', count: 1, successCount: 1 }),
    ]);
    expect(await usage('function_usage')).toEqual([
      expect.objectContaining({ functionID: 'assistant:shipping_cost', count: 1, successCount: 1 }),
    ]);
    expect(await usage('api_calls')).toEqual([
      expect.objectContaining({ apiToolID: 'assistant:order_status', count: 1, successCount: 1 }),
    ]);
    expect((await usage('kb_documents')).length).toBe(1);
    expect(await usage('agent_usage')).toContainEqual(
      expect.objectContaining({
        agentID: `${published.agent.id}:assistant`,
        name: 'Desk assistant',
        count: 1,
        successCount: 1,
      }),
    );
  }, 120_000);
});
