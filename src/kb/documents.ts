import { resolveEnvironment } from '../admin/environments';
import { type Db, storedTimestamp } from '../db/client';
import { isUniqueViolation, type PrismaTx } from '../db/transaction';
import { Prisma } from '../generated/sqlite/client';
import {
  type EnqueueInput,
  enqueueJob,
  enqueueJobSqlite,
  jobInsertPostgres,
  jobOfDedupeKeyPostgres,
  notifyEnqueued,
} from '../jobs/queue';
import type { JobReservation, JobRunner } from '../jobs/runner';
import { notFound } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub } from '../lib/pubsub';
import { type KbFileType, kbFileTypeNames } from './parse';
import { attachTagsInTx } from './tags';
import { kbLimits } from './validation';

/**
 * Knowledge-base documents: uploads, replacement, metadata, deletion, listing (DECISIONS.md §7).
 * An upload stores its content and enqueues an ingestion job in one transaction; the job
 * (src/kb/ingest.ts) parses, chunks and indexes it, and swaps the new chunks in atomically.
 */

export const KB_INGEST_QUEUE = 'kb-ingest';

export const kbDocumentStatuses = ['PENDING', 'SUCCESS', 'ERROR'] as const;
export type KbDocumentStatus = (typeof kbDocumentStatuses)[number];

/** `data.type` of a document: a file's type, `url` or `table`. */
export const kbDocumentTypes = [...kbFileTypeNames, 'url', 'table'] as const;
export type KbDocumentType = (typeof kbDocumentTypes)[number];

export interface KbIngestJobPayload {
  documentId: string;
  revision: number;
  [key: string]: unknown;
}

/** What an upload carries. */
export type KbSourceInput =
  | { kind: 'file'; type: KbFileType; filename: string; contentType: string | null; bytes: Uint8Array }
  | { kind: 'url'; url: string; name?: string }
  | {
      kind: 'table';
      name: string;
      schema: { searchableFields: string[]; metadataFields: string[] };
      items: Record<string, unknown>[];
    };

export interface KbDeps {
  db: Db;
  pubsub: AppPubSub;
  /** This instance's job runner: an upload that waits runs its ingestion here (UploadInput.runHere). */
  jobs?: Pick<JobRunner, 'reserve'>;
}

/**
 * What an upload hands its ingestion job in process (JobContext.local) when this instance runs
 * it at once: the document as the upload wrote it and its source, so that the job does not read
 * back what it was just given. Any other delivery reads them (src/kb/ingest.ts).
 */
export interface KbIngestHandOff {
  documentId: string;
  revision: number;
  document: {
    id: string;
    projectId: string;
    environmentId: string | null;
    kind: string;
    type: string;
    name: string;
    url: string | null;
    status: string;
    revision: number;
    maxChunkSize: number;
    source: { bytes: Uint8Array | null; filename: string | null; table: unknown } | null;
  };
}

export const documentSelect = {
  id: true,
  projectId: true,
  kind: true,
  type: true,
  name: true,
  url: true,
  metadata: true,
  status: true,
  statusDetail: true,
  maxChunkSize: true,
  rowsCount: true,
  chunkCount: true,
  revision: true,
  environmentId: true,
  createdAt: true,
  updatedAt: true,
} as const;

export type KbDocumentRow = Prisma.KbDocumentGetPayload<{ select: typeof documentSelect }>;

/** What overwrite=true matches: a file's name, a URL, or a table's name. */
function sameSourceWhere(projectId: string, source: KbSourceInput): Prisma.KbDocumentWhereInput {
  switch (source.kind) {
    case 'file':
      return { projectId, kind: 'file', name: source.filename };
    case 'url':
      return { projectId, kind: 'url', url: source.url };
    case 'table':
      return { projectId, kind: 'table', name: source.name };
  }
}

function describeSource(source: KbSourceInput): {
  kind: string;
  type: KbDocumentType;
  name: string;
  url: string | null;
  rowsCount: number | null;
} {
  switch (source.kind) {
    case 'file':
      return { kind: 'file', type: source.type, name: source.filename, url: null, rowsCount: null };
    case 'url':
      return { kind: 'url', type: 'url', name: source.name ?? source.url, url: source.url, rowsCount: null };
    case 'table':
      return { kind: 'table', type: 'table', name: source.name, url: null, rowsCount: source.items.length };
  }
}

function sourceColumns(source: KbSourceInput, revision: number) {
  return {
    revision,
    bytes: source.kind === 'file' ? Buffer.from(source.bytes) : null,
    filename: source.kind === 'file' ? source.filename : null,
    contentType: source.kind === 'file' ? source.contentType : null,
    table:
      source.kind === 'table'
        ? ({ schema: source.schema, items: source.items } as Prisma.InputJsonValue)
        : Prisma.DbNull,
  };
}

function ingestionJob(projectId: string, documentId: string, revision: number): EnqueueInput {
  const payload: KbIngestJobPayload = { documentId, revision };
  return { queue: KB_INGEST_QUEUE, payload, dedupeKey: `kb-ingest:${documentId}:${revision}`, projectId };
}

async function enqueueIngestion(tx: PrismaTx, projectId: string, documentId: string, revision: number) {
  await enqueueJob(tx, ingestionJob(projectId, documentId, revision));
}

/**
 * Rows of settled revisions handed from the ingestion job to the `waitForDocument` calls of this
 * process that wait for them (keyed `documentId:revision`), so that a waiter wakes with the row
 * the job's transaction wrote instead of reading it again. Only revisions a waiter registered are
 * kept, and only while it waits; waiters on other instances (the event through Redis carries IDs
 * only) and a lost hand-off read the document as before. Per pubsub: one per app instance.
 */
const settledRows = new WeakMap<AppPubSub, Map<string, { waiters: number; row?: KbDocumentRow }>>();

/**
 * Rows a waited upload wrote whose ingestion job was handed to this process's runner
 * (JobRunner.reserve): the job starts on a later turn of the event loop, after the upload's
 * waiter registered (its resolver awaits nothing else in between), so the waiter can start from
 * the PENDING row written instead of reading it. Should the job settle first all the same, the
 * waiter would find out by its poll, as for a lost event.
 */
const runsAfterWaiter = new WeakSet<KbDocumentRow>();

/**
 * Tells waiters and subscribers that a document's status changed; `row`, the document as the
 * change committed it, goes to this process's waiters for that revision.
 */
export function publishDocumentStatus(
  pubsub: AppPubSub,
  doc: Pick<KbDocumentRow, 'id' | 'revision' | 'status'>,
  row?: KbDocumentRow,
) {
  if (row) {
    const waiting = settledRows.get(pubsub)?.get(`${doc.id}:${doc.revision}`);
    if (waiting) waiting.row = row;
  }
  pubsub.publish('kbDocument', doc.id, { documentId: doc.id, revision: doc.revision, status: doc.status });
}

/**
 * Makes `source` the next revision of an existing document: PENDING again, its upload stored for
 * the ingestion job. Its chunks are untouched until that job succeeds.
 */
async function storeNextRevision(
  tx: PrismaTx,
  documentId: string,
  source: KbSourceInput,
  changes: { metadata?: Prisma.InputJsonValue; maxChunkSize?: number; environmentId?: string },
): Promise<KbDocumentRow> {
  const row = await tx.kbDocument.update({
    where: { id: documentId },
    data: {
      ...describeSource(source),
      ...changes,
      status: 'PENDING',
      statusDetail: null,
      revision: { increment: 1 },
    },
    select: documentSelect,
  });
  const columns = sourceColumns(source, row.revision);
  await tx.kbDocumentSource.upsert({
    where: { documentId: row.id },
    create: { documentId: row.id, ...columns },
    update: columns,
  });
  return row;
}

export interface UploadInput {
  projectId: string;
  source: KbSourceInput;
  metadata: Record<string, unknown>;
  /** Replace the newest document with the same file name, URL or table name, keeping its ID. */
  overwrite: boolean;
  maxChunkSize?: number;
  /**
   * The environment (ID or alias) the document is used in: its embedding tokens are charged there
   * (docs/knowledge-base.md "Usage"). Unknown: 404. Absent: a new document is charged to
   * `development`; an overwritten one keeps its environment.
   */
  environment?: string | null;
  /** Labels of tags to attach (created when the project has none by that label); an overwritten document keeps its others. */
  tags?: readonly string[];
  /**
   * The caller waits for the ingestion (wait=true): when this instance's runner has a place
   * (KbDeps.jobs), a plain upload writes its job already claimed by it, in the upload's own
   * transaction, and runs it as soon as that commits, handing it the document and its bytes.
   * Otherwise, and for every other upload, the job is queued for any instance, as before.
   */
  runHere?: boolean;
}

/**
 * Stores an upload and enqueues its ingestion. With `overwrite`, the newest document of the same
 * file name, URL or table name gets the new content as its next revision (same documentID); its
 * current chunks stay searchable until the new ones are ready, and stay if ingestion fails.
 */
export async function uploadDocument(deps: KbDeps, input: UploadInput): Promise<KbDocumentRow> {
  try {
    return await storeUpload(deps, input);
  } catch (err) {
    // Another upload created one of the same new tags at the same moment: now it exists.
    if (input.tags?.length && isUniqueViolation(err)) return storeUpload(deps, input);
    throw err;
  }
}

async function storeUpload(deps: KbDeps, input: UploadInput): Promise<KbDocumentRow> {
  const described = describeSource(input.source);
  const maxChunkSize = input.maxChunkSize ?? kbLimits.chunkSize.default;
  if (!input.overwrite && !input.environment && !input.tags?.length) {
    const reservation = (input.runHere && deps.jobs?.reserve(KB_INGEST_QUEUE)) || null;
    let stored: Awaited<ReturnType<typeof insertNewDocument>>;
    try {
      stored = await insertNewDocument(deps.db, { ...input, described, maxChunkSize }, reservation);
    } catch (err) {
      reservation?.release();
      throw err;
    }
    const { row, job } = stored;
    if (reservation && job.created) {
      const handOff: KbIngestHandOff = {
        documentId: row.id,
        revision: row.revision,
        document: {
          id: row.id,
          projectId: row.projectId,
          environmentId: row.environmentId,
          kind: row.kind,
          type: row.type,
          name: row.name,
          url: row.url,
          status: row.status,
          revision: row.revision,
          maxChunkSize: row.maxChunkSize,
          source: sourceOf(input.source),
        },
      };
      reservation.run(
        {
          id: job.id,
          queue: KB_INGEST_QUEUE,
          payload: job.payload,
          maxAttempts: job.maxAttempts,
          projectId: row.projectId,
        },
        handOff,
      );
      runsAfterWaiter.add(row);
    } else {
      reservation?.release();
      notifyEnqueued(deps.pubsub, KB_INGEST_QUEUE);
    }
    return row;
  }
  const doc = await deps.db.prisma.$transaction(async (tx) => {
    const environmentId = input.environment
      ? (await resolveEnvironment(tx, input.projectId, input.environment)).id
      : null;
    const existing = input.overwrite
      ? await tx.kbDocument.findFirst({
          where: sameSourceWhere(input.projectId, input.source),
          orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
          select: { id: true },
        })
      : null;
    let row: KbDocumentRow;
    if (existing) {
      row = await storeNextRevision(tx, existing.id, input.source, {
        metadata: input.metadata as Prisma.InputJsonValue,
        maxChunkSize,
        ...(environmentId ? { environmentId } : {}),
      });
    } else {
      row = await tx.kbDocument.create({
        data: {
          id: newId(),
          projectId: input.projectId,
          ...described,
          metadata: input.metadata as Prisma.InputJsonValue,
          maxChunkSize,
          environmentId,
          source: { create: sourceColumns(input.source, 1) },
        },
        select: documentSelect,
      });
    }
    if (input.tags?.length) {
      await attachTagsInTx(tx, {
        projectId: input.projectId,
        documentId: row.id,
        labels: input.tags,
        createMissing: true,
      });
    }
    await enqueueIngestion(tx, input.projectId, row.id, row.revision);
    return row;
  });
  notifyEnqueued(deps.pubsub, KB_INGEST_QUEUE);
  return doc;
}

/** A source as the ingestion job reads it back from KbDocumentSource (bytes, filename, table). */
function sourceOf(source: KbSourceInput): KbIngestHandOff['document']['source'] {
  switch (source.kind) {
    case 'file':
      return { bytes: source.bytes, filename: source.filename, table: null };
    case 'url':
      return { bytes: null, filename: null, table: null };
    case 'table':
      return { bytes: null, filename: null, table: { schema: source.schema, items: source.items } };
  }
}

const insertDocumentColumns = `"id", "projectId", "kind", "type", "name", "url", "metadata", "status", "maxChunkSize",
  "rowsCount", "chunkCount", "revision", "createdAt", "updatedAt"`;
const insertSourceColumns = `"documentId", "revision", "bytes", "filename", "contentType", "table", "createdAt"`;

/**
 * A new document (no overwrite, no environment, no tags: the plain upload) with its stored upload
 * and its ingestion job, in one transaction run straight through the database driver (Db.driver):
 * three INSERTs (on PostgreSQL one statement, a WITH of the three), without Prisma's query
 * compiler and interpreter around them, nor its handling of the upload's bytes, which cost more
 * than the statement (docs/performance.md). The rows are the ones Prisma writes (JSON as text on
 * SQLite, DateTime as storedTimestamp); the answer is the row as documentSelect reads it back.
 * With a `reservation` (UploadInput.runHere), the job is written claimed by this instance's runner.
 */
async function insertNewDocument(
  db: Db,
  input: UploadInput & { described: ReturnType<typeof describeSource>; maxChunkSize: number },
  reservation: JobReservation | null,
): Promise<{
  row: KbDocumentRow;
  job: { id: string; created: boolean; payload: Record<string, unknown>; maxAttempts: number };
}> {
  const { described, source } = input;
  const now = new Date();
  const metadata = JSON.stringify(input.metadata);
  const row: KbDocumentRow = {
    id: newId(),
    projectId: input.projectId,
    kind: described.kind,
    type: described.type,
    name: described.name,
    url: described.url,
    // As a read would answer it: the stored JSON, parsed (PostgreSQL: as the INSERT returns it).
    metadata: JSON.parse(metadata) as Prisma.JsonValue,
    status: 'PENDING',
    statusDetail: null,
    maxChunkSize: input.maxChunkSize,
    rowsCount: described.rowsCount,
    chunkCount: 0,
    revision: 1,
    environmentId: null,
    createdAt: now,
    updatedAt: now,
  };
  const bytes =
    source.kind === 'file' ? Buffer.from(source.bytes.buffer, source.bytes.byteOffset, source.bytes.byteLength) : null;
  const filename = source.kind === 'file' ? source.filename : null;
  const contentType = source.kind === 'file' ? source.contentType : null;
  const table = source.kind === 'table' ? JSON.stringify({ schema: source.schema, items: source.items }) : null;
  const job: EnqueueInput = {
    ...ingestionJob(row.projectId, row.id, row.revision),
    ...(reservation ? { claimedBy: reservation.claimedBy } : {}),
  };
  const maxAttempts = job.maxAttempts ?? 5;
  // The document's values in insertDocumentColumns' order, up to its timestamps (both engines).
  const documentValues = [
    row.id,
    row.projectId,
    row.kind,
    row.type,
    row.name,
    row.url,
    metadata,
    row.maxChunkSize,
    row.rowsCount,
  ] as const;
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    const at = storedTimestamp('sqlite', now);
    const enqueued = await driver.exclusive(
      'kb.upload',
      (sql) => {
        sql.run(
          `INSERT INTO "KbDocument" (${insertDocumentColumns}) VALUES (?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, 0, 1, ?, ?)`,
          ...documentValues,
          at,
          at,
        );
        sql.run(
          `INSERT INTO "KbDocumentSource" (${insertSourceColumns}) VALUES (?, 1, ?, ?, ?, ?, ?)`,
          row.id,
          bytes,
          filename,
          contentType,
          table,
          at,
        );
        return enqueueJobSqlite(sql, job, now);
      },
      { transaction: true },
    );
    return { row, job: { id: enqueued.id, created: enqueued.created, payload: job.payload, maxAttempts } };
  }
  const params: unknown[] = [
    ...documentValues,
    storedTimestamp('postgresql', now),
    bytes,
    filename,
    contentType,
    table,
  ];
  const jobInsert = jobInsertPostgres(job, now, (value) => `$${params.push(value)}`);
  // The document, its bytes and its job in one statement, a WITH of the three INSERTs, which is
  // its own transaction (one round trip, where BEGIN, the statements and COMMIT were four; the
  // foreign keys are checked at the statement's end, when the document is there). The metadata
  // as jsonb keeps it (its keys in jsonb's order, as every read answers them).
  const stored = await driver.query<{ metadata: Prisma.JsonValue; jobId: string | null }>(
    'kb.upload',
    `WITH "document" AS (
       INSERT INTO "KbDocument" (${insertDocumentColumns}) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, 'PENDING', $8, $9, 0, 1, $10, $10)
       RETURNING "metadata"
     ), "source" AS (
       INSERT INTO "KbDocumentSource" (${insertSourceColumns}) VALUES ($1, 1, $11, $12, $13, $14::jsonb, $10)
     ), "job" AS (
       ${jobInsert.sql}
     )
     SELECT (SELECT "metadata" FROM "document") AS "metadata", (SELECT "id" FROM "job") AS "jobId"`,
    params,
  );
  const [written] = stored.rows as [{ metadata: Prisma.JsonValue; jobId: string | null }];
  row.metadata = written.metadata;
  const enqueued =
    written.jobId === null
      ? await jobOfDedupeKeyPostgres((text, values) => driver.query('kb.upload', text, values), job)
      : { id: written.jobId, created: true };
  return { row, job: { id: enqueued.id, created: enqueued.created, payload: job.payload, maxAttempts } };
}

/**
 * The labels of a document's tags, sorted, as the swap-in that settled it read them in its own
 * statement (settledTagLabels), carried on the row it hands this process's waiters: the answer of
 * a waited upload then needs no read of them. Absent on any row read otherwise.
 */
export const settledTagLabels = Symbol('settledTagLabels');
export type KbDocumentRowWithTags = KbDocumentRow & { [settledTagLabels]?: string[] };

/**
 * A RETURNING column (`"tagLabels"`) of a statement that updates one KbDocument row: the labels of
 * its tags as a JSON array (text), at that statement's snapshot; see tagLabelsOf.
 */
export const tagLabelsColumn = {
  sqlite: `(SELECT json_group_array(t."label") FROM "KbDocumentTag" dt JOIN "KbTag" t ON t."id" = dt."tagId"
    WHERE dt."documentId" = "KbDocument"."id") AS "tagLabels"`,
  postgresql: `(SELECT COALESCE(json_agg(t."label"), '[]'::json)::text FROM "KbDocumentTag" dt JOIN "KbTag" t ON t."id" = dt."tagId"
    WHERE dt."documentId" = "KbDocument"."id") AS "tagLabels"`,
};

/** The row with the labels of tagLabelsColumn, sorted as every read of them answers them. */
export function withTagLabels(row: KbDocumentRow, tagLabels: unknown): KbDocumentRowWithTags {
  const labels = (typeof tagLabels === 'string' ? JSON.parse(tagLabels) : []) as string[];
  return Object.assign(row, { [settledTagLabels]: labels.sort() });
}

/** The columns of documentSelect, for a SELECT or a RETURNING on the driver (see storedDocumentRow). */
export const documentColumns = Object.keys(documentSelect)
  .map((c) => `"${c}"`)
  .join(', ');
const readDocumentSql = {
  sqlite: `SELECT ${documentColumns} FROM "KbDocument" WHERE "id" = ? AND "projectId" = ?`,
  postgresql: `SELECT ${documentColumns} FROM "KbDocument" WHERE "id" = $1 AND "projectId" = $2`,
};

/**
 * A stored date-time as a Date: a Date (pg), or text as the SQLite adapter stores it (`…+00:00`),
 * or without a zone (UTC).
 */
function storedDate(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === 'number' || typeof value === 'bigint') return new Date(Number(value));
  const text = String(value);
  return new Date(/(?:[zZ]|[+-]\d\d:?\d\d)$/.test(text) ? text : `${text.replace(' ', 'T')}Z`);
}

const storedInt = (value: unknown): number | null =>
  value === null || value === undefined ? null : typeof value === 'number' ? value : Number(value);

/**
 * Loads a document of a project (404 otherwise): one SELECT on the driver adapter (Db.queryRows,
 * without Prisma's client around it; a wait=true upload reads its document twice while it
 * waits), converted to the row Prisma answers for documentSelect.
 */
export async function getDocument(db: Db, projectId: string, documentId: string): Promise<KbDocumentRow> {
  const [raw] = await db.queryRows(readDocumentSql[db.provider], [documentId, projectId]);
  if (!raw) throw notFound('Document', documentId);
  return storedDocumentRow(raw);
}

/** documentColumns as the driver answers them (either engine), as the row Prisma answers for documentSelect. */
export function storedDocumentRow(raw: Record<string, unknown>): KbDocumentRow {
  return {
    id: raw.id as string,
    projectId: raw.projectId as string,
    kind: raw.kind as string,
    type: raw.type as string,
    name: raw.name as string,
    url: (raw.url as string | null) ?? null,
    metadata: (typeof raw.metadata === 'string' ? JSON.parse(raw.metadata) : raw.metadata) as Prisma.JsonValue,
    status: raw.status as string,
    statusDetail: (raw.statusDetail as string | null) ?? null,
    maxChunkSize: storedInt(raw.maxChunkSize) as number,
    rowsCount: storedInt(raw.rowsCount),
    chunkCount: storedInt(raw.chunkCount) as number,
    revision: storedInt(raw.revision) as number,
    environmentId: (raw.environmentId as string | null) ?? null,
    createdAt: storedDate(raw.createdAt),
    updatedAt: storedDate(raw.updatedAt),
  };
}

export interface ReplaceInput {
  projectId: string;
  documentId: string;
  source: Extract<KbSourceInput, { kind: 'file' | 'url' }>;
  /** New metadata; absent keeps the document's. */
  metadata?: Record<string, unknown>;
  maxChunkSize?: number;
}

/** Gives a document new content (a file or a URL) as its next revision, keeping its ID. */
export async function replaceDocument(deps: KbDeps, input: ReplaceInput): Promise<KbDocumentRow> {
  const doc = await deps.db.prisma.$transaction(async (tx) => {
    const current = await tx.kbDocument.findFirst({
      where: { id: input.documentId, projectId: input.projectId },
      select: { id: true },
    });
    if (!current) throw notFound('Document', input.documentId);
    const row = await storeNextRevision(tx, current.id, input.source, {
      ...(input.metadata ? { metadata: input.metadata as Prisma.InputJsonValue } : {}),
      ...(input.maxChunkSize ? { maxChunkSize: input.maxChunkSize } : {}),
    });
    await enqueueIngestion(tx, input.projectId, row.id, row.revision);
    return row;
  });
  notifyEnqueued(deps.pubsub, KB_INGEST_QUEUE);
  return doc;
}

/** A chunk's metadata: the document's, with a table row's own metadataFields over it. */
export function chunkMetadata(
  documentMetadata: Record<string, unknown>,
  rowMetadata: Record<string, unknown> | null | undefined,
): Record<string, unknown> {
  return rowMetadata ? { ...documentMetadata, ...rowMetadata } : documentMetadata;
}

/**
 * Sets a document's metadata and the metadata of its chunks in one transaction, so filters see
 * the new values at once (table rows keep their own metadataFields on top).
 */
export async function updateDocumentMetadata(
  deps: KbDeps,
  input: { projectId: string; documentId: string; metadata: Record<string, unknown> },
): Promise<KbDocumentRow> {
  return deps.db.prisma.$transaction(async (tx) => {
    const current = await tx.kbDocument.findFirst({
      where: { id: input.documentId, projectId: input.projectId },
      select: { id: true, kind: true },
    });
    if (!current) throw notFound('Document', input.documentId);
    const metadata = input.metadata as Prisma.InputJsonValue;
    const row = await tx.kbDocument.update({ where: { id: current.id }, data: { metadata }, select: documentSelect });
    if (current.kind !== 'table') {
      await tx.kbChunk.updateMany({ where: { documentId: current.id }, data: { metadata } });
      return row;
    }
    const chunks = await tx.kbChunk.findMany({
      where: { documentId: current.id },
      select: { seq: true, rowMetadata: true },
    });
    await setChunkMetadata(
      tx,
      deps.db.provider,
      chunks.map((c) => ({
        seq: c.seq,
        metadata: chunkMetadata(input.metadata, c.rowMetadata as Record<string, unknown> | null),
      })),
    );
    return row;
  });
}

/**
 * Sets metadata keys on one chunk (the original's "Update Chunk Metadata"): the keys given go over
 * the chunk's own metadata, which stays over the document's; other chunks are unchanged. Filters
 * read the metadata column directly, so the change counts from the next query, with nothing to
 * re-index (the full-text index and the embeddings cover the content only). A new upload of the
 * document's content chunks it anew, without these keys.
 */
export async function updateChunkMetadata(
  db: Db,
  input: { projectId: string; documentId: string; chunkId: string; metadata: Record<string, unknown> },
): Promise<KbDocumentRow> {
  return db.prisma.$transaction(async (tx) => {
    const doc = await tx.kbDocument.findFirst({
      where: { id: input.documentId, projectId: input.projectId },
      select: documentSelect,
    });
    if (!doc) throw notFound('Document', input.documentId);
    const chunk = await tx.kbChunk.findFirst({
      where: { id: input.chunkId, documentId: doc.id },
      select: { seq: true, rowMetadata: true },
    });
    if (!chunk) throw notFound('Chunk', input.chunkId);
    const own = { ...((chunk.rowMetadata as Record<string, unknown> | null) ?? {}), ...input.metadata };
    await tx.kbChunk.update({
      where: { seq: chunk.seq },
      data: {
        rowMetadata: own as Prisma.InputJsonValue,
        metadata: chunkMetadata(doc.metadata as Record<string, unknown>, own) as Prisma.InputJsonValue,
      },
    });
    return doc;
  });
}

/** Rows per statement of a bulk metadata update (one JSON parameter each). */
const metadataBatch = 1000;

/** Sets the metadata of many chunks, a thousand per statement (the rows travel as one JSON parameter). */
async function setChunkMetadata(
  tx: PrismaTx,
  provider: Db['provider'],
  rows: { seq: number; metadata: Record<string, unknown> }[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += metadataBatch) {
    const json = JSON.stringify(rows.slice(i, i + metadataBatch).map((r) => ({ seq: r.seq, m: r.metadata })));
    if (provider === 'sqlite') {
      await tx.$executeRaw`
        UPDATE "KbChunk" SET "metadata" = j.m
        FROM (SELECT json_extract(value, '$.seq') AS seq, json_extract(value, '$.m') AS m FROM json_each(${json})) AS j
        WHERE "KbChunk"."seq" = j.seq`;
    } else {
      await tx.$executeRaw`
        UPDATE "KbChunk" AS c SET "metadata" = j.m
        FROM jsonb_to_recordset(${json}::jsonb) AS j(seq integer, m jsonb)
        WHERE c."seq" = j.seq`;
    }
  }
}

/** Deletes a document with its chunks, their index entries and embeddings, and any pending upload. */
export async function deleteDocument(db: Db, input: { projectId: string; documentId: string }): Promise<void> {
  const { count } = await db.prisma.kbDocument.deleteMany({
    where: { id: input.documentId, projectId: input.projectId },
  });
  if (count === 0) throw notFound('Document', input.documentId);
}

export interface ListDocumentsInput {
  projectId: string;
  /** From 1. */
  page: number;
  limit: number;
  type?: KbDocumentType;
  status?: KbDocumentStatus;
}

/** A page of a project's documents, newest first, and how many there are in all. */
export async function listDocuments(
  db: Db,
  input: ListDocumentsInput,
): Promise<{ total: number; documents: KbDocumentRow[] }> {
  const where: Prisma.KbDocumentWhereInput = {
    projectId: input.projectId,
    ...(input.type ? { type: input.type } : {}),
    ...(input.status ? { status: input.status } : {}),
  };
  const [total, documents] = await Promise.all([
    db.prisma.kbDocument.count({ where }),
    db.prisma.kbDocument.findMany({
      where,
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      skip: (input.page - 1) * input.limit,
      take: input.limit,
      select: documentSelect,
    }),
  ]);
  return { total, documents };
}

/**
 * Waits until the document's `revision` is ingested (SUCCESS or ERROR), a newer revision replaced
 * it, or `timeoutMs` passed; returns the document as it then is. Status events come through the
 * pubsub (so a worker on another instance wakes this one); a slow poll covers a lost event.
 */
export async function waitForDocument(
  deps: KbDeps,
  input: {
    projectId: string;
    documentId: string;
    revision: number;
    timeoutMs: number;
    signal?: AbortSignal;
    /** The row the upload wrote (uploadDocument's answer): the first read when its job runs here. */
    written?: KbDocumentRow;
  },
): Promise<KbDocumentRow> {
  const events = deps.pubsub.subscribe('kbDocument', input.documentId)[Symbol.asyncIterator]();
  const deadline = Date.now() + input.timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const waiting = settledRows.get(deps.pubsub) ?? new Map<string, { waiters: number; row?: KbDocumentRow }>();
  settledRows.set(deps.pubsub, waiting);
  const key = `${input.documentId}:${input.revision}`;
  const handOff = waiting.get(key) ?? { waiters: 0 };
  handOff.waiters++;
  waiting.set(key, handOff);
  let written =
    input.written &&
    runsAfterWaiter.has(input.written) &&
    input.written.id === input.documentId &&
    input.written.projectId === input.projectId &&
    input.written.revision === input.revision
      ? input.written
      : undefined;
  try {
    for (;;) {
      // The row the job committed, handed over with its event (same process), else, before the
      // job this process runs started, the row the upload wrote, else a read.
      const handed = handOff.row?.projectId === input.projectId ? handOff.row : undefined;
      const doc = handed ?? written ?? (await getDocument(deps.db, input.projectId, input.documentId));
      written = undefined;
      const settled = doc.revision !== input.revision || doc.status !== 'PENDING';
      const remaining = deadline - Date.now();
      if (settled || remaining <= 0 || input.signal?.aborted) return doc;
      await Promise.race([
        events.next(),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.min(1000, remaining));
        }),
      ]);
      clearTimeout(timer);
    }
  } finally {
    clearTimeout(timer);
    if (--handOff.waiters === 0) waiting.delete(key);
    await events.return?.();
  }
}
