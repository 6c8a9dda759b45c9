import { bucketBoundaries, type Granularity } from '../analytics/time-buckets';
import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { AppError } from '../lib/errors';

/**
 * An evaluation's finished results over a range, aggregated in the database: per bucket of the
 * conversations' start (the transcript's createdAt, so a batch run today still counts towards the
 * day the conversation happened), how many results, how many were true and the average value; and
 * over the whole range, how many results had each value. Every transcript of the range counts, not
 * a page of them.
 */

export interface ResultsOverTimeQuery {
  evaluationId: string;
  start: Date;
  end: Date;
  granularity: Granularity;
  /** An IANA time zone: where day, week and month buckets begin. */
  timeZone: string;
}

export interface ResultsPoint {
  start: Date;
  end: Date;
  /** Finished results of conversations that started in the bucket. */
  count: number;
  /** Of those, the ones whose value is true (boolean evaluations; 0 otherwise). */
  trueCount: number;
  /** Number evaluations: the mean value; boolean: the share of true (0 to 1); null without results or for strings. */
  average: number | null;
}

export interface ResultsValueCount {
  value: boolean | number | string | null;
  count: number;
}

export interface ResultsOverTime {
  points: ResultsPoint[];
  /** Each value seen in the range with its count, most frequent first (at most `maxValues`). */
  values: ResultsValueCount[];
  /** Finished results in the range. */
  total: number;
}

/** Buckets per series: a year of days, or two weeks of hours. */
export const maxResultBuckets = 400;
/** Distinct values listed (a string evaluation may answer anything). */
export const maxValues = 50;

type Row = { idx: number | bigint; count: number | bigint; trueCount: number | bigint | null; average: number | null };
type ValueRow = {
  valueBoolean: boolean | number | null;
  valueNumber: number | null;
  valueString: string | null;
  count: number | bigint;
};

export async function evaluationResultsOverTime(
  db: Db,
  type: string,
  q: ResultsOverTimeQuery,
): Promise<ResultsOverTime> {
  const boundaries = bucketBoundaries(q.start, q.end, q.granularity, q.timeZone, maxResultBuckets);
  if (boundaries === null) {
    throw new AppError(
      'VALIDATION_FAILED',
      `The range holds more than ${maxResultBuckets} buckets of a ${q.granularity}`,
      {
        details: [
          {
            path: 'granularity',
            message: `more than ${maxResultBuckets} buckets: narrow the range or choose a coarser one`,
          },
        ],
      },
    );
  }
  const points: ResultsPoint[] = [];
  for (let i = 0; i + 1 < boundaries.length; i++) {
    points.push({
      start: new Date(boundaries[i]!),
      end: new Date(boundaries[i + 1]!),
      count: 0,
      trueCount: 0,
      average: null,
    });
  }
  if (points.length === 0) return { points, values: [], total: 0 };
  // The bucket of each row as a CASE over the inner boundaries: the comparisons are column against
  // parameter, so both providers compare timestamps as they store them (ISO text on SQLite).
  const branches = Prisma.join(
    boundaries.slice(1, -1).map((b, i) => Prisma.sql`WHEN t."createdAt" < ${new Date(b)} THEN ${i}`),
    ' ',
  );
  const bucketOf = points.length === 1 ? Prisma.sql`0` : Prisma.sql`CASE ${branches} ELSE ${points.length - 1} END`;
  const inRange = Prisma.sql`
    FROM "EvaluationResult" r JOIN "Transcript" t ON t."id" = r."transcriptId"
    WHERE r."evaluationId" = ${q.evaluationId} AND r."status" = 'done'
      AND t."createdAt" >= ${q.start} AND t."createdAt" < ${q.end}`;
  const [rows, valueRows] = await Promise.all([
    db.prisma.$queryRaw<Row[]>`
      SELECT x.idx AS idx, COUNT(*) AS "count",
             SUM(CASE WHEN x."valueBoolean" THEN 1 ELSE 0 END) AS "trueCount",
             AVG(x."valueNumber") AS "average"
      FROM (SELECT ${bucketOf} AS idx, r."valueBoolean", r."valueNumber" ${inRange}) x
      GROUP BY x.idx`,
    db.prisma.$queryRaw<ValueRow[]>`
      SELECT r."valueBoolean" AS "valueBoolean", r."valueNumber" AS "valueNumber", r."valueString" AS "valueString",
             COUNT(*) AS "count"
      ${inRange}
      GROUP BY r."valueBoolean", r."valueNumber", r."valueString"
      ORDER BY COUNT(*) DESC, r."valueString", r."valueNumber"
      LIMIT ${maxValues}`,
  ]);
  let total = 0;
  for (const r of rows) {
    const point = points[Number(r.idx)];
    if (!point) continue;
    point.count = Number(r.count);
    point.trueCount = Number(r.trueCount ?? 0);
    total += point.count;
    if (type === 'boolean') point.average = point.count ? point.trueCount / point.count : null;
    else if (type === 'number') point.average = r.average === null ? null : Number(r.average);
  }
  const values = valueRows.map((v) => ({
    value:
      type === 'boolean'
        ? v.valueBoolean === null
          ? null
          : Boolean(v.valueBoolean)
        : type === 'number'
          ? v.valueNumber
          : v.valueString,
    count: Number(v.count),
  }));
  return { points, values, total };
}
