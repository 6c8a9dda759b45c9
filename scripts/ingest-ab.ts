/**
 * npx tsx scripts/ingest-ab.ts [--provider sqlite|postgresql] [--batches N]
 *
 * In-process timing of one ingestion batch (1,000 events, bench/usage.bench.ts's mix) through
 * `POST /v1/usage/events` on a real server over a scratch database, one batch at a time, and of
 * its parts in the same process: JSON parse, the route's body check, and the writer alone
 * (recordUsageEvents, one transaction). Prints medians in ms per batch. For an A/B, run it in two
 * checkouts back to back (docs/performance.md "Usage ingestion").
 */

import { defaultBenchContext, startBenchServer } from '../bench/lib';
import { batch, post, random } from '../bench/usage.bench';
import { createApiKey } from '../src/admin/service';
import type { UsageEvent } from '../src/analytics/events';
import { recordUsageEvents } from '../src/analytics/usage-event-writer';
import { usageEventsBodySchema } from '../src/analytics/validation';
import type { Provider } from '../src/db/schema-source';

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? (args[i + 1] as string) : fallback;
};
const provider = option('provider', 'sqlite') as Provider;
const batches = Number(option('batches', '30'));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
/** Wall-clock ms of `fn`; its process CPU ms (user + system, every thread) go to `cpu`. */
const time = async (fn: () => unknown, cpu?: number[]) => {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const elapsed = performance.now() - t0;
  const c = process.cpuUsage(c0);
  cpu?.push((c.user + c.system) / 1000);
  return elapsed;
};

const server = await startBenchServer(defaultBenchContext([]).ctx, provider);
try {
  const { db } = server.running.services;
  const { apiKey } = await createApiKey(
    { db, pubsub: server.running.services.pubsub },
    {
      workspaceId: server.project.workspaceID,
      projectId: server.project.projectID,
      scopes: ['analytics:read', 'analytics:write'],
      actor: 'cli',
    },
  );
  const environments = await db.prisma.environment.findMany({ where: { projectId: server.project.projectID } });
  const envId = (name: string) => environments.find((e) => e.alias === name)?.id ?? '';
  const rnd = random(7);
  let from = Date.now() - 20 * 86_400_000;
  const next = () => {
    from += 60_000;
    return { events: batch(server.project.projectID, from, 60_000, rnd) };
  };
  const rest: number[] = [];
  const restCpu: number[] = [];
  const writerCpu: number[] = [];
  const parse: number[] = [];
  const check: number[] = [];
  const writer: number[] = [];
  for (let i = 0; i < batches + 3; i++) {
    const body = next();
    const text = JSON.stringify(body);
    const parsed: unknown[] = [];
    const tParse = await time(() => parsed.push(JSON.parse(text)));
    const tCheck = await time(() => {
      if (!usageEventsBodySchema.safeParse(parsed[0]).success) throw new Error('bad batch');
    });
    const tRest = await time(() => post(`${server.url}/v1/usage/events`, apiKey, body), restCpu);
    const events = next().events.map(
      (e) =>
        ({
          ...(e as object),
          projectId: server.project.projectID,
          environmentId: envId((e as { environment: string }).environment),
          occurredAt: new Date((e as { timestamp: string }).timestamp),
        }) as unknown as UsageEvent,
    );
    const tWriter = await time(
      () => recordUsageEvents({ db }, events.map(toWriterEvent), { checked: true }),
      writerCpu,
    );
    if (i < 3) {
      restCpu.pop();
      writerCpu.pop();
      continue;
    }
    rest.push(tRest);
    parse.push(tParse);
    check.push(tCheck);
    writer.push(tWriter);
  }
  console.log(
    `ingest A/B [${provider}], ${batches} batches of 1,000, median ms per batch: ` +
      `REST ${median(rest).toFixed(1)}, JSON.parse ${median(parse).toFixed(1)}, ` +
      `route body check ${median(check).toFixed(1)}, writer alone ${median(writer).toFixed(1)}; ` +
      `CPU ms per batch (this process, client included): REST ${median(restCpu).toFixed(1)}, writer alone ${median(writerCpu).toFixed(1)}`,
  );
} finally {
  await server.close();
}

/** A bench event as the writer takes it (the ingestion field's toRecorderEvent, inlined for the A/B). */
function toWriterEvent(e: UsageEvent): UsageEvent {
  const x = e as unknown as Record<string, unknown>;
  const common = {
    projectId: x.projectId,
    environmentId: x.environmentId,
    occurredAt: x.occurredAt,
    userId: x.userID ?? null,
    idempotencyKey: null,
  };
  switch (x.kind) {
    case 'interaction':
      return { ...common, kind: 'interaction', type: x.type } as UsageEvent;
    case 'credit':
      return {
        ...common,
        kind: 'credit',
        type: x.type,
        model: x.model,
        tokens: x.tokens,
        diagramId: x.diagramID,
        nodeId: x.nodeID,
      } as UsageEvent;
    case 'function_call':
      return { ...common, kind: 'function_call', functionId: x.functionID, success: x.success } as UsageEvent;
    case 'api_call':
      return { ...common, kind: 'api_call', apiToolId: x.apiToolID, success: x.success } as UsageEvent;
    case 'integration_call':
      return {
        ...common,
        kind: 'integration_call',
        integrationToolName: x.integrationToolName,
        success: x.success,
      } as UsageEvent;
    case 'kb_document':
      return { ...common, kind: 'kb_document', documentId: x.documentID } as UsageEvent;
    case 'transcript':
      return { ...common, kind: 'transcript' } as UsageEvent;
    case 'agent_invocation':
      return {
        ...common,
        kind: 'agent_invocation',
        agentId: x.agentID,
        name: x.name,
        success: x.success,
      } as UsageEvent;
    default:
      return { ...common, kind: 'intent', name: x.name } as UsageEvent;
  }
}
