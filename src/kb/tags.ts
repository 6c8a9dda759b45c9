import { z } from 'zod';
import type { Db } from '../db/client';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { Prisma } from '../generated/sqlite/client';
import { AppError, conflict, notFound } from '../lib/errors';
import { newId } from '../lib/ids';
import { isStorableText, UNSTORABLE_TEXT_MESSAGE } from '../lib/storable-text';

/**
 * Knowledge-base tags (the original's v3alpha tags, docs/knowledge-base.md "Tags"): labels of a
 * project, unique per project, attached to documents; a query's `tags` member chooses which
 * documents it reads by them. Plain functions over the database, no GraphQL.
 */

export const kbTagLimits = { label: 100, perRequest: 100 } as const;

/** A tag's label: trimmed, 1..100 characters. */
export const tagLabelSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(kbTagLimits.label, `must be at most ${kbTagLimits.label} characters`)
  .refine(isStorableText, UNSTORABLE_TEXT_MESSAGE);

/** Labels of a request (attach, detach, upload): 1..100 of them, duplicates collapsed. */
export const tagLabelsSchema = z
  .array(tagLabelSchema)
  .min(1, 'must name at least one tag')
  .max(kbTagLimits.perRequest, `must name at most ${kbTagLimits.perRequest} tags`)
  .transform((labels) => [...new Set(labels)]);

/** Labels of an upload's `tags` option: like tagLabelsSchema, and empty means none. */
export const uploadTagLabelsSchema = z
  .array(tagLabelSchema)
  .max(kbTagLimits.perRequest, `must name at most ${kbTagLimits.perRequest} tags`)
  .transform((labels) => [...new Set(labels)]);

const tagOperatorSchema = z.enum(['and', 'or'], { error: 'must be "and" or "or"' });
const tagItemsSchema = z
  .array(z.string().max(kbTagLimits.label, `must be at most ${kbTagLimits.label} characters`))
  .max(kbTagLimits.perRequest, `must name at most ${kbTagLimits.perRequest} tags`);

/** The query's `tags` member as the original documents it (knowledge-base-query-api). */
export const tagFilterSchema = z.strictObject({
  include: z.strictObject({ items: tagItemsSchema.default([]), operator: tagOperatorSchema.default('or') }).optional(),
  exclude: z.strictObject({ items: tagItemsSchema.default([]), operator: tagOperatorSchema.default('and') }).optional(),
  includeAllTagged: z.boolean().optional(),
  includeAllNonTagged: z.boolean().optional(),
});

export type TagFilter = z.infer<typeof tagFilterSchema>;

export interface KbTagRow {
  id: string;
  projectId: string;
  label: string;
  createdAt: Date;
  updatedAt: Date;
}

const duplicateLabel = (label: string) => conflict(`A tag labelled "${label}" already exists in this project.`);

export async function createTag(db: Db, input: { projectId: string; label: string }): Promise<KbTagRow> {
  try {
    return await db.prisma.kbTag.create({ data: { id: newId(), projectId: input.projectId, label: input.label } });
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateLabel(input.label);
    throw err;
  }
}

/** The project's tags, by label. */
export function listTags(db: Db, projectId: string): Promise<KbTagRow[]> {
  return db.prisma.kbTag.findMany({ where: { projectId }, orderBy: [{ label: 'asc' }, { id: 'asc' }] });
}

export async function getTag(db: Db, input: { projectId: string; tagId: string }): Promise<KbTagRow> {
  const tag = await db.prisma.kbTag.findFirst({ where: { id: input.tagId, projectId: input.projectId } });
  if (!tag) throw notFound('Tag', input.tagId);
  return tag;
}

/** Relabels a tag; documents keep it (they link to its ID), queries name it by its new label. */
export async function updateTag(db: Db, input: { projectId: string; tagId: string; label: string }): Promise<KbTagRow> {
  await getTag(db, input);
  try {
    return await db.prisma.kbTag.update({ where: { id: input.tagId }, data: { label: input.label } });
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateLabel(input.label);
    throw err;
  }
}

/** Deletes a tag and detaches it from every document. */
export async function deleteTag(db: Db, input: { projectId: string; tagId: string }): Promise<void> {
  const { count } = await db.prisma.kbTag.deleteMany({ where: { id: input.tagId, projectId: input.projectId } });
  if (count === 0) throw notFound('Tag', input.tagId);
}

/**
 * The tags of `labels` in a project. Missing labels are created with `createMissing` (an upload's
 * `tags`), otherwise a 404 naming them (attach and detach take existing tags only).
 */
async function tagsOfLabels(
  tx: PrismaTx,
  projectId: string,
  labels: readonly string[],
  createMissing: boolean,
): Promise<{ id: string; label: string }[]> {
  const found = await tx.kbTag.findMany({
    where: { projectId, label: { in: [...labels] } },
    select: { id: true, label: true },
  });
  const known = new Set(found.map((t) => t.label));
  const missing = labels.filter((l) => !known.has(l));
  if (missing.length === 0) return found;
  if (!createMissing) {
    throw new AppError(
      'NOT_FOUND',
      `No tag labelled ${missing.map((l) => JSON.stringify(l)).join(', ')} in this project: create it first (POST /v3alpha/knowledge-base/tags).`,
    );
  }
  const created = missing.map((label) => ({ id: newId(), projectId, label }));
  await tx.kbTag.createMany({ data: created });
  return [...found, ...created.map(({ id, label }) => ({ id, label }))];
}

/** Attaches tags to a document inside the caller's transaction (already attached ones stay as they are). */
export async function attachTagsInTx(
  tx: PrismaTx,
  input: { projectId: string; documentId: string; labels: readonly string[]; createMissing?: boolean },
): Promise<void> {
  const tags = await tagsOfLabels(tx, input.projectId, input.labels, input.createMissing ?? false);
  const attached = await tx.kbDocumentTag.findMany({
    where: { documentId: input.documentId, tagId: { in: tags.map((t) => t.id) } },
    select: { tagId: true },
  });
  const have = new Set(attached.map((a) => a.tagId));
  const add = tags.filter((t) => !have.has(t.id)).map((t) => ({ documentId: input.documentId, tagId: t.id }));
  if (add.length) await tx.kbDocumentTag.createMany({ data: add });
}

async function requireDocument(tx: PrismaTx, projectId: string, documentId: string): Promise<void> {
  const doc = await tx.kbDocument.findFirst({ where: { id: documentId, projectId }, select: { id: true } });
  if (!doc) throw notFound('Document', documentId);
}

/** Attaches existing tags (by label) to a document; an unknown label is a 404 and nothing changes. */
export async function attachTags(
  db: Db,
  input: { projectId: string; documentId: string; labels: readonly string[] },
): Promise<void> {
  try {
    await db.prisma.$transaction(async (tx) => {
      await requireDocument(tx, input.projectId, input.documentId);
      await attachTagsInTx(tx, input);
    });
  } catch (err) {
    // Two requests attaching the same tag at once: the other one did it.
    if (!isUniqueViolation(err)) throw err;
  }
}

/** Detaches tags (by label) from a document; an unknown label is a 404, a tag not attached is no change. */
export async function detachTags(
  db: Db,
  input: { projectId: string; documentId: string; labels: readonly string[] },
): Promise<void> {
  await db.prisma.$transaction(async (tx) => {
    await requireDocument(tx, input.projectId, input.documentId);
    const tags = await tagsOfLabels(tx, input.projectId, input.labels, false);
    await tx.kbDocumentTag.deleteMany({
      where: { documentId: input.documentId, tagId: { in: tags.map((t) => t.id) } },
    });
  });
}

/**
 * The query's tag filter as a boolean SQL expression over a document ID column (TRUE for no
 * filter), to be ANDed with the metadata filter: it restricts which documents' chunks retrieval
 * considers, in the database, before ranking. Semantics (docs/knowledge-base.md "Tags"):
 * a document is eligible when it matches `include` (items with `or`: any of them; `and`: all),
 * or is tagged and `includeAllTagged`, or is untagged and `includeAllNonTagged`; with none of
 * these given every document is eligible. Then `exclude` removes documents carrying its items
 * (`and`, the default: all of them; `or`: any). A label no tag has matches no document.
 */
export function compileTagFilter(filter: TagFilter | undefined, documentColumn: Prisma.Sql): Prisma.Sql {
  if (!filter) return Prisma.sql`TRUE`;
  const hasLabel = (label: string) => Prisma.sql`EXISTS (SELECT 1 FROM "KbDocumentTag" AS dt
      JOIN "KbTag" AS t ON t."id" = dt."tagId" WHERE dt."documentId" = ${documentColumn} AND t."label" = ${label})`;
  const tagged = Prisma.sql`EXISTS (SELECT 1 FROM "KbDocumentTag" AS dt WHERE dt."documentId" = ${documentColumn})`;
  const combine = (labels: readonly string[], operator: 'and' | 'or') =>
    Prisma.sql`(${Prisma.join(labels.map(hasLabel), operator === 'and' ? ' AND ' : ' OR ')})`;

  const include: Prisma.Sql[] = [];
  const includeItems = filter.include?.items ?? [];
  if (includeItems.length) include.push(combine(includeItems, filter.include?.operator ?? 'or'));
  if (filter.includeAllTagged) include.push(tagged);
  if (filter.includeAllNonTagged) include.push(Prisma.sql`NOT ${tagged}`);
  const parts: Prisma.Sql[] = [];
  if (include.length) parts.push(Prisma.sql`(${Prisma.join(include, ' OR ')})`);
  const excludeItems = filter.exclude?.items ?? [];
  if (excludeItems.length) parts.push(Prisma.sql`NOT ${combine(excludeItems, filter.exclude?.operator ?? 'and')}`);
  return parts.length ? Prisma.sql`(${Prisma.join(parts, ' AND ')})` : Prisma.sql`TRUE`;
}
