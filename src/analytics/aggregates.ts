import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { AppError } from '../lib/errors';
import { firstHourFrom, rollupWhere } from './query';
import { bucketBoundaries, type Granularity } from './time-buckets';
import { hourMs, type UsageQueryName, usageQueryNames } from './usage-metrics';

/**
 * What a dashboard needs beyond the REST shape: totals over a range and zero-filled time series.
 * Both read UsageHourTotal (one row per metric, environment and hour), except unique users, which
 * are counted as distinct user IDs over the whole range or bucket from UsageHourUser: the sum of
 * hourly unique users would count a user once per hour and once per environment.
 */

export interface UsageRange {
  projectId: string;
  start: Date | null;
  end: Date | null;
  /** Environment IDs; null: every environment of the project. */
  environmentIds: string[] | null;
}

export interface UsageTotal {
  count: number;
  successCount: number;
}

export type UsageTotals = Record<UsageQueryName, UsageTotal>;

function hourConditions(column: Prisma.Sql, range: UsageRange): Prisma.Sql {
  const parts: Prisma.Sql[] = [];
  if (range.start) parts.push(Prisma.sql`AND ${column} >= ${firstHourFrom(range.start)}`);
  if (range.end) parts.push(Prisma.sql`AND ${column} < ${firstHourFrom(range.end)}`);
  return parts.length ? Prisma.join(parts, ' ') : Prisma.empty;
}

function environmentCondition(column: Prisma.Sql, range: UsageRange): Prisma.Sql {
  return range.environmentIds ? Prisma.sql`AND ${column} IN (${Prisma.join(range.environmentIds)})` : Prisma.empty;
}

/** Every metric's total over the range; unique users are distinct over the range and environments. */
export async function usageTotals(db: Db, range: UsageRange): Promise<UsageTotals> {
  const where = rollupWhere(range);
  const [sums, users] = await Promise.all([
    db.prisma.usageHourTotal.groupBy({
      by: ['metric'],
      where,
      _sum: { count: true, successCount: true },
    }),
    db.prisma.$queryRaw<{ n: bigint | number }[]>`
      SELECT COUNT(*) AS n FROM (
        SELECT DISTINCT u."userId" FROM "UsageHourUser" u
        WHERE u."projectId" = ${range.projectId}
        ${hourConditions(Prisma.sql`u."hour"`, range)}
        ${environmentCondition(Prisma.sql`u."environmentId"`, range)}
      ) d`,
  ]);
  const totals = Object.fromEntries(usageQueryNames.map((n) => [n, { count: 0, successCount: 0 }])) as UsageTotals;
  for (const s of sums) {
    const name = s.metric as UsageQueryName;
    if (name in totals)
      totals[name] = { count: Number(s._sum.count ?? 0), successCount: Number(s._sum.successCount ?? 0) };
  }
  totals.unique_users = { count: Number(users[0]?.n ?? 0), successCount: 0 };
  return totals;
}

export interface UsageSeriesQuery extends UsageRange {
  name: UsageQueryName;
  start: Date;
  end: Date;
  granularity: Granularity;
  /** An IANA time zone: where day, week and month buckets begin. */
  timeZone: string;
}

export interface UsageSeriesPoint {
  /** The bucket's first instant (local midnight for days, weeks and months). */
  start: Date;
  /** The next bucket's first instant. */
  end: Date;
  count: number;
  successCount: number;
}

/** Buckets per series: enough for two months of hours or five years of days. */
export const maxSeriesBuckets = 2000;

/**
 * One metric per bucket over [start, end), every bucket present (zero when nothing happened). An
 * hour belongs to the bucket in which it starts; in zones whose offset is not a whole number of
 * hours (India, Nepal...), the hour that straddles local midnight counts in the earlier bucket.
 */
export async function usageTimeSeries(db: Db, q: UsageSeriesQuery): Promise<UsageSeriesPoint[]> {
  const boundaries = bucketBoundaries(q.start, q.end, q.granularity, q.timeZone, maxSeriesBuckets);
  if (boundaries === null) {
    throw new AppError(
      'VALIDATION_FAILED',
      `The range holds more than ${maxSeriesBuckets} buckets of a ${q.granularity}`,
      {
        details: [
          {
            path: 'granularity',
            message: `more than ${maxSeriesBuckets} buckets: narrow the range or choose a coarser one`,
          },
        ],
      },
    );
  }
  const points: UsageSeriesPoint[] = [];
  for (let i = 0; i + 1 < boundaries.length; i++) {
    points.push({ start: new Date(boundaries[i]!), end: new Date(boundaries[i + 1]!), count: 0, successCount: 0 });
  }
  // Hours [lo, hi) of each bucket, clipped to the range's hours.
  const rangeLo = firstHourFrom(q.start);
  const rangeHi = firstHourFrom(q.end);
  const buckets = points
    .map((p, idx) => ({
      idx,
      lo: Math.max(rangeLo, Math.ceil(p.start.getTime() / hourMs)),
      hi: Math.min(rangeHi, Math.ceil(p.end.getTime() / hourMs)),
    }))
    .filter((b) => b.lo < b.hi);
  if (buckets.length === 0) return points;
  // PostgreSQL would type bare parameters in VALUES as text: cast them.
  const bucketTable = Prisma.join(
    buckets.map((b) => Prisma.sql`(CAST(${b.idx} AS INTEGER), CAST(${b.lo} AS INTEGER), CAST(${b.hi} AS INTEGER))`),
  );
  const rows =
    q.name === 'unique_users'
      ? await db.prisma.$queryRaw<{ idx: number | bigint; count: number | bigint; successCount: number | bigint }[]>`
          WITH b(idx, lo, hi) AS (VALUES ${bucketTable})
          SELECT b.idx AS idx, COUNT(DISTINCT u."userId") AS "count", 0 AS "successCount"
          FROM b JOIN "UsageHourUser" u
            ON u."projectId" = ${q.projectId} AND u."hour" >= b.lo AND u."hour" < b.hi
            ${environmentCondition(Prisma.sql`u."environmentId"`, q)}
          GROUP BY b.idx`
      : await db.prisma.$queryRaw<{ idx: number | bigint; count: number | bigint; successCount: number | bigint }[]>`
          WITH b(idx, lo, hi) AS (VALUES ${bucketTable})
          SELECT b.idx AS idx, CAST(SUM(t."count") AS BIGINT) AS "count",
                 CAST(SUM(t."successCount") AS BIGINT) AS "successCount"
          FROM b JOIN "UsageHourTotal" t
            ON t."projectId" = ${q.projectId} AND t."metric" = ${q.name} AND t."hour" >= b.lo AND t."hour" < b.hi
            ${environmentCondition(Prisma.sql`t."environmentId"`, q)}
          GROUP BY b.idx`;
  for (const r of rows) {
    const point = points[Number(r.idx)];
    if (point) {
      point.count = Number(r.count);
      point.successCount = Number(r.successCount);
    }
  }
  return points;
}
