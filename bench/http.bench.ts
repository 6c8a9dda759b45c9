import express from 'express';
import { routes } from '../src/rest/routes';
import type { BenchSuite } from './lib';
import { fmt, load, printTable, startBenchServer } from './lib';
import { reportTarget } from './targets';

/**
 * Issue 2: requests per second of an authenticated trivial operation (`viewer`) sent as GraphQL
 * to Yoga, and the same operation through the REST adapter (GET /v1/whoami). A bare Express
 * handler answering the same JSON, with no auth and no GraphQL, is the floor for both.
 * Issue 17: the REST route against the very same operation document sent to /graphql, by latency
 * (target: REST at most 1.15x the GraphQL latency).
 */
const whoami = routes.find((r) => r.method === 'GET' && r.path === '/v1/whoami');
if (!whoami) throw new Error('the route table has no GET /v1/whoami');
export const httpBench: BenchSuite = {
  name: 'http',
  description: 'authenticated trivial query: GraphQL (Yoga) vs the REST adapter vs bare Express',
  async run(ctx) {
    const duration = ctx.quick ? 2 : 8;
    const rows: (string | number)[][] = [['path', 'req/s', 'mean ms', 'p50 ms', 'p99 ms', 'vs bare Express']];
    const latencyRows: (string | number)[][] = [
      ['same operation', 'REST mean ms', 'GraphQL mean ms', 'REST / GraphQL latency', 'target'],
    ];
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
          // The route's own document: REST and GraphQL run the same operation.
          body: JSON.stringify({ query: whoami.operation, operationName: 'Viewer' }),
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
            r.latencyMean,
            r.latencyP50,
            r.latencyP99,
            `${fmt(r.requestsPerSecond / baseline.requestsPerSecond, 2)}x`,
          ]);
        }
        rows.push([
          `REST / GraphQL req/s [${provider}]`,
          `${fmt(rest.requestsPerSecond / gql.requestsPerSecond, 2)}x`,
          '',
          '',
          '',
          '',
        ]);
        latencyRows.push([
          `GET /v1/whoami vs POST /graphql Viewer [${provider}]`,
          rest.latencyMean,
          gql.latencyMean,
          `${fmt(rest.latencyMean / gql.latencyMean, 2)}x`,
          '<= 1.15x',
        ]);
        reportTarget({
          id: 'graphql-trivial',
          provider,
          value: gql.requestsPerSecond,
          baseline: baseline.requestsPerSecond,
          note: `Viewer, 10 connections, ${duration} s`,
        });
        reportTarget({
          id: 'rest-vs-graphql',
          provider,
          value: rest.latencyMean,
          baseline: gql.latencyMean,
          note: 'GET /v1/whoami vs POST /graphql Viewer, mean',
        });
      } finally {
        await server.close();
      }
    }
    printTable(`HTTP throughput, 10 connections, ${duration} s each`, rows);
    printTable('REST route vs the same operation sent to /graphql (latency under the same load)', latencyRows);
  },
};
