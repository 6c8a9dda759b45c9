import type { Db, PrismaDb } from '../db/client';
import type { Provider } from '../db/schema-source';
import { Prisma } from '../generated/sqlite/client';
import { AppError, issuesToDetails, summarizeDetails } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub, UsageCountersPayload } from '../lib/pubsub';
import {
  counterDimensionsOf,
  toEventRow,
  type UsageEvent,
  type UsageEventRow,
  usageEventSchema,
  usageLimits,
} from './events';
import {
  dayOfHour,
  metricOfKind,
  emptyDimensions as noDimensions,
  periodOf,
  type UsageDimensions,
  type UsageQueryName,
} from './usage-metrics';

/**
 * The usage event writer: the one place that stores usage events (from the runtime's turns through
 * ./usage-turn-recorder.ts, from evaluations, the knowledge base and ingestion). It writes the
 * events and keeps the hourly counters exact, in one transaction:
 *
 * 1. the events go to UsageEvent (an event whose idempotency key is already there is skipped);
 * 2. each (environment, hour, user) goes to UsageHourUser with ON CONFLICT DO NOTHING, and only
 *    the rows actually inserted increment unique_users, so a user counts once per bucket even
 *    when two instances record it at the same moment;
 * 3. the increments, summed per counter first, go to UsageRollup, UsageHourTotal and (for
 *    intents) UsageDayIntent as INSERT … ON CONFLICT DO UPDATE SET count = count + excluded.count:
 *    atomic on SQLite and PostgreSQL alike, so concurrent writers never lose an increment. Rows
 *    are written in key order, so two transactions touching the same counters lock them in the
 *    same order.
 *
 * Each statement takes its rows as one JSON parameter, unpacked by the database (json_each on
 * SQLite, jsonb_populate_recordset on PostgreSQL): a batch of 1,000 events is five statements,
 * and binding tens of thousands of single parameters through Prisma cost more than the writes.
 */

/** A Prisma client or interactive-transaction client: what the writer writes through. */
export type UsageTx = Pick<PrismaDb, '$executeRaw' | '$queryRaw'>;

/** The new value of an hourly total that a write changed. */
export interface UsageCounter {
  projectId: string;
  environmentId: string;
  metric: UsageQueryName;
  hour: number;
  count: number;
  successCount: number;
}

export interface RecordedUsage {
  /** Events stored now. */
  recorded: number;
  /** Events skipped because an event with the same idempotency key was stored before. */
  duplicates: number;
  /** The hourly totals this write changed, with their new values (for the counters subscription). */
  counters: UsageCounter[];
}

export interface UsageWriterDeps {
  db: Db;
  /** Where to announce the changed counters; absent: nobody is told. */
  pubsub?: AppPubSub;
}

function chunks<T>(list: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

const quote = (identifier: string) => `"${identifier}"`;

/** A column of a statement's JSON rows: its name, and its type on PostgreSQL (the cast from JSON text). */
type Column = readonly [name: string, pgType: 'text' | 'integer' | 'bigint' | 'boolean' | 'timestamp(3)'];

/**
 * `SELECT <columns> FROM <the rows of a JSON array of arrays>` in each engine's dialect: each row
 * is an array of the columns' values in order (not an object, which would repeat every column's
 * name in every row: the JSON text is what the driver adapter and the database spend their time
 * on). `extra` is appended to each row (values bound once, such as the batch's recordedAt). Table
 * and column names are this module's constants, never input; the JSON is a bound parameter.
 */
function jsonRows(provider: Provider, columns: readonly Column[], rows: unknown[][], extra?: Prisma.Sql): Prisma.Sql {
  const json = JSON.stringify(rows);
  const tail = extra ? Prisma.sql`, ${extra}` : Prisma.empty;
  if (provider === 'postgresql') {
    // Ordinality keeps the lock order.
    const select = columns.map(([, type], i) => `CAST(r.value ->> ${i} AS ${type})`).join(', ');
    return Prisma.sql`SELECT ${Prisma.raw(select)}${tail}
      FROM jsonb_array_elements(CAST(${json} AS jsonb)) WITH ORDINALITY AS r(value, ordinality)
      ORDER BY r.ordinality`;
  }
  // json_each walks the array in order. "WHERE true" lets SQLite parse the ON CONFLICT that follows.
  const select = columns.map((_, i) => `value ->> ${i}`).join(', ');
  return Prisma.sql`SELECT ${Prisma.raw(select)}${tail} FROM json_each(${json}) WHERE true`;
}

/** DateTime as each engine's Prisma adapter stores it. */
function storedTimestamp(provider: Provider, date: Date): string {
  const iso = date.toISOString();
  return provider === 'sqlite' ? iso.replace('Z', '+00:00') : iso;
}

/** Validates what an internal caller passes; a bad event is a bug in the caller, reported as such. */
function checkEvents(events: readonly UsageEvent[]): void {
  const problems = events.flatMap((event, index) => {
    const parsed = usageEventSchema.safeParse(event);
    return parsed.success ? [] : issuesToDetails(parsed.error.issues, String(index));
  });
  if (problems.length) {
    throw new AppError('VALIDATION_FAILED', `Invalid usage event: ${summarizeDetails(problems)}`, {
      details: problems,
    });
  }
}

const eventColumns: readonly Column[] = [
  ['id', 'text'],
  ['projectId', 'text'],
  ['environmentId', 'text'],
  ['kind', 'text'],
  ['occurredAt', 'timestamp(3)'],
  ['hour', 'integer'],
  ['userId', 'text'],
  ['type', 'text'],
  ['model', 'text'],
  ['diagramId', 'text'],
  ['nodeId', 'text'],
  ['subjectId', 'text'],
  ['name', 'text'],
  ['quantity', 'bigint'],
  ['success', 'boolean'],
  ['idempotencyKey', 'text'],
];
const dimensionColumns: readonly Column[] = [
  ['type', 'text'],
  ['model', 'text'],
  ['diagramId', 'text'],
  ['nodeId', 'text'],
  ['subjectId', 'text'],
  ['name', 'text'],
];
const rollupColumns: readonly Column[] = [
  ['projectId', 'text'],
  ['metric', 'text'],
  ['hour', 'integer'],
  ['environmentId', 'text'],
  ...dimensionColumns,
  ['count', 'bigint'],
  ['successCount', 'bigint'],
];
const totalColumns: readonly Column[] = [
  ['projectId', 'text'],
  ['metric', 'text'],
  ['hour', 'integer'],
  ['environmentId', 'text'],
  ['count', 'bigint'],
  ['successCount', 'bigint'],
];
const hourUserColumns: readonly Column[] = [
  ['projectId', 'text'],
  ['hour', 'integer'],
  ['environmentId', 'text'],
  ['userId', 'text'],
];
const dayIntentColumns: readonly Column[] = [
  ['projectId', 'text'],
  ['day', 'integer'],
  ['environmentId', 'text'],
  ['intent', 'text'],
  ['count', 'bigint'],
];
const columnList = (columns: readonly Column[], ...more: string[]) =>
  Prisma.raw([...columns.map(([name]) => name), ...more].map(quote).join(', '));

/** The rows as arrays of the columns' values, in the columns' order. */
function arraysOf(rows: readonly object[], columns: readonly Column[]): unknown[][] {
  const names = columns.map(([name]) => name);
  return rows.map((row) => names.map((name) => (row as Record<string, unknown>)[name]));
}

/** Rows per statement: keeps each JSON parameter to a few hundred kilobytes. */
const rowsPerStatement = 2000;

/** Inserts the event rows; returns those actually stored (not skipped as duplicates). */
async function insertEvents(
  tx: UsageTx,
  provider: Provider,
  rows: UsageEventRow[],
  now: Date,
): Promise<UsageEventRow[]> {
  // A key repeated inside the batch: the first event wins, as it would across batches.
  const seen = new Set<string>();
  const unique = rows.filter((r) => {
    if (r.idempotencyKey === null) return true;
    const key = `${r.projectId}\u0000${r.idempotencyKey}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const keyed = seen.size > 0;
  // recordedAt is the same for the whole batch: bound once, not repeated in every row.
  const recordedAt =
    provider === 'postgresql'
      ? Prisma.sql`CAST(${storedTimestamp(provider, now)} AS timestamp(3))`
      : Prisma.sql`${storedTimestamp(provider, now)}`;
  const stored: UsageEventRow[] = [];
  for (const chunk of chunks(unique, rowsPerStatement)) {
    const values = chunk.map((r) => [
      r.id,
      r.projectId,
      r.environmentId,
      r.kind,
      storedTimestamp(provider, r.occurredAt),
      r.hour,
      r.userId,
      r.type,
      r.model,
      r.diagramId,
      r.nodeId,
      r.subjectId,
      r.name,
      r.quantity,
      r.success,
      r.idempotencyKey,
    ]);
    const source = jsonRows(provider, eventColumns, values, recordedAt);
    const columns = columnList(eventColumns, 'recordedAt');
    if (!keyed) {
      await tx.$executeRaw`INSERT INTO "UsageEvent" (${columns}) ${source}`;
      stored.push(...chunk);
      continue;
    }
    // Only events with a key can conflict (NULLs are distinct in a unique index on both engines).
    const inserted = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO "UsageEvent" (${columns}) ${source}
      ON CONFLICT ("projectId", "idempotencyKey") DO NOTHING
      RETURNING "id"`;
    const ids = new Set(inserted.map((r) => r.id));
    stored.push(...chunk.filter((r) => ids.has(r.id)));
  }
  return stored;
}

interface CounterDelta extends UsageDimensions {
  projectId: string;
  metric: UsageQueryName;
  hour: number;
  environmentId: string;
  count: number;
  successCount: number;
}

const keySeparator = '\u0000';

function addDelta(
  into: Map<string, CounterDelta>,
  key: Omit<CounterDelta, 'count' | 'successCount'>,
  count: number,
  successCount: number,
): void {
  const id = [
    key.projectId,
    key.metric,
    String(key.hour).padStart(10, '0'),
    key.environmentId,
    key.type,
    key.model,
    key.diagramId,
    key.nodeId,
    key.subjectId,
    key.name,
  ].join(keySeparator);
  const existing = into.get(id);
  if (existing) {
    existing.count += count;
    existing.successCount += successCount;
  } else into.set(id, { ...key, count, successCount });
}

/** Sorted by key: the lock order every transaction follows. */
function sortedValues<T>(map: Map<string, T>): T[] {
  return [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}

/** Inserts the (environment, hour, user) triples not seen before; returns the new ones. */
async function insertHourUsers(
  tx: UsageTx,
  provider: Provider,
  rows: UsageEventRow[],
): Promise<{ projectId: string; environmentId: string; hour: number }[]> {
  const triples = new Map<string, { projectId: string; environmentId: string; hour: number; userId: string }>();
  for (const r of rows) {
    if (r.userId === null) continue;
    const key = [r.projectId, String(r.hour).padStart(10, '0'), r.environmentId, r.userId].join(keySeparator);
    if (!triples.has(key))
      triples.set(key, { projectId: r.projectId, environmentId: r.environmentId, hour: r.hour, userId: r.userId });
  }
  const added: { projectId: string; environmentId: string; hour: number }[] = [];
  for (const chunk of chunks(sortedValues(triples), rowsPerStatement)) {
    const inserted = await tx.$queryRaw<{ projectId: string; environmentId: string; hour: number | bigint }[]>`
      INSERT INTO "UsageHourUser" (${columnList(hourUserColumns)})
      ${jsonRows(provider, hourUserColumns, arraysOf(chunk, hourUserColumns))}
      ON CONFLICT DO NOTHING
      RETURNING "projectId", "environmentId", "hour"`;
    for (const row of inserted) added.push({ ...row, hour: Number(row.hour) });
  }
  return added;
}

async function upsertRollups(tx: UsageTx, provider: Provider, deltas: CounterDelta[]): Promise<void> {
  for (const chunk of chunks(deltas, rowsPerStatement)) {
    await tx.$executeRaw`
      INSERT INTO "UsageRollup" (${columnList(rollupColumns)})
      ${jsonRows(provider, rollupColumns, arraysOf(chunk, rollupColumns))}
      ON CONFLICT ("projectId", "metric", "hour", "environmentId", "type", "model", "diagramId", "nodeId", "subjectId", "name")
      DO UPDATE SET "count" = "UsageRollup"."count" + excluded."count",
                    "successCount" = "UsageRollup"."successCount" + excluded."successCount"`;
  }
}

interface DayIntentDelta {
  projectId: string;
  day: number;
  environmentId: string;
  intent: string;
  count: number;
}

async function upsertDayIntents(tx: UsageTx, provider: Provider, deltas: DayIntentDelta[]): Promise<void> {
  for (const chunk of chunks(deltas, rowsPerStatement)) {
    await tx.$executeRaw`
      INSERT INTO "UsageDayIntent" (${columnList(dayIntentColumns)})
      ${jsonRows(provider, dayIntentColumns, arraysOf(chunk, dayIntentColumns))}
      ON CONFLICT ("projectId", "day", "environmentId", "intent")
      DO UPDATE SET "count" = "UsageDayIntent"."count" + excluded."count"`;
  }
}

async function upsertHourTotals(tx: UsageTx, provider: Provider, deltas: CounterDelta[]): Promise<UsageCounter[]> {
  const counters: UsageCounter[] = [];
  for (const chunk of chunks(deltas, rowsPerStatement)) {
    const rows = await tx.$queryRaw<
      {
        projectId: string;
        metric: UsageQueryName;
        hour: number | bigint;
        environmentId: string;
        count: bigint | number;
        successCount: bigint | number;
      }[]
    >`
      INSERT INTO "UsageHourTotal" (${columnList(totalColumns)})
      ${jsonRows(provider, totalColumns, arraysOf(chunk, totalColumns))}
      ON CONFLICT ("projectId", "metric", "hour", "environmentId")
      DO UPDATE SET "count" = "UsageHourTotal"."count" + excluded."count",
                    "successCount" = "UsageHourTotal"."successCount" + excluded."successCount"
      RETURNING "projectId", "metric", "hour", "environmentId", "count", "successCount"`;
    for (const r of rows) {
      counters.push({ ...r, hour: Number(r.hour), count: Number(r.count), successCount: Number(r.successCount) });
    }
  }
  return counters;
}

export interface WriteOptions {
  provider: Provider;
  now?: Date;
  /**
   * The events were built from input that passed the ingestion schema (src/analytics/validation.ts,
   * `toRecorderEvent`), whose limits are the writer's own (`usageLimits`): do not check each one
   * again. Checking a batch of 1,000 costs as much as writing it; validation happens once, at the edge.
   */
  checked?: boolean;
}

/**
 * Writes usage events and their counters through `tx`, a Prisma interactive-transaction client
 * (or a plain client, if the caller accepts that a failure may leave part of the write). Use it
 * inside your own transaction so that usage commits or rolls back with your work; then, after the
 * commit, pass the result to `publishUsageCounters`. `provider` is `db.provider`: the statements
 * unpack their JSON rows in that engine's dialect.
 */
export async function writeUsageEvents(
  tx: UsageTx,
  events: readonly UsageEvent[],
  opts: WriteOptions,
): Promise<RecordedUsage> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, counters: [] };
  if (!opts.checked) checkEvents(events);
  const now = opts.now ?? new Date();
  const rows = events.map((event) => toEventRow(event, newId(), now));
  const { provider } = opts;
  const stored = await insertEvents(tx, provider, rows, now);

  const rollups = new Map<string, CounterDelta>();
  for (const r of stored) {
    addDelta(
      rollups,
      {
        projectId: r.projectId,
        metric: metricOfKind[r.kind],
        hour: r.hour,
        environmentId: r.environmentId,
        ...counterDimensionsOf(r),
      },
      r.quantity,
      r.success ? 1 : 0,
    );
  }
  for (const u of await insertHourUsers(tx, provider, stored)) {
    addDelta(rollups, { ...u, metric: 'unique_users', ...noDimensions }, 1, 0);
  }
  const rollupDeltas = sortedValues(rollups);
  await upsertRollups(tx, provider, rollupDeltas);

  const dayIntents = new Map<string, DayIntentDelta>();
  for (const d of rollupDeltas) {
    if (d.metric !== 'top_intents') continue;
    const day = dayOfHour(d.hour);
    const key = [d.projectId, String(day).padStart(8, '0'), d.environmentId, d.subjectId].join(keySeparator);
    const existing = dayIntents.get(key);
    if (existing) existing.count += d.count;
    else
      dayIntents.set(key, {
        projectId: d.projectId,
        day,
        environmentId: d.environmentId,
        intent: d.subjectId,
        count: d.count,
      });
  }
  await upsertDayIntents(tx, provider, sortedValues(dayIntents));

  const totals = new Map<string, CounterDelta>();
  for (const d of rollupDeltas) {
    addDelta(
      totals,
      { projectId: d.projectId, metric: d.metric, hour: d.hour, environmentId: d.environmentId, ...noDimensions },
      d.count,
      d.successCount,
    );
  }
  const counters = await upsertHourTotals(tx, provider, sortedValues(totals));
  return { recorded: stored.length, duplicates: events.length - stored.length, counters };
}

/**
 * Records usage events in a transaction of their own and announces the changed counters.
 * All or nothing: if any event is invalid or a write fails, nothing is stored.
 */
export async function recordUsageEvents(
  deps: UsageWriterDeps,
  events: readonly UsageEvent[],
  opts: Omit<WriteOptions, 'provider'> = {},
): Promise<RecordedUsage> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, counters: [] };
  if (events.length > usageLimits.writeBatch) {
    // A transaction holds its counters locked until it commits; keep transactions short.
    throw new AppError('VALIDATION_FAILED', `Record at most ${usageLimits.writeBatch} usage events at a time.`);
  }
  const recorded = await deps.db.prisma.$transaction(
    (tx) => writeUsageEvents(tx, events, { ...opts, provider: deps.db.provider }),
    {
      // A large batch on a busy SQLite file waits for the single writer; do not give up after 2 s.
      maxWait: 15_000,
      timeout: 60_000,
    },
  );
  if (deps.pubsub) publishUsageCounters(deps.pubsub, recorded);
  return recorded;
}

/** Counters per message: several small messages rather than one large one through Redis. */
const countersPerMessage = 200;

/** Announces changed counters to `usageCounters` subscribers, one topic per project. */
export function publishUsageCounters(pubsub: AppPubSub, recorded: Pick<RecordedUsage, 'counters'>): void {
  const byProject = new Map<string, UsageCounter[]>();
  for (const c of recorded.counters) {
    const list = byProject.get(c.projectId) ?? [];
    list.push(c);
    byProject.set(c.projectId, list);
  }
  for (const [projectId, counters] of byProject) {
    for (const chunk of chunks(counters, countersPerMessage)) {
      const payload: UsageCountersPayload = {
        projectId,
        counters: chunk.map((c) => ({
          metric: c.metric,
          environmentId: c.environmentId,
          period: periodOf(c.hour).toISOString(),
          count: c.count,
          successCount: c.successCount,
        })),
      };
      pubsub.publish('usageCounters', projectId, payload);
    }
  }
}
