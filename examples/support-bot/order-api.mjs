// A tiny order API for the support bot example: GET /orders/:id answers with the order's status.
//   node examples/support-bot/order-api.mjs [port]      (default 4010, on 127.0.0.1)
import { createServer } from 'node:http';

const orders = {
  12345: { id: '12345', status: 'shipped', eta: '2026-12-02' },
  23456: { id: '23456', status: 'processing', eta: '2026-12-05' },
  34567: { id: '34567', status: 'cancelled', eta: null },
};

const port = Number(process.argv[2] ?? process.env.PORT ?? 4010);
const server = createServer((req, res) => {
  const match = /^\/orders\/(\d+)$/.exec(req.url ?? '');
  const order = match && req.method === 'GET' ? orders[match[1]] : undefined;
  res.writeHead(order ? 200 : 404, { 'content-type': 'application/json' });
  res.end(JSON.stringify(order ?? { error: 'no such order' }));
});
server.listen(port, '127.0.0.1', () => console.log(`order API on http://127.0.0.1:${server.address().port}`));
