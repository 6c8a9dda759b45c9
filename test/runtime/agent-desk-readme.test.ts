import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { createTestDatabase, databaseLanes } from '../helpers/lanes';
import { type ServeProcess, startServeProcess, waitUntilReady } from '../helpers/serve-process';
import { dataOf, readSse } from '../helpers/sse';

/**
 * The README's "An agent that uses tools" section, run as a reader runs it: `parley project create`
 * and `parley agent publish` on the command line, `examples/agent-desk/services.mjs` as its own
 * process, `parley serve` with the model settings the README names (the fake OpenAI-compatible
 * server stands in for the model), then the README's HTTP calls — the MCP server registered with
 * the operator's token, the help-center file uploaded, the conversation over the v2 stream — and the
 * usage that shows each kind of tool. test/runtime/agent-example.test.ts drives the same example
 * in-process on both databases; the CLI path here runs on SQLite.
 */

const run = promisify(execFile);
const parley = join(projectRoot, 'bin/parley.js');
const sqliteOnly = databaseLanes().includes('sqlite') ? describe : describe.skip;

type Trace = { type: string; payload: Record<string, unknown> };

sqliteOnly('the agent desk, as the README runs it', () => {
  const adminToken = `readme-admin-${randomBytes(8).toString('hex')}`;
  let database: ScratchDatabase;
  let fake: FakeOpenAiServer;
  let services: ChildProcess | undefined;
  let server: ServeProcess | undefined;
  let servicesUrl = '';

  const cli = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, [parley, ...args], {
      cwd: projectRoot,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: database.url, LOG_LEVEL: 'warn' },
      timeout: 90_000,
    });
    return JSON.parse(stdout.trim());
  };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    fake = await startFakeOpenAiServer();
  });
  afterAll(async () => {
    services?.kill();
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await Promise.race([server.exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
    await fake?.close();
    await database?.drop();
  });

  it('the README shows the commands this test runs', () => {
    const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('## An agent that uses tools'),
      readme.indexOf('## Ask your documents'),
    );
    for (const command of [
      'npx parley agent publish examples/agent-desk/agent.json --project "$PROJECT_ID"',
      'node examples/agent-desk/services.mjs',
      'LLM_BASE_URL=',
      'LLM_API_KEY=',
      'LLM_DEFAULT_MODEL=gpt-4o-mini',
      'INTEGRATION_SECRETS_KEY=',
      'ADMIN_TOKEN=',
      'RUNTIME_ALLOW_PRIVATE_URLS=true npm start',
      'createIntegration(input: $i)',
      '"name": "warehouse"',
      '"headers": {"Authorization": "Bearer warehouse-token"}',
      '/v1/knowledge-base/docs/upload?wait=true',
      '-F file=@examples/agent-desk/returns-policy.txt',
      '/user/bob/interact/stream?completion_events=true',
      '"variables": {"desk_api": ',
      '/v2/query/usage',
    ]) {
      expect(section).toContain(command);
    }
  });

  it('publishes with the CLI, registers the MCP server, uploads the policy and talks; each kind of tool is used and counted', async () => {
    // The quick start's project (its key has every scope but admin).
    const project = await cli('project', 'create', '--name', 'agent desk');
    const projectID: string = project.projectID;
    const apiKey: string = project.apiKey;

    // npx parley agent publish examples/agent-desk/agent.json --project <projectID>
    const published = await cli('agent', 'publish', 'examples/agent-desk/agent.json', '--project', projectID);
    expect(published).toMatchObject({ created: true, warnings: [] });

    // node examples/agent-desk/services.mjs &  — on a free port here (the README says how).
    services = spawn(process.execPath, ['examples/agent-desk/services.mjs', '0'], {
      cwd: projectRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(services.stdout!, 'data')) as [Buffer];
    servicesUrl = /http:\/\/\S+/.exec(line.toString())![0];

    // LLM_BASE_URL=… LLM_API_KEY=… LLM_DEFAULT_MODEL=… INTEGRATION_SECRETS_KEY=… RUNTIME_ALLOW_PRIVATE_URLS=true npm start
    server = await startServeProcess({
      DATABASE_URL: database.url,
      ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      LLM_BASE_URL: fake.baseUrl,
      LLM_API_KEY: 'sk-readme',
      LLM_DEFAULT_MODEL: 'gpt-4o-mini',
      LLM_MAX_RETRIES: '0',
      INTEGRATION_SECRETS_KEY: randomBytes(32).toString('hex'),
      RUNTIME_ALLOW_PRIVATE_URLS: 'true',
    });
    await waitUntilReady(server, '/readyz', 120_000);
    const base = server.url;

    // Register the MCP server with the operator's token.
    const registered = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { authorization: adminToken, 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'mutation($i: CreateIntegrationInput!) { createIntegration(input: $i) { id } }',
        variables: {
          i: {
            projectID,
            name: 'warehouse',
            url: `${servicesUrl}/mcp`,
            headers: { Authorization: 'Bearer warehouse-token' },
          },
        },
      }),
    });
    const registeredBody = (await registered.json()) as {
      data?: { createIntegration: { id: string } };
      errors?: unknown;
    };
    expect(registeredBody.errors).toBeUndefined();
    expect(registeredBody.data?.createIntegration.id).toEqual(expect.any(String));

    // curl -F file=@examples/agent-desk/returns-policy.txt …/v1/knowledge-base/docs/upload?wait=true
    const form = new FormData();
    const policy = readFileSync(join(projectRoot, 'examples/agent-desk/returns-policy.txt'));
    form.append('file', new Blob([policy], { type: 'text/plain' }), 'returns-policy.txt');
    const uploaded = await fetch(`${base}/v1/knowledge-base/docs/upload?wait=true`, {
      method: 'POST',
      headers: { authorization: apiKey },
      body: form,
    });
    expect(uploaded.status, await uploaded.clone().text()).toBe(200);
    // The original's document shape (docs/knowledge-base.md): `data` is an array, `status` a string.
    const uploadedDocuments = ((await uploaded.json()) as { data: { documentID: string; status: string }[] }).data;
    expect(uploadedDocuments).toHaveLength(1);
    const document = uploadedDocuments[0] as { documentID: string; status: string };
    expect(document.status).toBe('SUCCESS');

    const say = async (body: unknown) => {
      const res = await fetch(`${base}/v2/project/${projectID}/user/bob/interact/stream?completion_events=true`, {
        method: 'POST',
        headers: { authorization: apiKey, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      return dataOf(await readSse(res), 'trace') as unknown as Trace[];
    };

    const hello = await say({ action: { type: 'launch' }, variables: { desk_api: servicesUrl } });
    expect(hello).toContainEqual(
      expect.objectContaining({
        type: 'text',
        payload: expect.objectContaining({
          message: 'Hi! I can check orders, stock, shipping costs and our policies.',
        }),
      }),
    );

    // The model asks for every kind of tool in one reply, then answers from the results.
    fake.script(
      {
        type: 'chat',
        chunks: ['Let me check.'],
        toolCalls: [
          { name: 'order_status', arguments: '{"id":"12345"}' },
          { name: 'warehouse__stock_level', arguments: '{"product":"chair"}' },
          { name: 'shipping_cost', arguments: '{"kg":5}' },
          { name: 'search_help', arguments: '{"query":"how many days to return furniture"}' },
        ],
      },
      {
        type: 'chat',
        chunks: [
          'Order 12345 has shipped, ',
          '42 chairs are in stock, ',
          'shipping 5 kg costs 8.5 EUR ',
          'and returns are free within 30 days.',
        ],
      },
    );
    const requestsBefore = fake.requests.length;
    const answer = await say({
      action: { type: 'text', payload: 'Is order 12345 shipped, and do you have chairs in stock?' },
    });

    // The model was called with the README's model setting and the four kinds of tools described.
    expect(fake.requests[requestsBefore]!.headers.authorization).toBe('Bearer sk-readme');
    const first = fake.requests[requestsBefore]!.body;
    expect(first.model).toBe('gpt-4o-mini');
    expect(first.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(
      expect.arrayContaining([
        'shipping_cost',
        'order_status',
        'search_help',
        'warehouse__stock_level',
        'talk_to_person',
      ]),
    );
    // Each tool's real result went back to the model.
    const results = fake.requests[requestsBefore + 1]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
    expect(JSON.parse(results[0].content)).toMatchObject({ id: '12345', status: 'shipped', eta: '2026-12-02' });
    expect(JSON.parse(results[1].content)).toEqual({ product: 'chair', units: 42 });
    expect(JSON.parse(results[2].content)).toEqual({ kg: 5, cost: 8.5, currency: 'EUR' });
    expect(JSON.parse(results[3].content).chunks[0].content).toContain('30 days');

    // The stream shows each call and its result as debug traces, and the answer as completion traces.
    const tools = answer
      .filter((t) => t.type === 'debug' && t.payload.type === 'tool')
      .map((t) => t.payload.tool as { event: string; name: string; success?: boolean });
    expect(tools.filter((e) => e.event === 'result').map((e) => [e.name, e.success])).toEqual([
      ['order_status', true],
      ['warehouse__stock_level', true],
      ['shipping_cost', true],
      ['search_help', true],
    ]);
    const completion = answer
      .filter((t) => t.type === 'completion' && t.payload.state === 'content')
      .map((t) => t.payload.content)
      .join('');
    expect(completion).toContain('Order 12345 has shipped, 42 chairs are in stock, shipping 5 kg costs 8.5 EUR');

    // "the user wants a person": the exit leads to the handoff step.
    fake.script({ type: 'chat', toolCalls: [{ name: 'talk_to_person', arguments: '{}' }] });
    const handoff = await say({ action: { type: 'text', payload: 'I want to talk to a person' } });
    expect(handoff).toContainEqual(
      expect.objectContaining({ type: 'live-agent-handoff', payload: expect.objectContaining({ queue: 'support' }) }),
    );

    // Usage shows each kind of tool (the README's usage query).
    const usage = async (name: string) => {
      const res = await fetch(`${base}/v2/query/usage`, {
        method: 'POST',
        headers: { authorization: apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { name, filter: { projectID } } }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { result: { items: Record<string, unknown>[] } }).result.items;
    };
    await expect
      .poll(() => usage('integrations'), { timeout: 30_000, interval: 250 })
      .toEqual([expect.objectContaining({ integrationToolName: 'warehouse.stock_level', count: 1, successCount: 1 })]);
    expect(await usage('function_usage')).toEqual([
      expect.objectContaining({
        functionID: 'assistant:shipping_cost',
        name: 'shipping_cost',
        count: 1,
        successCount: 1,
      }),
    ]);
    expect(await usage('api_calls')).toEqual([
      expect.objectContaining({ apiToolID: 'assistant:order_status', name: 'order_status', count: 1, successCount: 1 }),
    ]);
    expect(await usage('kb_documents')).toEqual([expect.objectContaining({ documentID: document.documentID })]);
    // The agent step, entered once and left by its exit.
    expect(await usage('agent_usage')).toContainEqual(
      expect.objectContaining({ name: 'Desk assistant', count: 1, successCount: 1 }),
    );
  }, 300_000);
});
