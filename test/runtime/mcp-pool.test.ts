import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIntegrationPool, type IntegrationPool } from '../../src/runtime/integration-pool';

/**
 * The MCP session pool against a real stateful MCP server (official SDK, Streamable HTTP on
 * loopback) that counts the sessions it initialises: sessions are reused across calls, replaced
 * when the server forgets them (a restart) or the integration changes, and closed when idle.
 */

async function startStatefulMcpServer() {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const stats = { initialized: 0, deleted: 0, calls: 0, authorizations: [] as (string | undefined)[] };
  const buildServer = () => {
    const server = new McpServer({ name: 'counter', version: '1.0.0' });
    server.registerTool(
      'add',
      { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
      async ({ a, b }) => {
        stats.calls++;
        return { content: [{ type: 'text', text: String(a + b) }] };
      },
    );
    return server;
  };
  const http: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : undefined;
      const sessionId = req.headers['mcp-session-id'] as string | undefined;
      if (req.method === 'DELETE' && sessionId) stats.deleted++;
      let transport = sessionId ? transports.get(sessionId) : undefined;
      if (!transport) {
        if (sessionId || body?.method !== 'initialize') {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        stats.initialized++;
        stats.authorizations.push(req.headers.authorization);
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            transports.set(id, created);
          },
        });
        created.onclose = () => {
          if (created.sessionId) transports.delete(created.sessionId);
        };
        await buildServer().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    });
  });
  http.listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    stats,
    /** Forgets every session, as a restarted server would. */
    forgetSessions: () => transports.clear(),
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

describe('MCP session pool', () => {
  let mcp: Awaited<ReturnType<typeof startStatefulMcpServer>>;
  let pool: IntegrationPool;
  const server = () => ({ id: 'integration-1', url: mcp.url, headers: { authorization: 'Bearer one' } });
  const add = (p: IntegrationPool, s = server()) =>
    p.use(
      s,
      async (client) => {
        const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
        return (result.content as { text: string }[])[0]!.text;
      },
      { retry: 'session-lost' },
    );

  beforeAll(async () => {
    mcp = await startStatefulMcpServer();
  });
  afterAll(async () => {
    await mcp?.close();
  });
  beforeEach(() => {
    Object.assign(mcp.stats, { initialized: 0, deleted: 0, calls: 0, authorizations: [] });
    pool = createIntegrationPool({ fetch, timeoutMs: 5000, idleMs: 60_000 });
  });
  afterEach(async () => {
    await pool.close();
  });

  it('initialises one session per integration and reuses it for listings and calls, also in parallel', async () => {
    const tools = await pool.use(server(), async (client) => (await client.listTools()).tools.map((t) => t.name), {
      retry: 'always',
    });
    expect(tools).toEqual(['add']);
    expect(await Promise.all([add(pool), add(pool), add(pool)])).toEqual(['5', '5', '5']);
    expect(await add(pool)).toBe('5');
    expect(mcp.stats.initialized).toBe(1);
    expect(mcp.stats.calls).toBe(4);
    expect(pool.size()).toBe(1);
  });

  it('keeps the session after a JSON-RPC error, replaces it when the server forgot it, and does not run a call twice', async () => {
    await expect(
      pool.use(server(), (client) => client.callTool({ name: 'nope', arguments: {} }), { retry: 'session-lost' }),
    ).resolves.toMatchObject({ isError: true });
    expect(await add(pool)).toBe('5');
    expect(mcp.stats.initialized).toBe(1);

    mcp.forgetSessions();
    expect(await add(pool)).toBe('5');
    expect(mcp.stats.initialized).toBe(2);
    expect(mcp.stats.calls).toBe(2);
  });

  it('opens a new session when the integration changes (URL or headers)', async () => {
    await add(pool);
    await add(pool, { ...server(), headers: { authorization: 'Bearer two' } });
    expect(mcp.stats.initialized).toBe(2);
    expect(mcp.stats.authorizations).toEqual(['Bearer one', 'Bearer two']);
    expect(pool.size()).toBe(1);
  });

  it('closes a session left idle (DELETE to the server) and opens a new one on the next use', async () => {
    const quick = createIntegrationPool({ fetch, timeoutMs: 5000, idleMs: 200 });
    try {
      await add(quick);
      expect(quick.size()).toBe(1);
      await expect.poll(() => quick.size(), { timeout: 5000 }).toBe(0);
      await expect.poll(() => mcp.stats.deleted, { timeout: 5000 }).toBe(1);
      await add(quick);
      expect(mcp.stats.initialized).toBe(2);
    } finally {
      await quick.close();
    }
  });

  it('reconnects after the server was unreachable', async () => {
    const broken = { ...server(), url: 'http://127.0.0.1:1/mcp' };
    await expect(add(pool, broken)).rejects.toThrow();
    expect(pool.size()).toBe(0);
    expect(await add(pool)).toBe('5');
  });
});
