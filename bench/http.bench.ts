import express from 'express';
import type { BenchSuite } from './lib';
import { fmt, load, printTable, startBenchServer } from './lib';

/**
 * Issue 2: requests per second of an authenticated trivial operation (`viewer`) sent as GraphQL
 * to Yoga, and the same operation through the REST adapter (GET /v1/whoami). A bare Express
 * handler answering the same JSON, with no auth and no GraphQL, is the floor for both.
 */
export const httpBench: BenchSuite = {
  name: 'http',
  description: 'authenticated trivial query: GraphQL (Yoga) vs the REST adapter vs bare Express',
  async run(ctx) {
    const duration = ctx.quick ? 2 : 8;
    const rows: (string | number)[][] = [['path', 'req/s', 'p50 ms', 'p99 ms', 'vs bare Express']];
    for (const provider of ctx.providers) {
      const server = await startBenchServer(ctx, provider);
      try {
        const bare = express();
        bare.get('/whoami', (_req, res) => {
          res.json({ key: { kind: 'key', keyID: 'x', workspaceID: 'y', projectID: 'z', scopes: ['analytics:read'] } });
        });
        const bareServer = bare.listen(0, '127.0.0.1');
        await new Promise((r) => bareServer.once('listening', r));
        const barePort = (bareServer.address() as { port: number }).port;
        const auth = { authorization: server.project.apiKey };
        const baseline = await load({ url: `http://127.0.0.1:${barePort}/whoami`, durationSeconds: duration });
        const gql = await load({
          url: `${server.url}/graphql`,
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ viewer { kind keyID workspaceID projectID scopes } }' }),
          durationSeconds: duration,
        });
        const rest = await load({ url: `${server.url}/v1/whoami`, headers: auth, durationSeconds: duration });
        bareServer.close();
        for (const [label, r] of [
          ['bare Express (baseline)', baseline],
          [`GraphQL POST /graphql [${provider}]`, gql],
          [`REST GET /v1/whoami [${provider}]`, rest],
        ] as const) {
          if (r.non2xx || r.errors) throw new Error(`${label}: ${r.non2xx} non-2xx, ${r.errors} errors`);
          rows.push([
            label,
            r.requestsPerSecond,
            r.latencyP50,
            r.latencyP99,
            `${fmt(r.requestsPerSecond / baseline.requestsPerSecond, 2)}x`,
          ]);
        }
        rows.push([
          `REST / GraphQL [${provider}]`,
          `${fmt(rest.requestsPerSecond / gql.requestsPerSecond, 2)}x`,
          '',
          '',
          '',
        ]);
      } finally {
        await server.close();
      }
    }
    printTable(`HTTP throughput, 10 connections, ${duration} s each`, rows);
  },
};
