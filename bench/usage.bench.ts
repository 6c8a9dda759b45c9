import { request } from 'node:http';
import { createApiKey } from '../src/admin/service';
import { queryUsage, type UsageQuery, type UsageResult } from '../src/analytics/query';
import { queryUsageFromEvents } from '../src/analytics/raw-events';
import { hourMs } from '../src/analytics/usage-metrics';
import type { BenchSuite, LatencySummary } from './lib';
import { fmt, printTable, startBenchServer, timeIt } from './lib';
import { reportTarget } from './targets';

/**
 * Issue 5: usage analytics at scale. Ingests N usage events (1,000,000; 50,000 with --quick) over
 * HTTP in batches of 1,000 (POST /v1/usage/events), in time order over 30 days, then times a 30-day
 * `interactions` query (first page of 500) and a `top_intents` query: end to end over HTTP, and
 * at the database, against the same answers computed from the raw events with a plain GROUP BY
 * in the same run. The raw/rollup ratio is what the hourly counters buy; the run also checks that
 * both give the same answer.
 */

const batchSize = 1000;
const inFlight = 4;

/** A small seeded generator, so every run ingests the same events. */
export function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const actionTypes = ['launch', 'text', 'intent', 'button', 'event', 'no-reply'];
const intents = Array.from({ length: 40 }, (_, i) => `intent_${String(i).padStart(2, '0')}`);
const models = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet'];

/**
 * One batch of a support agent's traffic, dated within [from, from + span): mostly interactions,
 * some of every other kind.
 */
export function batch(projectID: string, from: number, span: number, rnd: () => number): unknown[] {
  const events: unknown[] = [];
  for (let i = 0; i < batchSize; i++) {
    const timestamp = new Date(from + Math.floor(rnd() * span)).toISOString();
    const environment = rnd() < 0.8 ? 'production' : 'development';
    const base = { projectID, environment, timestamp };
    const r = rnd();
    // Intents are skewed: a few are matched far more often than the rest.
    const intent = intents[Math.floor(intents.length * rnd() * rnd())]!;
    if (r < 0.45) {
      events.push({
        ...base,
        kind: 'interaction',
        type: actionTypes[Math.floor(rnd() * actionTypes.length)],
        userID: `user-${Math.floor(rnd() * 20_000)}`,
      });
    } else if (r < 0.6) events.push({ ...base, kind: 'intent', name: intent });
    else if (r < 0.72)
      events.push({
        ...base,
        kind: 'credit',
        type: rnd() < 0.5 ? 'llm-input' : 'llm-output',
        model: models[Math.floor(rnd() * models.length)],
        tokens: 50 + Math.floor(rnd() * 2000),
        diagramID: 'main',
        nodeID: `node-${Math.floor(rnd() * 20)}`,
      });
    else if (r < 0.8)
      events.push({ ...base, kind: 'function_call', functionID: `fn-${Math.floor(rnd() * 5)}`, success: rnd() < 0.95 });
    else if (r < 0.85)
      events.push({ ...base, kind: 'api_call', apiToolID: `api-${Math.floor(rnd() * 5)}`, success: rnd() < 0.9 });
    else if (r < 0.91) events.push({ ...base, kind: 'kb_document', documentID: `doc-${Math.floor(rnd() * 200)}` });
    else if (r < 0.94)
      events.push({ ...base, kind: 'integration_call', integrationToolName: 'zendesk', success: true });
    else if (r < 0.97) events.push({ ...base, kind: 'transcript' });
    else events.push({ ...base, kind: 'agent_invocation', agentID: 'support', name: 'Support', success: rnd() < 0.97 });
  }
  return events;
}

/**
 * POST as JSON on a connection of its own. A pooled keep-alive connection can be closed by the
 * server just as the client reuses it (ECONNRESET), which would end a long run for nothing.
 */
export function post(url: string, key: string, body: unknown): Promise<unknown> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: key,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${url}: ${res.statusCode} ${text.slice(0, 300)}`));
          else resolve(JSON.parse(text));
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const ms = (s: LatencySummary) => [s.p50, s.p95] as const;

export const usageBench: BenchSuite = {
  name: 'usage',
  description:
    'usage events: batched ingestion, then 30-day interactions and top_intents from hourly rollups vs raw GROUP BY',
  async run(ctx) {
    const total = ctx.quick ? 50_000 : 1_000_000;
    const iterations = ctx.quick ? 10 : 40;
    const rawIterations = ctx.quick ? 3 : 10;
    const ingestRows: (string | number)[][] = [
      ['provider', 'events', 'seconds', 'events/s', 'slowest batch ms', 'rollup rows'],
    ];
    const queryRows: (string | number)[][] = [['query', 'p50 ms', 'p95 ms', 'raw GROUP BY p50 / rollup p50']];

    for (const provider of ctx.providers) {
      const server = await startBenchServer(ctx, provider);
      try {
        const { db, pubsub } = server.running.services;
        const { apiKey } = await createApiKey(
          { db, pubsub },
          {
            workspaceId: server.project.workspaceID,
            projectId: server.project.projectID,
            scopes: ['analytics:read', 'analytics:write'],
            actor: 'cli',
          },
        );
        const projectID = server.project.projectID;
        // The 30 days before the current hour, so every event is in the past and in the range.
        const end = Math.floor(Date.now() / hourMs) * hourMs;
        const start = end - 30 * 24 * hourMs;
        const rnd = random(5);
        const batches = total / batchSize;

        const started = performance.now();
        let next = 0;
        let slowest = 0;
        // Events arrive as they happen: batch i holds the i-th slice of the 30 days, so each write
        // touches the counters of an hour or two, as live traffic does.
        const slice = (end - start) / batches;
        const worker = async () => {
          while (next < batches) {
            const i = next++;
            const events = batch(projectID, start + i * slice, slice, rnd);
            const t0 = performance.now();
            await post(`${server.url}/v1/usage/events`, apiKey, { events });
            slowest = Math.max(slowest, performance.now() - t0);
          }
        };
        await Promise.all(Array.from({ length: inFlight }, worker));
        const seconds = (performance.now() - started) / 1000;
        const rollupRows = await db.prisma.usageRollup.count({ where: { projectId: projectID } });
        ingestRows.push([provider, total.toLocaleString('en-US'), seconds, total / seconds, slowest, rollupRows]);
        reportTarget({
          id: 'usage-ingestion',
          provider,
          value: total / seconds,
          note: `${fmt(total / 1000, 0)}k events over HTTP, ${inFlight} in flight`,
        });

        const range = { projectID, startTime: new Date(start).toISOString(), endTime: new Date(end).toISOString() };
        const httpInteractions = await timeIt(
          () =>
            post(`${server.url}/v2/query/usage`, apiKey, {
              data: { name: 'interactions', filter: { ...range, limit: 500 } },
            }),
          iterations,
        );
        const httpTopIntents = await timeIt(
          () =>
            post(`${server.url}/v2/query/usage`, apiKey, {
              data: { name: 'top_intents', filter: { ...range, limit: 10 } },
            }),
          iterations,
        );
        queryRows.push([`HTTP interactions, 30 days, 500 items [${provider}]`, ...ms(httpInteractions), '']);
        queryRows.push([`HTTP top_intents, 30 days, top 10 [${provider}]`, ...ms(httpTopIntents), '']);

        for (const [name, limit] of [
          ['interactions', 500],
          ['top_intents', 10],
        ] as const) {
          const q: UsageQuery = {
            name,
            projectId: projectID,
            start: new Date(start),
            end: new Date(end),
            environmentIds: null,
            limit,
            cursor: null,
          };
          const fromRollups = await queryUsage(db, q);
          const fromEvents = await queryUsageFromEvents(db, q);
          // The same items (the raw query makes no cursor).
          const answer = (r: UsageResult) => JSON.stringify('items' in r ? r.items : r.intents);
          if (answer(fromRollups) !== answer(fromEvents)) {
            throw new Error(`${name} [${provider}]: the rollups and the raw events disagree`);
          }
          const rollup = await timeIt(() => queryUsage(db, q), iterations);
          const raw = await timeIt(() => queryUsageFromEvents(db, q), rawIterations, 1);
          queryRows.push([`db ${name} from rollups [${provider}]`, ...ms(rollup), '']);
          queryRows.push([
            `db ${name}, GROUP BY raw events [${provider}]`,
            ...ms(raw),
            `${fmt(raw.p50 / rollup.p50, 1)}x`,
          ]);
        }
      } finally {
        await server.close();
      }
    }
    printTable(`Ingestion over HTTP, batches of ${batchSize}, ${inFlight} requests in flight`, ingestRows);
    printTable(
      `Queries over ${(total / 1_000_000).toLocaleString('en-US')}M events in 30 days (${iterations} runs; raw ${rawIterations})`,
      queryRows,
    );
  },
};
