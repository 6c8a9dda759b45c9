import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import {
  hourMs,
  type ItemQueryName,
  type UsageCounterRow,
  type UsageItemOf,
  type UsageQueryName,
  usageItemOf,
} from './usage-metrics';

/** A usage query after validation (src/analytics/validation.ts), with environments resolved to IDs. */
export interface UsageQuery {
  name: UsageQueryName;
  projectId: string;
  /** Items whose period (hour start) is at or after this instant; null: no lower bound. */
  start: Date | null;
  /** Items whose period is before this instant; null: no upper bound. */
  end: Date | null;
  /** Environment IDs of the project; null: every environment. */
  environmentIds: string[] | null;
  limit: number;
  /** A cursor from a previous page (items queries only). */
  cursor: number | null;
}

export type UsageItemsResult = {
  [N in ItemQueryName]: { name: N; items: UsageItemOf[N][]; cursor: number | null };
}[ItemQueryName];

export interface TopIntentsResult {
  name: 'top_intents';
  intents: { name: string; count: number }[];
}

export type UsageResult = UsageItemsResult | TopIntentsResult;

/**
 * The paging cursor is one integer holding a position in the ordered items: the hour of the next
 * item in the high bits, and how many items of that hour the client has already seen in the low 32
 * bits. Resuming is then an index range from that hour, skipping at most one hour's items, so a
 * page costs the same on the hundredth page as on the first. Hours up to the year 2209 fit in a
 * safe integer (2^21 hours × 2^32).
 */
const inHourSlots = 2 ** 32;

export function encodeUsageCursor(hour: number, seenInHour: number): number {
  return hour * inHourSlots + seenInHour;
}

export function decodeUsageCursor(cursor: number): { hour: number; seenInHour: number } {
  return { hour: Math.floor(cursor / inHourSlots), seenInHour: cursor % inHourSlots };
}

/** The first hour whose start is at or after `instant`. */
export function firstHourFrom(instant: Date): number {
  return Math.ceil(instant.getTime() / hourMs);
}

/** The rollup filter every usage read shares. */
export function rollupWhere(q: Pick<UsageQuery, 'projectId' | 'start' | 'end' | 'environmentIds'>) {
  return {
    projectId: q.projectId,
    hour: {
      gte: q.start ? firstHourFrom(q.start) : undefined,
      // Hours whose start is before `end`: those before the first hour starting at or after it.
      lt: q.end ? firstHourFrom(q.end) : undefined,
    },
    environmentId: q.environmentIds ? { in: q.environmentIds } : undefined,
  };
}

/**
 * Answers a usage query from the hourly counters (never from raw events): items ordered by period,
 * environment, then the other key fields (DECISIONS.md §4), which is the order of UsageRollup's
 * primary key, so a page is one index range of `limit + 1` rows.
 */
export async function queryUsage(db: Db, q: UsageQuery): Promise<UsageResult> {
  if (q.name === 'top_intents') return { name: 'top_intents', intents: await topIntents(db, q) };
  return queryItems(db, { ...q, name: q.name });
}

async function queryItems(db: Db, q: UsageQuery & { name: ItemQueryName }): Promise<UsageItemsResult> {
  const where = rollupWhere(q);
  let fromHour = where.hour.gte ?? null;
  let skip = 0;
  if (q.cursor !== null) {
    const c = decodeUsageCursor(q.cursor);
    // A cursor before the range (from another filter) means: start at the range's start.
    if (fromHour === null || c.hour >= fromHour) {
      fromHour = c.hour;
      skip = c.seenInHour;
    }
  }
  const rows = await db.prisma.usageRollup.findMany({
    where: { ...where, metric: q.name, hour: { ...where.hour, gte: fromHour ?? undefined } },
    orderBy: [
      { hour: 'asc' },
      { environmentId: 'asc' },
      { type: 'asc' },
      { model: 'asc' },
      { diagramId: 'asc' },
      { nodeId: 'asc' },
      { subjectId: 'asc' },
      { name: 'asc' },
    ],
    skip,
    take: q.limit + 1,
  });
  const page = rows.slice(0, q.limit).map(toCounterRow);
  let cursor: number | null = null;
  const next = rows[q.limit];
  if (next) {
    const seen = page.filter((r) => r.hour === next.hour).length + (next.hour === fromHour ? skip : 0);
    cursor = encodeUsageCursor(next.hour, seen);
  }
  const toItem = usageItemOf[q.name] as (row: UsageCounterRow) => UsageItemOf[typeof q.name];
  return { name: q.name, items: page.map(toItem), cursor } as UsageItemsResult;
}

function toCounterRow(row: {
  projectId: string;
  environmentId: string;
  hour: number;
  type: string;
  model: string;
  diagramId: string;
  nodeId: string;
  subjectId: string;
  name: string;
  count: bigint;
  successCount: bigint;
}): UsageCounterRow {
  return { ...row, count: Number(row.count), successCount: Number(row.successCount) };
}

/**
 * Intents matched in the range, most used first, ties by name (DECISIONS.md §4). Whole UTC days
 * inside the range are read from the day counters and only the hours around them from the hourly
 * ones, so a month costs about 30 + 46 rows per intent and environment rather than 720.
 */
async function topIntents(db: Db, q: UsageQuery): Promise<TopIntentsResult['intents']> {
  const fromHour = q.start ? firstHourFrom(q.start) : null;
  const toHour = q.end ? firstHourFrom(q.end) : null;
  const fromDay = fromHour === null ? null : Math.ceil(fromHour / 24);
  const toDay = toHour === null ? null : Math.floor(toHour / 24);
  const environments = (column: string) =>
    q.environmentIds ? Prisma.sql`AND ${Prisma.raw(column)} IN (${Prisma.join(q.environmentIds)})` : Prisma.empty;

  const hourRanges: [number, number][] = [];
  let days: Prisma.Sql | null = null;
  if (fromDay !== null && toDay !== null && fromDay >= toDay) {
    // No whole day inside the range: hours only.
    hourRanges.push([fromHour!, toHour!]);
  } else {
    const dayConditions = [
      fromDay === null ? Prisma.empty : Prisma.sql`AND d."day" >= ${fromDay}`,
      toDay === null ? Prisma.empty : Prisma.sql`AND d."day" < ${toDay}`,
    ];
    days = Prisma.sql`SELECT d."intent" AS "intent", d."count" AS "count" FROM "UsageDayIntent" d
      WHERE d."projectId" = ${q.projectId} ${Prisma.join(dayConditions, ' ')} ${environments('d."environmentId"')}`;
    if (fromHour !== null && fromDay !== null && fromHour < fromDay * 24) hourRanges.push([fromHour, fromDay * 24]);
    if (toHour !== null && toDay !== null && toDay * 24 < toHour) hourRanges.push([toDay * 24, toHour]);
  }
  // One index range per stretch of hours (an OR of ranges would scan every hour of the project).
  const hours = hourRanges.map(
    ([lo, hi]) => Prisma.sql`SELECT r."subjectId" AS "intent", r."count" AS "count" FROM "UsageRollup" r
      WHERE r."projectId" = ${q.projectId} AND r."metric" = 'top_intents' AND r."hour" >= ${lo} AND r."hour" < ${hi}
      ${environments('r."environmentId"')}`,
  );
  const parts = days ? [days, ...hours] : hours;
  const rows = await db.prisma.$queryRaw<{ name: string; count: bigint | number }[]>`
    SELECT c."intent" AS "name", CAST(SUM(c."count") AS BIGINT) AS "count"
    FROM (${Prisma.join(parts, ' UNION ALL ')}) c
    GROUP BY c."intent"
    ORDER BY 2 DESC, c."intent"
    LIMIT ${q.limit}`;
  return rows.map((r) => ({ name: r.name, count: Number(r.count) }));
}
