import type { Db } from '../db/client';
import type { Provider } from '../db/schema-source';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { Prisma } from '../generated/sqlite/client';
import { conflict, notFound, validationError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { PropertyType } from './validation';

/**
 * Transcript property definitions and values (DECISIONS.md §5). A value arrives as a string and is
 * stored in canonical form: numbers as JavaScript prints them (`1.50` → `1.5`), booleans as
 * `true`/`false`; a number property's value is also kept as a number for range filters.
 */

export type ParsedPropertyValue =
  | { ok: true; value: string; numberValue: number | null }
  | { ok: false; message: string };

const decimal = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

export function parsePropertyValue(type: PropertyType | string, text: string): ParsedPropertyValue {
  switch (type) {
    case 'number': {
      const trimmed = text.trim();
      const n = Number(trimmed);
      if (!decimal.test(trimmed) || !Number.isFinite(n))
        return { ok: false, message: 'must be a number, such as 42 or -1.5' };
      return { ok: true, value: String(n), numberValue: n };
    }
    case 'boolean': {
      const lowered = text.trim().toLowerCase();
      if (lowered !== 'true' && lowered !== 'false') return { ok: false, message: 'must be true or false' };
      return { ok: true, value: lowered, numberValue: null };
    }
    default:
      return { ok: true, value: text, numberValue: null };
  }
}

export async function createProperty(db: Db, input: { projectId: string; name: string; type: PropertyType }) {
  const existing = await db.prisma.transcriptProperty.findUnique({
    where: { projectId_name: { projectId: input.projectId, name: input.name } },
    select: { id: true },
  });
  if (existing) throw nameTaken(input.name);
  try {
    return await db.prisma.transcriptProperty.create({
      data: { id: newId(), projectId: input.projectId, name: input.name, type: input.type },
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(input.name);
    throw err;
  }
}

function nameTaken(name: string) {
  return conflict(`The project already has a transcript property named "${name}"`);
}

interface LockedProperty {
  id: string;
  name: string;
  type: string;
}

/**
 * Reads a property of the project as the transaction's first statement, locked until the
 * transaction ends, so that a value is always checked against the type that ends up committed:
 * a retype takes the lock exclusively (`update`), a value being set takes it shared (`share`).
 * Without it, on PostgreSQL (READ COMMITTED) a value set while a retype was between its check and
 * its commit was checked against the old type, and a number property could end up holding "abc".
 *
 * PostgreSQL: `SELECT … FOR UPDATE` / `FOR SHARE`; a reader that had to wait reads the row as the
 * other transaction committed it. SQLite has no row locks and one writer at a time: a no-op
 * UPDATE as the first statement takes the database's write lock before anything is read, so the
 * read is current and the transaction cannot fail later on a stale snapshot (another process on
 * the same file waits for the lock, under the busy timeout, instead).
 */
async function lockProperty(
  tx: PrismaTx,
  provider: Provider,
  where: { propertyId: string; projectId: string },
  mode: 'update' | 'share',
): Promise<LockedProperty | null> {
  let rows: LockedProperty[];
  if (provider === 'postgresql') {
    const lock = mode === 'update' ? Prisma.sql`FOR UPDATE` : Prisma.sql`FOR SHARE`;
    rows = await tx.$queryRaw<LockedProperty[]>`
      SELECT "id", "name", "type" FROM "TranscriptProperty"
      WHERE "id" = ${where.propertyId} AND "projectId" = ${where.projectId}
      ${lock}`;
  } else {
    rows = await tx.$queryRaw<LockedProperty[]>`
      UPDATE "TranscriptProperty" SET "updatedAt" = "updatedAt"
      WHERE "id" = ${where.propertyId} AND "projectId" = ${where.projectId}
      RETURNING "id", "name", "type"`;
  }
  return rows[0] ?? null;
}

/** Distinct values per page of the parse check (one indexed GROUP BY per page). */
const CHECK_BATCH = 1000;
/** Rows per page of the rewrite: one UPDATE of three bound parameters per row. */
const REWRITE_BATCH = 500;

/**
 * Checks that every stored value of a property parses under `type`: pages through the distinct
 * values in index order (keyset on the value), so memory holds one page whatever the count.
 * Parsing stays in `parsePropertyValue` (JavaScript's trim, Number and String), which SQL could
 * not reproduce exactly on both engines.
 */
async function countUnparsable(
  tx: PrismaTx,
  propertyId: string,
  type: PropertyType,
): Promise<{ bad: number; example: string | null }> {
  let bad = 0;
  let example: string | null = null;
  let after: string | undefined;
  for (;;) {
    const page = await tx.transcriptPropertyValue.groupBy({
      by: ['value'],
      where: { propertyId, ...(after !== undefined ? { value: { gt: after } } : {}) },
      _count: { _all: true },
      orderBy: { value: 'asc' },
      take: CHECK_BATCH,
    });
    for (const row of page) {
      if (parsePropertyValue(type, row.value).ok) continue;
      bad += row._count._all;
      example ??= row.value;
    }
    if (page.length < CHECK_BATCH) return { bad, example };
    after = page[page.length - 1]!.value;
  }
}

/**
 * Rewrites every value of a property to `type`'s canonical form, a page of rows at a time in
 * primary-key order (each row visited once), each page one UPDATE … FROM (VALUES …). Values and
 * numbers are bound parameters: a double sent through JSON text would be re-parsed by the engine.
 * Call after `countUnparsable` found nothing.
 */
async function rewriteValues(
  tx: PrismaTx,
  provider: Provider,
  propertyId: string,
  type: PropertyType,
  now: Date,
): Promise<void> {
  if (type === 'string') {
    // Every canonical number or boolean is already its own canonical string: only the number goes.
    await tx.$executeRaw`
      UPDATE "TranscriptPropertyValue" SET "numberValue" = NULL, "updatedAt" = ${now}
      WHERE "propertyId" = ${propertyId}`;
    return;
  }
  const postgres = provider === 'postgresql';
  // PostgreSQL cannot infer a type for a parameter inside VALUES; SQLite needs no cast.
  const text = (v: string) => (postgres ? Prisma.sql`CAST(${v} AS TEXT)` : Prisma.sql`${v}`);
  const real = (v: number | null) => (postgres ? Prisma.sql`CAST(${v} AS DOUBLE PRECISION)` : Prisma.sql`${v}`);
  let after: string | undefined;
  for (;;) {
    const page = await tx.transcriptPropertyValue.findMany({
      where: { propertyId, ...(after !== undefined ? { transcriptId: { gt: after } } : {}) },
      orderBy: { transcriptId: 'asc' },
      select: { transcriptId: true, value: true },
      take: REWRITE_BATCH,
    });
    if (page.length === 0) return;
    const rows = page.map((row) => {
      const parsed = parsePropertyValue(type, row.value);
      // countUnparsable ran in this transaction under the property's exclusive lock (lockProperty):
      // no value set since could have been checked against another type.
      if (!parsed.ok) throw new Error(`value ${JSON.stringify(row.value)} stopped parsing as ${type}`);
      return Prisma.sql`(${text(row.transcriptId)}, ${text(parsed.value)}, ${real(parsed.numberValue)})`;
    });
    await tx.$executeRaw`
      UPDATE "TranscriptPropertyValue"
      SET "value" = m.column2, "numberValue" = m.column3, "updatedAt" = ${now}
      FROM (VALUES ${Prisma.join(rows)}) AS m
      WHERE "TranscriptPropertyValue"."propertyId" = ${propertyId}
        AND "TranscriptPropertyValue"."transcriptId" = m.column1`;
    if (page.length < REWRITE_BATCH) return;
    after = page[page.length - 1]!.transcriptId;
  }
}

/**
 * Renames and/or retypes a property. A new type is refused (409, with the count) while any stored
 * value would not parse under it; otherwise every value is rewritten to the new type's canonical
 * form in the same transaction. Both steps page through the values (see countUnparsable and
 * rewriteValues), so their cost is a statement per page, and their memory one page.
 */
export async function updateProperty(
  db: Db,
  input: { projectId: string; propertyId: string; name?: string | null; type?: PropertyType | null },
): Promise<void> {
  try {
    await db.prisma.$transaction(
      async (tx) => {
        const property = await lockProperty(tx, db.provider, input, 'update');
        if (!property) throw notFound('Transcript property', input.propertyId);
        if (input.name && input.name !== property.name) {
          const clash = await tx.transcriptProperty.findUnique({
            where: { projectId_name: { projectId: input.projectId, name: input.name } },
            select: { id: true },
          });
          if (clash) throw nameTaken(input.name);
        }
        const newType = input.type ?? (property.type as PropertyType);
        if (newType !== property.type) {
          const { bad, example } = await countUnparsable(tx, property.id, newType);
          if (bad > 0) {
            throw conflict(
              `Cannot change the type to ${newType}: ${bad} stored value${bad === 1 ? '' : 's'} would not parse as ${newType} (for example ${JSON.stringify(example)}); change or delete them first`,
            );
          }
          await rewriteValues(tx, db.provider, property.id, newType, new Date());
        }
        await tx.transcriptProperty.update({
          where: { id: property.id },
          data: { ...(input.name ? { name: input.name } : {}), type: newType },
        });
      },
      { timeout: 60_000 },
    );
  } catch (err) {
    if (isUniqueViolation(err) && input.name) throw nameTaken(input.name);
    throw err;
  }
}

/** Deletes a property; its values on every transcript go with it (foreign-key cascade, one statement). */
export async function deleteProperty(db: Db, input: { projectId: string; propertyId: string }): Promise<void> {
  const { count } = await db.prisma.transcriptProperty.deleteMany({
    where: { id: input.propertyId, projectId: input.projectId },
  });
  if (count === 0) throw notFound('Transcript property', input.propertyId);
}

/**
 * Sets (replaces) the value of a property on a transcript, both of the project. Bumps the
 * transcript's `updatedAt`, so searches by update time see the change.
 */
export async function setPropertyValue(
  db: Db,
  input: {
    projectId: string;
    propertyId: string;
    transcriptId: string;
    value: string;
    metadata?: Record<string, unknown> | null;
  },
) {
  return db.prisma.$transaction(async (tx) => {
    // Shared with other values being set, exclusive of a retype (see lockProperty).
    const property = await lockProperty(tx, db.provider, input, 'share');
    if (!property) throw notFound('Transcript property', input.propertyId);
    const parsed = parsePropertyValue(property.type, input.value);
    if (!parsed.ok) {
      throw validationError(`value: ${parsed.message} (the property is of type ${property.type})`, [
        { path: 'value', message: parsed.message },
      ]);
    }
    const now = new Date();
    const { count } = await tx.transcript.updateMany({
      where: { id: input.transcriptId, projectId: input.projectId },
      data: { updatedAt: now },
    });
    if (count === 0) throw notFound('Transcript', input.transcriptId);
    // Replacing a value replaces its metadata too: none given stores SQL NULL. (Both generated
    // clients share one runtime, so SQLite's DbNull serves PostgreSQL as well.)
    const metadata = input.metadata ? (input.metadata as object) : Prisma.DbNull;
    const data = { value: parsed.value, numberValue: parsed.numberValue, metadata };
    const row = await tx.transcriptPropertyValue.upsert({
      where: { transcriptId_propertyId: { transcriptId: input.transcriptId, propertyId: property.id } },
      create: { transcriptId: input.transcriptId, propertyId: property.id, ...data },
      update: data,
    });
    return row;
  });
}

export async function deletePropertyValue(
  db: Db,
  input: { projectId: string; transcriptId: string; propertyId: string },
): Promise<void> {
  await db.prisma.$transaction(async (tx) => {
    const transcript = await tx.transcript.findFirst({
      where: { id: input.transcriptId, projectId: input.projectId },
      select: { id: true },
    });
    if (!transcript) throw notFound('Transcript', input.transcriptId);
    const property = await tx.transcriptProperty.findFirst({
      where: { id: input.propertyId, projectId: input.projectId },
      select: { id: true },
    });
    if (!property) throw notFound('Transcript property', input.propertyId);
    const { count } = await tx.transcriptPropertyValue.deleteMany({
      where: { transcriptId: transcript.id, propertyId: property.id },
    });
    if (count === 0) throw notFound('Value of transcript property', input.propertyId);
    await tx.transcript.update({ where: { id: transcript.id }, data: { updatedAt: new Date() } });
  });
}
