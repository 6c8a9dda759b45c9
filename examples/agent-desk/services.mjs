// The services the agent desk example calls, in one process on 127.0.0.1:
//   GET  /orders/:id   an order API (the agent's API tool)
//   POST /mcp          a warehouse MCP server over Streamable HTTP (the agent's MCP tools), built
//                      with the official SDK; it wants `Authorization: Bearer warehouse-token`.
//   node examples/agent-desk/services.mjs [port]      (default 4020)
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const orders = {
  12345: { id: '12345', status: 'shipped', eta: '2026-12-02' },
  23456: { id: '23456', status: 'processing', eta: '2026-12-05' },
};
const stock = { chair: 42, table: 3, lamp: 0 };

function warehouse() {
  const server = new McpServer({ name: 'warehouse', version: '1.0.0' });
  server.registerTool(
    'stock_level',
    { description: 'Units in stock of a product (chair, table, lamp)', inputSchema: { product: z.string() } },
    async ({ product }) => {
      const units = stock[product.toLowerCase()];
      return units === undefined
        ? { content: [{ type: 'text', text: `unknown product ${product}` }], isError: true }
        : { content: [{ type: 'text', text: JSON.stringify({ product, units }) }] };
    },
  );
  return server;
}

const port = Number(process.argv[2] ?? process.env.PORT ?? 4020);
const http = createServer((req, res) => {
  const order = /^\/orders\/(\d+)$/.exec(req.url ?? '');
  if (order && req.method === 'GET') {
    const found = orders[order[1]];
    res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(found ?? { error: 'no such order' }));
    return;
  }
  if (req.url === '/mcp') {
    if (req.headers.authorization !== 'Bearer warehouse-token') {
      res.writeHead(401).end();
      return;
    }
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', async () => {
      // Stateless: a server and transport per request.
      const server = warehouse();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        transport.close();
        server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, raw ? JSON.parse(raw) : undefined);
    });
    return;
  }
  res.writeHead(404).end();
});
http.listen(port, '127.0.0.1', () => console.log(`agent desk services on http://127.0.0.1:${http.address().port}`));
