import { type Db, type PrismaDb, type SqliteStatements, storedTimestamp } from '../db/client';
import type { Provider } from '../db/schema-source';
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
  type UsageEventKind,
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
 *    atomic on SQLite and PostgreSQL alike, so concurrent writers never lose an increment. On
 *    PostgreSQL rows are written in key order, so two transactions touching the same counters lock
 *    them in the same order (a SQLite write transaction holds the whole database: see `writeOrder`).
 *
 * Through Prisma and on PostgreSQL, each statement takes its rows as one JSON parameter, unpacked
 * by the database (json_each on SQLite, jsonb_array_elements on PostgreSQL): a batch of 1,000
 * events is five statements, and binding tens of thousands of single parameters through Prisma
 * cost more than the writes. On SQLite's driver (recordUsageEvents), the events and counter
 * upserts instead run one prepared statement per row inside the one transaction: no round trips
 * there, and SQLite spends less on a prepared row than on unpacking it from JSON.
 */

/**
 * A Prisma client or interactive-transaction client, for callers that write usage inside a Prisma
 * transaction of their own (the runtime's turn batch, evaluations, transcripts, the demo seed).
 */
export type UsageTx = Pick<PrismaDb, '$executeRawUnsafe' | '$queryRawUnsafe'>;

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

/**
 * One statement of a write over `rows` (each an array of the columns' values), and whether its
 * returned rows are wanted. The write is a generator of these (see `usageWrite`): the same
 * statements run through the driver (synchronously on SQLite) or through a Prisma transaction,
 * whichever the caller has. A runner sends the rows either as one JSON parameter to `sql.json`
 * (one statement for every row) or, on SQLite's driver, to `sql.row` once per row (see
 * `StatementSql`).
 */
interface Statement {
  sql: StatementSql;
  rows: unknown[][];
  /** A value bound once for every row, after the row's own (the batch's recordedAt). */
  bound?: unknown;
  returning: boolean;
}

/**
 * A statement's texts. `json` takes every row at once as one JSON parameter (SQLite: the bound
 * value then the JSON; PostgreSQL: $1 the JSON, $2 the bound value). `row` (SQLite only) is the same
 * write for one row, `?` per column then the bound value: prepared once, it is run for each row.
 * On SQLite, in a transaction on one connection, that costs less than unpacking the JSON (the
 * events insert: about 3.6 against 5.8 ms of SQLite per 1,000 rows), and RETURNING gives at most
 * one row per run.
 */
interface StatementSql {
  json: string;
  row?: string;
  /**
   * `row` has no RETURNING: a run that inserted its row gives back the row's own values, named by
   * these columns (read from better-sqlite3's `changes`, which costs SQLite about half what
   * RETURNING or the JSON statement's RETURNING does; the hour users: about 1.0 against 2.1 ms per
   * batch of 1,000 bench events).
   */
  rowEcho?: readonly string[];
  /**
   * In place of `row` (SQLite's per-row runs): the text and values for this row, which may leave
   * out columns that hold their default (see `eventRowOf`).
   */
  rowOf?: (values: unknown[]) => RowStatement;
}

/** A per-row statement's text and the row's values for it. */
interface RowStatement {
  text: string;
  values: unknown[];
}

type Row = Record<string, unknown>;

/** The write: yields its statements in order, is resumed with each one's rows, returns what it wrote. */
type UsageWrite = Generator<Statement, RecordedUsage, Row[]>;

/** A column of a statement's JSON rows: its name, and its type on PostgreSQL (the cast from JSON text). */
type Column = readonly [name: string, pgType: 'text' | 'integer' | 'bigint' | 'boolean' | 'timestamp(3)'];

/**
 * `SELECT <columns> FROM <the rows of a JSON array of arrays>` in each engine's dialect: each row
 * is an array of the columns' values in order (not an object, which would repeat every column's
 * name in every row: the JSON text is what the driver and the database spend their time on).
 * `extra` is SQL appended to each row (a value bound once, such as the batch's recordedAt: on
 * PostgreSQL `$2`, the JSON being `$1`). Table and column names
 * are this module's constants, never input. The text depends only on the columns, so each
 * statement is prepared once per connection.
 */
function jsonRows(provider: Provider, columns: readonly Column[], extra?: string): string {
  const tail = extra ? `, ${extra}` : '';
  if (provider === 'postgresql') {
    // Ordinality keeps the lock order.
    const select = columns.map(([, type], i) => `CAST(r.value ->> ${i} AS ${type})`).join(', ');
    return `SELECT ${select}${tail}
      FROM jsonb_array_elements(CAST($1 AS jsonb)) WITH ORDINALITY AS r(value, ordinality)
      ORDER BY r.ordinality`;
  }
  // json_each walks the array in order. "WHERE true" lets SQLite parse the ON CONFLICT that follows.
  const select = columns.map((_, i) => `value ->> ${i}`).join(', ');
  return `SELECT ${select}${tail} FROM json_each(?) WHERE true`;
}

/** `VALUES (?, …)`: one row of `columns` (and `extra` more placeholders), for SQLite's per-row statements. */
function valuesRow(columns: readonly Column[], extra = 0): string {
  return `VALUES (${Array.from({ length: columns.length + extra }, () => '?').join(', ')})`;
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
  [...columns.map(([name]) => name), ...more].map(quote).join(', ');

/** The rows as arrays of the columns' values, in the columns' order. */
function arraysOf(rows: readonly object[], columns: readonly Column[]): unknown[][] {
  const names = columns.map(([name]) => name);
  return rows.map((row) => names.map((name) => (row as Record<string, unknown>)[name]));
}

/** Rows per statement: keeps each JSON parameter to a few hundred kilobytes. */
const rowsPerStatement = 2000;

/**
 * The statements' texts per engine, built once: they depend on nothing but the engine, so the
 * driver prepares each once per connection.
 */
interface WriterSql {
  insertEvents: StatementSql;
  insertKeyedEvents: StatementSql;
  insertHourUsers: StatementSql;
  upsertRollups: StatementSql;
  upsertDayIntents: StatementSql;
  upsertHourTotals: StatementSql;
}

/**
 * The dimension columns each kind can set (as `toEventRow` maps it, src/analytics/events.ts); the
 * others hold their default, '' (and `success` NULL).
 */
const eventColumnsOfKind: Record<UsageEventKind, readonly string[]> = {
  interaction: ['type'],
  credit: ['type', 'model', 'diagramId', 'nodeId'],
  function_call: ['subjectId', 'name', 'success'],
  api_call: ['subjectId', 'name', 'success'],
  integration_call: ['subjectId', 'success'],
  kb_document: ['subjectId'],
  transcript: ['subjectId'],
  agent_invocation: ['subjectId', 'name', 'success'],
  intent: ['subjectId'],
};

/** Columns of an event row that a kind may leave out when they hold their default. */
const eventDefaults: ReadonlyMap<string, '' | null> = new Map<string, '' | null>([
  ['type', ''],
  ['model', ''],
  ['diagramId', ''],
  ['nodeId', ''],
  ['subjectId', ''],
  ['name', ''],
  ['success', null],
]);

/**
 * SQLite's per-row event insert: a text per kind that binds only the columns the kind can set
 * (the rest take the column's default: '' or NULL). better-sqlite3 copies every bound value in
 * and SQLite stores it: binding 10 or 11 values instead of 16 cut the events insert from about
 * 3.9 to 3.2 ms per batch of 1,000. A row whose left-out columns do not all hold their default (no
 * such row comes from `toEventRow`) gets `fullText` with every column, so what is stored is
 * always the row itself. The statement returned for a kind is the same object each time, its values
 * refilled (better-sqlite3 copies them when it binds): use it before asking for the next row of that
 * kind. Exported for its test.
 */
export function eventRowOf(head: string, tail: string, fullText: string): (values: unknown[]) => RowStatement {
  const names = eventColumns.map(([name]) => name);
  const kindIndex = names.indexOf('kind');
  const plans = new Map<unknown, { statement: RowStatement; kept: number[]; omitted: [number, '' | null][] }>();
  for (const [kind, own] of Object.entries(eventColumnsOfKind)) {
    const kept: number[] = [];
    const omitted: [number, '' | null][] = [];
    names.forEach((name, i) => {
      const fallback = eventDefaults.get(name);
      if (fallback !== undefined && !own.includes(name)) omitted.push([i, fallback]);
      else kept.push(i);
    });
    const columns = `${[...kept.map((i) => names[i]!), 'recordedAt'].map(quote).join(', ')}`;
    const text = `${head} (${columns}) VALUES (${Array.from({ length: kept.length + 1 }, () => '?').join(', ')}) ${tail}`;
    plans.set(kind, { statement: { text: text.trimEnd(), values: new Array<unknown>(kept.length) }, kept, omitted });
  }
  return (values) => {
    const plan = plans.get(values[kindIndex]);
    if (plan === undefined) return { text: fullText, values };
    const omitted = plan.omitted;
    for (let i = 0; i < omitted.length; i++) {
      const [column, fallback] = omitted[i]!;
      if (values[column] !== fallback) return { text: fullText, values };
    }
    // The kind's one statement and values array, refilled: no objects per row (see above).
    const kept = plan.kept;
    const out = plan.statement.values;
    for (let i = 0; i < kept.length; i++) out[i] = values[kept[i]!];
    return plan.statement;
  };
}

function writerSqlOf(provider: Provider): WriterSql {
  /** `INSERT INTO table (columns) <rows> <tail>`, as one statement over JSON rows and (SQLite) one per row. */
  const statement = (table: string, columns: readonly Column[], tail: string, bound?: string): StatementSql => {
    const head = `INSERT INTO "${table}" (${columnList(columns, ...(bound ? [bound] : []))})`;
    // recordedAt is the same for the whole batch: bound once, not repeated in every JSON row.
    const boundValue = bound ? (provider === 'postgresql' ? 'CAST($2 AS timestamp(3))' : '?') : undefined;
    const json = `${head} ${jsonRows(provider, columns, boundValue)} ${tail}`.trimEnd();
    if (provider === 'postgresql') return { json };
    return { json, row: `${head} ${valuesRow(columns, bound ? 1 : 0)} ${tail}`.trimEnd() };
  };
  /** The events insert; on SQLite with a text per kind (`eventRowOf`). */
  const events = (tail: string): StatementSql => {
    const sql = statement('UsageEvent', eventColumns, tail, 'recordedAt');
    if (sql.row === undefined) return sql;
    return { json: sql.json, rowOf: eventRowOf('INSERT INTO "UsageEvent"', tail, sql.row) };
  };
  return {
    insertEvents: events(''),
    // Only events with a key can conflict. The unique index holds only those (a partial index,
    // prisma/migrations/*/20261125140000_usage_event_key_partial): the conflict target names its
    // predicate, which both engines require to use a partial index as the arbiter.
    insertKeyedEvents: events(`ON CONFLICT ("projectId", "idempotencyKey") WHERE "idempotencyKey" IS NOT NULL DO NOTHING
      RETURNING "id"`),
    // On SQLite per row without RETURNING: whether the row went in is the run's `changes` (rowEcho).
    insertHourUsers: {
      json: statement(
        'UsageHourUser',
        hourUserColumns,
        `ON CONFLICT DO NOTHING
      RETURNING "projectId", "environmentId", "hour"`,
      ).json,
      ...(provider === 'sqlite'
        ? {
            row: statement('UsageHourUser', hourUserColumns, 'ON CONFLICT DO NOTHING').row,
            rowEcho: hourUserColumns.map(([name]) => name),
          }
        : {}),
    },
    upsertRollups: statement(
      'UsageRollup',
      rollupColumns,
      `ON CONFLICT ("projectId", "metric", "hour", "environmentId", "type", "model", "diagramId", "nodeId", "subjectId", "name")
      DO UPDATE SET "count" = "UsageRollup"."count" + excluded."count",
                    "successCount" = "UsageRollup"."successCount" + excluded."successCount"`,
    ),
    upsertDayIntents: statement(
      'UsageDayIntent',
      dayIntentColumns,
      `ON CONFLICT ("projectId", "day", "environmentId", "intent")
      DO UPDATE SET "count" = "UsageDayIntent"."count" + excluded."count"`,
    ),
    upsertHourTotals: statement(
      'UsageHourTotal',
      totalColumns,
      `ON CONFLICT ("projectId", "metric", "hour", "environmentId")
      DO UPDATE SET "count" = "UsageHourTotal"."count" + excluded."count",
                    "successCount" = "UsageHourTotal"."successCount" + excluded."successCount"
      RETURNING "projectId", "metric", "hour", "environmentId", "count", "successCount"`,
    ),
  };
}

const writerSql: Record<Provider, WriterSql> = {
  sqlite: writerSqlOf('sqlite'),
  postgresql: writerSqlOf('postgresql'),
};

/**
 * `storedTimestamp(provider, date)` (src/db/client.ts) for the many times of one batch, which
 * mostly fall in a few minutes: the text up to the minute is made once per minute by
 * `toISOString`, the seconds and milliseconds are appended. The same text for every time
 * (test/analytics/usage-event-writer.test.ts holds it to `storedTimestamp`), without a Date's
 * ISO formatting and a `replace` per event. Exported for that test.
 */
export function storedTimestamps(provider: Provider): (date: Date) => string {
  const suffix = provider === 'sqlite' ? '+00:00' : 'Z';
  let minute = Number.NaN;
  let prefix = '';
  return (date) => {
    const ms = date.getTime();
    const m = Math.floor(ms / 60_000);
    if (m !== minute) {
      // toISOString ends in "SS.sssZ" whatever the year's width; NaN (an invalid date) throws here as it does there.
      prefix = date.toISOString().slice(0, -7);
      minute = m;
    }
    const inMinute = ms - m * 60_000;
    const seconds = Math.floor(inMinute / 1000);
    const millis = inMinute - seconds * 1000;
    return `${prefix}${seconds < 10 ? '0' : ''}${seconds}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}${suffix}`;
  };
}

/** Inserts the event rows; returns those actually stored (not skipped as duplicates). */
function* insertEvents(
  provider: Provider,
  rows: UsageEventRow[],
  now: Date,
): Generator<Statement, UsageEventRow[], Row[]> {
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
  const recordedAt = storedTimestamp(provider, now);
  const timestampOf = storedTimestamps(provider);
  const sqlite = provider === 'sqlite';
  const stored: UsageEventRow[] = [];
  for (const chunk of chunks(unique, rowsPerStatement)) {
    const values = chunk.map((r) => [
      r.id,
      r.projectId,
      r.environmentId,
      r.kind,
      timestampOf(r.occurredAt),
      r.hour,
      r.userId,
      r.type,
      r.model,
      r.diagramId,
      r.nodeId,
      r.subjectId,
      r.name,
      r.quantity,
      // SQLite binds no booleans (its column holds 1 and 0, as JSON's true and false became).
      sqlite && r.success !== null ? Number(r.success) : r.success,
      r.idempotencyKey,
    ]);
    if (!keyed) {
      yield { sql: writerSql[provider].insertEvents, rows: values, bound: recordedAt, returning: false };
      stored.push(...chunk);
      continue;
    }
    const inserted = yield {
      sql: writerSql[provider].insertKeyedEvents,
      rows: values,
      bound: recordedAt,
      returning: true,
    };
    const ids = new Set(inserted.map((r) => r.id as string));
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

let lastHour = Number.NaN;
let lastPaddedHour = '';

/** The hour as ten digits, for keys that sort by it; the last one kept, as a batch's events mostly share their hour. */
function paddedHour(hour: number): string {
  if (hour !== lastHour) {
    lastPaddedHour = String(hour).padStart(10, '0');
    lastHour = hour;
  }
  return lastPaddedHour;
}

/**
 * Adds to the counter of (projectId, metric, hour, environmentId, dimensions). Runs for every
 * event: the key is one string built from the values (no key object, no spread), and the delta
 * object is made only for a counter not seen before in the batch.
 */
function addDelta(
  into: Map<string, CounterDelta>,
  projectId: string,
  metric: UsageQueryName,
  hour: number,
  environmentId: string,
  d: UsageDimensions,
  count: number,
  successCount: number,
): void {
  const s = keySeparator;
  const id = `${projectId}${s}${metric}${s}${paddedHour(hour)}${s}${environmentId}${s}${d.type}${s}${d.model}${s}${d.diagramId}${s}${d.nodeId}${s}${d.subjectId}${s}${d.name}`;
  const existing = into.get(id);
  if (existing) {
    existing.count += count;
    existing.successCount += successCount;
  } else {
    into.set(id, {
      projectId,
      metric,
      hour,
      environmentId,
      type: d.type,
      model: d.model,
      diagramId: d.diagramId,
      nodeId: d.nodeId,
      subjectId: d.subjectId,
      name: d.name,
      count,
      successCount,
    });
  }
}

/**
 * The counters in the order they are written: on PostgreSQL sorted by key (`sortedValues`), the
 * lock order every transaction follows; on SQLite as they came, since a SQLite write transaction
 * holds the whole database (BEGIN IMMEDIATE, or Prisma's first write), so two writers never hold
 * rows in different orders, and what is stored does not depend on the order within a transaction.
 */
function writeOrder<T>(provider: Provider, map: Map<string, T>): T[] {
  return provider === 'postgresql' ? sortedValues(map) : [...map.values()];
}

/**
 * Sorted by key: the lock order every transaction follows. The keys are sorted by `sort()`'s own
 * string order (UTF-16 code units, the order of `<`), without a comparison callback per pair.
 */
function sortedValues<T>(map: Map<string, T>): T[] {
  const keys = [...map.keys()].sort();
  const out = new Array<T>(keys.length);
  for (let i = 0; i < keys.length; i++) out[i] = map.get(keys[i]!)!;
  return out;
}

/** Inserts the (environment, hour, user) triples not seen before; returns the new ones. */
function* insertHourUsers(
  provider: Provider,
  rows: UsageEventRow[],
): Generator<Statement, { projectId: string; environmentId: string; hour: number }[], Row[]> {
  const triples = new Map<string, { projectId: string; environmentId: string; hour: number; userId: string }>();
  for (const r of rows) {
    if (r.userId === null) continue;
    const key = `${r.projectId}${keySeparator}${paddedHour(r.hour)}${keySeparator}${r.environmentId}${keySeparator}${r.userId}`;
    if (!triples.has(key))
      triples.set(key, { projectId: r.projectId, environmentId: r.environmentId, hour: r.hour, userId: r.userId });
  }
  const added: { projectId: string; environmentId: string; hour: number }[] = [];
  for (const chunk of chunks(writeOrder(provider, triples), rowsPerStatement)) {
    const inserted = yield {
      sql: writerSql[provider].insertHourUsers,
      rows: arraysOf(chunk, hourUserColumns),
      returning: true,
    };
    for (const row of inserted) {
      added.push({
        projectId: row.projectId as string,
        environmentId: row.environmentId as string,
        hour: Number(row.hour),
      });
    }
  }
  return added;
}

/** Rows written by `sql`, `rowsPerStatement` at a time, nothing read back. */
function* writeRows(
  sql: StatementSql,
  rows: readonly object[],
  columns: readonly Column[],
): Generator<Statement, void, Row[]> {
  for (const chunk of chunks(rows, rowsPerStatement)) {
    yield { sql, rows: arraysOf(chunk, columns), returning: false };
  }
}

interface DayIntentDelta {
  projectId: string;
  day: number;
  environmentId: string;
  intent: string;
  count: number;
}

function* upsertHourTotals(provider: Provider, deltas: CounterDelta[]): Generator<Statement, UsageCounter[], Row[]> {
  const counters: UsageCounter[] = [];
  for (const chunk of chunks(deltas, rowsPerStatement)) {
    const rows = yield {
      sql: writerSql[provider].upsertHourTotals,
      rows: arraysOf(chunk, totalColumns),
      returning: true,
    };
    // Counts come back as numbers, bigints or (PostgreSQL's driver, for bigint) decimal text.
    for (const r of rows) {
      counters.push({
        projectId: r.projectId as string,
        metric: r.metric as UsageQueryName,
        environmentId: r.environmentId as string,
        hour: Number(r.hour),
        count: Number(r.count),
        successCount: Number(r.successCount),
      });
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

/** Checks the events (unless `checked`) and gives them their rows: everything done before the first statement. */
function eventRowsOf(events: readonly UsageEvent[], opts: Omit<WriteOptions, 'provider'>, now: Date): UsageEventRow[] {
  if (!opts.checked) checkEvents(events);
  return events.map((event) => toEventRow(event, newId(), now));
}

/** The write of `rows` (see the top of this file), as statements for a runner to execute. */
function* usageWrite(provider: Provider, rows: UsageEventRow[], now: Date): UsageWrite {
  const stored = yield* insertEvents(provider, rows, now);

  const rollups = new Map<string, CounterDelta>();
  for (const r of stored) {
    addDelta(
      rollups,
      r.projectId,
      metricOfKind[r.kind],
      r.hour,
      r.environmentId,
      counterDimensionsOf(r),
      r.quantity,
      r.success ? 1 : 0,
    );
  }
  for (const u of yield* insertHourUsers(provider, stored)) {
    addDelta(rollups, u.projectId, 'unique_users', u.hour, u.environmentId, noDimensions, 1, 0);
  }
  const rollupDeltas = writeOrder(provider, rollups);
  yield* writeRows(writerSql[provider].upsertRollups, rollupDeltas, rollupColumns);

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
  yield* writeRows(writerSql[provider].upsertDayIntents, writeOrder(provider, dayIntents), dayIntentColumns);

  const totals = new Map<string, CounterDelta>();
  for (const d of rollupDeltas) {
    addDelta(totals, d.projectId, d.metric, d.hour, d.environmentId, noDimensions, d.count, d.successCount);
  }
  const counters = yield* upsertHourTotals(provider, sortedValues(totals));
  return { recorded: stored.length, duplicates: rows.length - stored.length, counters };
}

/**
 * Runs a write on SQLite's driver, inside the caller's `exclusive` transaction: synchronously, each
 * statement once per row where it has a per-row text (prepared once; see `StatementSql`).
 */
function runOnSqlite(write: UsageWrite, sql: SqliteStatements): RecordedUsage {
  let step = write.next();
  while (!step.done) {
    const { sql: text, rows, bound, returning } = step.value;
    let returned: Row[] = [];
    if (text.rowOf !== undefined) {
      const rowOf = text.rowOf;
      // The row's values then the bound value, as below.
      for (const values of rows) {
        const one = rowOf(values);
        if (returning) {
          const out =
            bound === undefined ? sql.get<Row>(one.text, one.values) : sql.get<Row>(one.text, one.values, bound);
          if (out !== undefined) returned.push(out);
        } else if (bound === undefined) sql.run(one.text, one.values);
        else sql.run(one.text, one.values, bound);
      }
    } else if (text.row === undefined) {
      const params = jsonParams('sqlite', step.value);
      if (returning) returned = sql.all<Row>(text.json, ...params);
      else sql.run(text.json, ...params);
    } else {
      const row = text.row;
      const echo = text.rowEcho;
      // better-sqlite3 binds an array's elements in order: the row's values, then the bound value
      // (passed as an argument of its own: no array spread per row).
      if (echo !== undefined) {
        for (const values of rows) {
          const changes = (bound === undefined ? sql.run(row, values) : sql.run(row, values, bound)).changes;
          if (changes > 0 && returning) returned.push(rowOf(echo, values));
        }
      } else if (returning) {
        for (const values of rows) {
          // RETURNING gives at most one row for one inserted row; SQLite makes the change at the first step.
          const out = bound === undefined ? sql.get<Row>(row, values) : sql.get<Row>(row, values, bound);
          if (out !== undefined) returned.push(out);
        }
      } else if (bound === undefined) for (const values of rows) sql.run(row, values);
      else for (const values of rows) sql.run(row, values, bound);
    }
    step = write.next(returned);
  }
  return step.value;
}

/** The row whose columns are `names` and values `values`, as RETURNING would give it. */
function rowOf(names: readonly string[], values: readonly unknown[]): Row {
  const row: Row = {};
  for (let i = 0; i < names.length; i++) row[names[i]!] = values[i];
  return row;
}

/**
 * A statement's parameters for its `json` text, in the order of their placeholders: SQLite's `?`
 * are numbered by position (the bound value of the SELECT list before json_each's rows);
 * PostgreSQL's are $1 (the rows) and $2.
 */
function jsonParams(provider: Provider, { rows, bound }: Statement): unknown[] {
  const json = JSON.stringify(rows);
  if (bound === undefined) return [json];
  return provider === 'sqlite' ? [bound, json] : [json, bound];
}

/** Runs a write statement by statement through `execute` (PostgreSQL's driver, a Prisma transaction), rows as JSON. */
async function runAsync(
  provider: Provider,
  write: UsageWrite,
  execute: (sql: string, params: unknown[], returning: boolean) => Promise<Row[]>,
): Promise<RecordedUsage> {
  let step = write.next();
  while (!step.done) {
    const statement = step.value;
    step = write.next(await execute(statement.sql.json, jsonParams(provider, statement), statement.returning));
  }
  return step.value;
}

/**
 * Writes usage events and their counters through `tx`, a Prisma interactive-transaction client
 * (or a plain client, if the caller accepts that a failure may leave part of the write). Use it
 * inside your own transaction so that usage commits or rolls back with your work; then, after the
 * commit, pass the result to `publishUsageCounters`. `provider` is `db.provider`: the statements
 * are in that engine's dialect. Without a transaction of its own to join, `recordUsageEvents`
 * writes through the driver instead, at a fraction of the cost.
 */
export async function writeUsageEvents(
  tx: UsageTx,
  events: readonly UsageEvent[],
  opts: WriteOptions,
): Promise<RecordedUsage> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, counters: [] };
  const now = opts.now ?? new Date();
  const rows = eventRowsOf(events, opts, now);
  return runAsync(opts.provider, usageWrite(opts.provider, rows, now), async (sql, params, returning) => {
    if (returning) return tx.$queryRawUnsafe<Row[]>(sql, ...params);
    await tx.$executeRawUnsafe(sql, ...params);
    return [];
  });
}

/**
 * Records usage events in a transaction of their own and announces the changed counters.
 * All or nothing: if any event is invalid or a write fails, nothing is stored.
 *
 * It runs on the database driver, not through Prisma (whose client costs about half a millisecond
 * of CPU per statement, and more for a large JSON parameter): on SQLite, synchronously inside
 * `exclusive` (BEGIN IMMEDIATE … COMMIT, prepared statements, nothing else on the connection
 * meanwhile); on PostgreSQL, in one transaction on one pooled connection.
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
  const now = opts.now ?? new Date();
  // Checked and shaped before the transaction: an invalid event never takes the writer's lock.
  const rows = eventRowsOf(events, opts, now);
  const driver = deps.db.driver;
  const recorded =
    driver.provider === 'sqlite'
      ? await driver.exclusive('usage.write', (sql) => runOnSqlite(usageWrite('sqlite', rows, now), sql), {
          transaction: true,
        })
      : await driver.transaction('usage.write', (sql) =>
          runAsync(
            'postgresql',
            usageWrite('postgresql', rows, now),
            async (text, params) => (await sql.query<Row>(text, params)).rows,
          ),
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
