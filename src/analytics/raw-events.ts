import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { firstHourFrom, type UsageQuery, type UsageResult } from './query';
import type { UsageEventKind } from './usage-metrics';
import { type ItemQueryName, type UsageCounterRow, type UsageItemOf, usageItemOf } from './usage-metrics';

/**
 * The same answers as `queryUsage`, computed from the raw events with a plain GROUP BY. Not used to
 * serve requests (its cost grows with the events); it is the yardstick that shows what the
 * rollups buy (bench/usage.bench.ts) and the reference the tests hold the counters to.
 * First pages only: it takes `limit` but no cursor.
 */

const kindOf: Record<Exclude<ItemQueryName, 'unique_users'> | 'top_intents', UsageEventKind> = {
  interactions: 'interaction',
  credit_usage: 'credit',
  function_usage: 'function_call',
  api_calls: 'api_call',
  kb_documents: 'kb_document',
  integrations: 'integration_call',
  transcripts: 'transcript',
  agent_usage: 'agent_invocation',
  top_intents: 'intent',
};

function conditions(q: UsageQuery): Prisma.Sql {
  const parts = [Prisma.sql`e."projectId" = ${q.projectId}`];
  if (q.start) parts.push(Prisma.sql`e."hour" >= ${firstHourFrom(q.start)}`);
  if (q.end) parts.push(Prisma.sql`e."hour" < ${firstHourFrom(q.end)}`);
  if (q.environmentIds) parts.push(Prisma.sql`e."environmentId" IN (${Prisma.join(q.environmentIds)})`);
  return Prisma.join(parts, ' AND ');
}

type RawRow = Omit<UsageCounterRow, 'hour' | 'count' | 'successCount'> & {
  hour: number | bigint;
  count: number | bigint;
  successCount: number | bigint;
};

export async function queryUsageFromEvents(db: Db, q: UsageQuery): Promise<UsageResult> {
  const where = conditions(q);
  if (q.name === 'top_intents') {
    const rows = await db.prisma.$queryRaw<{ name: string; count: number | bigint }[]>`
      SELECT e."subjectId" AS "name", CAST(SUM(e."quantity") AS BIGINT) AS "count"
      FROM "UsageEvent" e
      WHERE ${where} AND e."kind" = ${kindOf.top_intents}
      GROUP BY e."subjectId"
      ORDER BY 2 DESC, e."subjectId"
      LIMIT ${q.limit}`;
    return { name: 'top_intents', intents: rows.map((r) => ({ name: r.name, count: Number(r.count) })) };
  }
  const name: ItemQueryName = q.name;
  let rows: RawRow[];
  if (name === 'unique_users') {
    rows = await db.prisma.$queryRaw<RawRow[]>`
      SELECT e."projectId", e."environmentId", e."hour", '' AS "type", '' AS "model", '' AS "diagramId",
             '' AS "nodeId", '' AS "subjectId", '' AS "name",
             COUNT(DISTINCT e."userId") AS "count", 0 AS "successCount"
      FROM "UsageEvent" e
      WHERE ${where} AND e."userId" IS NOT NULL
      GROUP BY e."projectId", e."hour", e."environmentId"
      ORDER BY e."hour", e."environmentId"
      LIMIT ${q.limit}`;
  } else if (name === 'transcripts') {
    rows = await db.prisma.$queryRaw<RawRow[]>`
      SELECT e."projectId", e."environmentId", e."hour", '' AS "type", '' AS "model", '' AS "diagramId",
             '' AS "nodeId", '' AS "subjectId", '' AS "name",
             COUNT(*) AS "count", 0 AS "successCount"
      FROM "UsageEvent" e
      WHERE ${where} AND e."kind" = ${kindOf.transcripts}
      GROUP BY e."projectId", e."hour", e."environmentId"
      ORDER BY e."hour", e."environmentId"
      LIMIT ${q.limit}`;
  } else {
    rows = await db.prisma.$queryRaw<RawRow[]>`
      SELECT e."projectId", e."environmentId", e."hour", e."type", e."model", e."diagramId", e."nodeId",
             e."subjectId", e."name", CAST(SUM(e."quantity") AS BIGINT) AS "count",
             CAST(SUM(CASE WHEN e."success" THEN 1 ELSE 0 END) AS BIGINT) AS "successCount"
      FROM "UsageEvent" e
      WHERE ${where} AND e."kind" = ${kindOf[name]}
      GROUP BY e."projectId", e."hour", e."environmentId", e."type", e."model", e."diagramId", e."nodeId",
               e."subjectId", e."name"
      ORDER BY e."hour", e."environmentId", e."type", e."model", e."diagramId", e."nodeId", e."subjectId", e."name"
      LIMIT ${q.limit}`;
  }
  const toItem = usageItemOf[name] as (row: UsageCounterRow) => UsageItemOf[typeof name];
  const items = rows.map((r) =>
    toItem({ ...r, hour: Number(r.hour), count: Number(r.count), successCount: Number(r.successCount) }),
  );
  return { name, items, cursor: null } as UsageResult;
}
