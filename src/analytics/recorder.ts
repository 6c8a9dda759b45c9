import type { Db, PrismaDb } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { AppError, issuesToDetails, summarizeDetails } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub, UsageCountersPayload } from '../lib/pubsub';
import {
  counterDimensionsOf,
  recorderEventSchema,
  toEventRow,
  type UsageEvent,
  type UsageEventRow,
  usageLimits,
} from './events';
import {
  metricOfKind,
  emptyDimensions as noDimensions,
  periodOf,
  type UsageDimensions,
  type UsageQueryName,
} from './metrics';

/**
 * Records usage events and keeps the hourly counters exact, in one transaction:
 *
 * 1. the events go to UsageEvent (an event whose idempotency key is already there is skipped);
 * 2. each (environment, hour, user) goes to UsageHourUser with ON CONFLICT DO NOTHING, and only
 *    the rows actually inserted increment unique_users, so a user counts once per bucket even
 *    when two instances record it at the same moment;
 * 3. the increments, summed per counter first, go to UsageRollup and UsageHourTotal as
 *    INSERT … ON CONFLICT DO UPDATE SET count = count + excluded.count: atomic on SQLite and
 *    PostgreSQL alike, so concurrent writers never lose an increment. Rows are written in key
 *    order, so two transactions touching the same counters lock them in the same order.
 *
 * The SQL is the same on both engines; Prisma's tagged templates bind the parameters.
 */

/** A Prisma client or interactive-transaction client: what the recorder writes through. */
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

export interface UsageRecorderDeps {
  db: Db;
  /** Where to announce the changed counters; absent: nobody is told. */
  pubsub?: AppPubSub;
}

/** Rows per INSERT statement: well below SQLite's 32,766 and PostgreSQL's 65,535 parameters. */
const chunkSize = 400;

function chunks<T>(list: readonly T[], size = chunkSize): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/** Validates what an internal caller passes; a bad event is a bug in the caller, reported as such. */
function checkEvents(events: readonly UsageEvent[]): void {
  const problems = events.flatMap((event, index) => {
    const parsed = recorderEventSchema.safeParse(event);
    return parsed.success ? [] : issuesToDetails(parsed.error.issues, String(index));
  });
  if (problems.length) {
    throw new AppError('VALIDATION_FAILED', `Invalid usage event: ${summarizeDetails(problems)}`, {
      details: problems,
    });
  }
}

const eventColumns = Prisma.raw(
  '"id", "projectId", "environmentId", "kind", "occurredAt", "hour", "userId", "type", "model", "diagramId", "nodeId", "subjectId", "name", "quantity", "success", "idempotencyKey", "recordedAt"',
);

/** Inserts the event rows; returns those actually stored (not skipped as duplicates). */
async function insertEvents(tx: UsageTx, rows: UsageEventRow[], now: Date): Promise<UsageEventRow[]> {
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
  const stored: UsageEventRow[] = [];
  for (const chunk of chunks(unique)) {
    const values = Prisma.join(
      chunk.map(
        (r) =>
          Prisma.sql`(${r.id}, ${r.projectId}, ${r.environmentId}, ${r.kind}, ${r.occurredAt}, ${r.hour}, ${r.userId}, ${r.type}, ${r.model}, ${r.diagramId}, ${r.nodeId}, ${r.subjectId}, ${r.name}, ${BigInt(r.quantity)}, ${r.success}, ${r.idempotencyKey}, ${now})`,
      ),
    );
    if (!keyed) {
      await tx.$executeRaw`INSERT INTO "UsageEvent" (${eventColumns}) VALUES ${values}`;
      stored.push(...chunk);
      continue;
    }
    // Only events with a key can conflict (NULLs are distinct in a unique index on both engines).
    const inserted = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO "UsageEvent" (${eventColumns}) VALUES ${values}
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
  for (const chunk of chunks(sortedValues(triples))) {
    const values = Prisma.join(
      chunk.map((t) => Prisma.sql`(${t.projectId}, ${t.hour}, ${t.environmentId}, ${t.userId})`),
    );
    const inserted = await tx.$queryRaw<{ projectId: string; environmentId: string; hour: number | bigint }[]>`
      INSERT INTO "UsageHourUser" ("projectId", "hour", "environmentId", "userId") VALUES ${values}
      ON CONFLICT DO NOTHING
      RETURNING "projectId", "environmentId", "hour"`;
    for (const row of inserted) added.push({ ...row, hour: Number(row.hour) });
  }
  return added;
}

async function upsertRollups(tx: UsageTx, deltas: CounterDelta[]): Promise<void> {
  for (const chunk of chunks(deltas)) {
    const values = Prisma.join(
      chunk.map(
        (d) =>
          Prisma.sql`(${d.projectId}, ${d.metric}, ${d.hour}, ${d.environmentId}, ${d.type}, ${d.model}, ${d.diagramId}, ${d.nodeId}, ${d.subjectId}, ${d.name}, ${BigInt(d.count)}, ${BigInt(d.successCount)})`,
      ),
    );
    await tx.$executeRaw`
      INSERT INTO "UsageRollup" ("projectId", "metric", "hour", "environmentId", "type", "model", "diagramId", "nodeId", "subjectId", "name", "count", "successCount")
      VALUES ${values}
      ON CONFLICT ("projectId", "metric", "hour", "environmentId", "type", "model", "diagramId", "nodeId", "subjectId", "name")
      DO UPDATE SET "count" = "UsageRollup"."count" + excluded."count",
                    "successCount" = "UsageRollup"."successCount" + excluded."successCount"`;
  }
}

async function upsertHourTotals(tx: UsageTx, deltas: CounterDelta[]): Promise<UsageCounter[]> {
  const counters: UsageCounter[] = [];
  for (const chunk of chunks(deltas)) {
    const values = Prisma.join(
      chunk.map(
        (d) =>
          Prisma.sql`(${d.projectId}, ${d.metric}, ${d.hour}, ${d.environmentId}, ${BigInt(d.count)}, ${BigInt(d.successCount)})`,
      ),
    );
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
      INSERT INTO "UsageHourTotal" ("projectId", "metric", "hour", "environmentId", "count", "successCount")
      VALUES ${values}
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

/**
 * Writes usage events and their counters through `tx`, a Prisma interactive-transaction client
 * (or a plain client, if the caller accepts that a failure may leave part of the write). Use it
 * inside your own transaction so that usage commits or rolls back with your work; then, after the
 * commit, pass the result to `publishUsageCounters`.
 */
export async function writeUsageEvents(
  tx: UsageTx,
  events: readonly UsageEvent[],
  opts: { now?: Date } = {},
): Promise<RecordedUsage> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, counters: [] };
  checkEvents(events);
  const now = opts.now ?? new Date();
  const rows = events.map((event) => toEventRow(event, newId(), now));
  const stored = await insertEvents(tx, rows, now);

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
  for (const u of await insertHourUsers(tx, stored)) {
    addDelta(rollups, { ...u, metric: 'unique_users', ...noDimensions }, 1, 0);
  }
  const rollupDeltas = sortedValues(rollups);
  await upsertRollups(tx, rollupDeltas);

  const totals = new Map<string, CounterDelta>();
  for (const d of rollupDeltas) {
    addDelta(
      totals,
      { projectId: d.projectId, metric: d.metric, hour: d.hour, environmentId: d.environmentId, ...noDimensions },
      d.count,
      d.successCount,
    );
  }
  const counters = await upsertHourTotals(tx, sortedValues(totals));
  return { recorded: stored.length, duplicates: events.length - stored.length, counters };
}

/**
 * Records usage events in a transaction of their own and announces the changed counters.
 * All or nothing: if any event is invalid or a write fails, nothing is stored.
 */
export async function recordUsageEvents(
  deps: UsageRecorderDeps,
  events: readonly UsageEvent[],
  opts: { now?: Date } = {},
): Promise<RecordedUsage> {
  if (events.length === 0) return { recorded: 0, duplicates: 0, counters: [] };
  if (events.length > usageLimits.recorderBatch) {
    // A transaction holds its counters locked until it commits; keep transactions short.
    throw new AppError('VALIDATION_FAILED', `Record at most ${usageLimits.recorderBatch} usage events at a time.`);
  }
  const recorded = await deps.db.prisma.$transaction((tx) => writeUsageEvents(tx, events, opts), {
    // A large batch on a busy SQLite file waits for the single writer; do not give up after 2 s.
    maxWait: 15_000,
    timeout: 60_000,
  });
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
