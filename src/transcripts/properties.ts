import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { conflict, notFound, validationError } from '../lib/errors';
import { newId } from '../lib/ids';
import { isUniqueViolation } from './db';
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

const SCAN_BATCH = 1000;

/**
 * Renames and/or retypes a property. A new type is refused (409, with the count) while any stored
 * value would not parse under it; otherwise every value is rewritten to the new type's canonical
 * form in the same transaction.
 */
export async function updateProperty(
  db: Db,
  input: { projectId: string; propertyId: string; name?: string | null; type?: PropertyType | null },
): Promise<void> {
  try {
    await db.prisma.$transaction(
      async (tx) => {
        const property = await tx.transcriptProperty.findFirst({
          where: { id: input.propertyId, projectId: input.projectId },
        });
        if (!property) throw notFound('Transcript property', input.propertyId);
        if (input.name && input.name !== property.name) {
          const clash = await tx.transcriptProperty.findUnique({
            where: { projectId_name: { projectId: input.projectId, name: input.name } },
            select: { id: true },
          });
          if (clash) throw nameTaken(input.name);
        }
        const newType = input.type ?? property.type;
        if (newType !== property.type) {
          // Walk the values in key order, a batch at a time, collecting the rewrites per distinct value.
          const rewrites = new Map<string, { value: string; numberValue: number | null }>();
          let bad = 0;
          let example: string | null = null;
          let after: string | undefined;
          for (;;) {
            const batch = await tx.transcriptPropertyValue.findMany({
              where: { propertyId: property.id, ...(after ? { transcriptId: { gt: after } } : {}) },
              orderBy: { transcriptId: 'asc' },
              select: { transcriptId: true, value: true },
              take: SCAN_BATCH,
            });
            for (const row of batch) {
              const parsed = parsePropertyValue(newType, row.value);
              if (!parsed.ok) {
                bad++;
                example ??= row.value;
              } else rewrites.set(row.value, { value: parsed.value, numberValue: parsed.numberValue });
            }
            if (batch.length < SCAN_BATCH) break;
            after = batch[batch.length - 1]!.transcriptId;
          }
          if (bad > 0) {
            throw conflict(
              `Cannot change the type to ${newType}: ${bad} stored value${bad === 1 ? '' : 's'} would not parse as ${newType} (for example ${JSON.stringify(example)}); change or delete them first`,
            );
          }
          for (const [old, next] of rewrites) {
            await tx.transcriptPropertyValue.updateMany({
              where: { propertyId: property.id, value: old },
              data: { value: next.value, numberValue: next.numberValue },
            });
          }
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
    const property = await tx.transcriptProperty.findFirst({
      where: { id: input.propertyId, projectId: input.projectId },
      select: { id: true, type: true },
    });
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
