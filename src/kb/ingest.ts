import { randomUUID } from 'node:crypto';
import { type Db, storedTimestamp } from '../db/client';
import { type JobHandler, PermanentJobError } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { OutboundFetch } from '../lib/outbound-http';
import type { AppPubSub } from '../lib/pubsub';
import { countTokens, type LlmProvider } from '../llm';
import { iterateChunkSpans } from './chunk';
import {
  chunkMetadata,
  documentColumns,
  type KbDocumentRow,
  type KbIngestHandOff,
  type KbIngestJobPayload,
  publishDocumentStatus,
  storedDocumentRow,
  tagLabelsColumn,
  withTagLabels,
} from './documents';
import { embedTexts, recordEmbeddingUsage } from './embeddings';
import { KbIngestError } from './errors';
import { fetchUrlDocument } from './fetch-url';
import { extractText, type KbFileType } from './parse';
import { tableRowToChunk } from './table';
import { embeddingBatch, embeddingRowsJson, embeddingUpsert, vectorBytes } from './vectors';

/**
 * The ingestion job (queue `kb-ingest`): turn one revision of a document into chunks and index
 * them. Everything slow (fetching, parsing, chunking, embedding) happens before the database is
 * touched; then one transaction swaps the document's chunks for the new ones and marks it SUCCESS.
 * A failure leaves the previous chunks in place, so a failed re-upload under `overwrite` loses
 * nothing: the document says ERROR with the reason, and its old content stays searchable.
 */

export interface KbIngestDeps {
  db: Db;
  pubsub: AppPubSub;
  llm: LlmProvider;
  logger: Logger;
  /** Guarded fetch for URL documents (src/lib/outbound-http.ts). */
  fetch: OutboundFetch;
  urlTimeoutMs: number;
  /** Largest URL response read, in bytes. */
  maxUrlBytes: number;
  /** Tokens carried from the end of one chunk into the next. */
  overlapRatio?: number;
}

interface PreparedChunk {
  content: string;
  tokens: number;
  rowMetadata: Record<string, unknown> | null;
}

interface Prepared {
  /**
   * The chunks, made as they are taken: a file's or URL's text is cut lazily (iterateChunkSpans),
   * so that on PostgreSQL the chunks already cut are stored while the rest are cut (swapInPipelined).
   */
  chunks: Iterator<PreparedChunk>;
  rowsCount: number | null;
  /** For a URL: the type of what the server sent (html, pdf, ...). */
  fetchedType?: KbFileType;
}

/** What the job reads of a document and its stored upload (loadDocument), or is handed by its upload. */
type DocumentWithSource = KbIngestHandOff['document'];

/**
 * The document and upload that the upload handed this delivery in process (JobContext.local),
 * when they are the ones the payload names; else null (read them).
 */
function handedDocument(local: unknown, target: KbIngestJobPayload): DocumentWithSource | null {
  const handed = local as Partial<KbIngestHandOff> | undefined;
  if (!handed?.document || handed.documentId !== target.documentId || handed.revision !== target.revision) return null;
  return handed.document;
}

const loadDocumentSql = (placeholder: string) => `
  SELECT d."id", d."projectId", d."environmentId", d."kind", d."type", d."name", d."url", d."status", d."revision",
         d."maxChunkSize", s."documentId" AS "sourceId", s."bytes", s."filename", s."table"
  FROM "KbDocument" d LEFT JOIN "KbDocumentSource" s ON s."documentId" = d."id"
  WHERE d."id" = ${placeholder}`;
const loadDocumentSqlite = loadDocumentSql('?');
const loadDocumentPostgres = loadDocumentSql('$1');

/**
 * The document with its stored upload (the file's bytes, or the table), read straight through
 * the database driver: through Prisma, the bytes of an upload cost more than the statement.
 */
async function loadDocument(db: Db, documentId: string): Promise<DocumentWithSource | null> {
  type Row = Omit<DocumentWithSource, 'source'> & {
    sourceId: string | null;
    bytes: Uint8Array | null;
    filename: string | null;
    table: unknown;
  };
  const driver = db.driver;
  const row =
    driver.provider === 'sqlite'
      ? await driver.exclusive('kb.ingest.load', (sql) => sql.get<Row>(loadDocumentSqlite, documentId))
      : (await driver.query<Row>('kb.ingest.load', loadDocumentPostgres, [documentId])).rows[0];
  if (!row) return null;
  const { sourceId, bytes, filename, table, ...doc } = row;
  return {
    ...doc,
    source: sourceId
      ? {
          bytes,
          filename,
          // JSON is text on SQLite (Prisma's stored form), a value from PostgreSQL's jsonb.
          table: typeof table === 'string' ? JSON.parse(table) : table,
        }
      : null,
  };
}

async function prepare(deps: KbIngestDeps, doc: DocumentWithSource, signal: AbortSignal): Promise<Prepared> {
  const maxTokens = doc.maxChunkSize;
  const overlapTokens = Math.round(maxTokens * (deps.overlapRatio ?? 0.1));
  function* toChunks(text: string): Generator<PreparedChunk, void, undefined> {
    for (const span of iterateChunkSpans(text, { maxTokens, overlapTokens }))
      yield { content: text.slice(span.start, span.end), tokens: span.tokens, rowMetadata: null };
  }

  switch (doc.kind) {
    case 'file': {
      const bytes = doc.source?.bytes;
      if (!bytes) throw new KbIngestError('MALFORMED', 'The uploaded file is no longer stored; upload it again.');
      const { text } = await extractText({
        bytes: new Uint8Array(bytes),
        type: doc.type as KbFileType,
        filename: doc.source?.filename ?? doc.name,
        signal,
      });
      return { chunks: toChunks(text), rowsCount: null };
    }
    case 'url': {
      if (!doc.url) throw new KbIngestError('MALFORMED', 'The document has no URL.');
      const fetched = await fetchUrlDocument(doc.url, {
        fetch: deps.fetch,
        timeoutMs: deps.urlTimeoutMs,
        maxBytes: deps.maxUrlBytes,
        signal,
      });
      const { text } = await extractText({
        bytes: fetched.bytes,
        type: fetched.type,
        url: fetched.finalUrl,
        contentType: fetched.contentType,
        signal,
      });
      return { chunks: toChunks(text), rowsCount: null, fetchedType: fetched.type };
    }
    case 'table': {
      const table = doc.source?.table as {
        schema: { searchableFields: string[]; metadataFields: string[] };
        items: Record<string, unknown>[];
      } | null;
      if (!table) throw new KbIngestError('MALFORMED', 'The uploaded table is no longer stored; upload it again.');
      const chunks: PreparedChunk[] = [];
      for (const item of table.items) {
        const row = tableRowToChunk(item, table.schema);
        if (!row) continue;
        // One chunk per row (DECISIONS.md §7), whatever its length.
        chunks.push({ content: row.content, tokens: countTokens(row.content), rowMetadata: row.metadata });
      }
      if (chunks.length === 0) {
        throw new KbIngestError(
          'NO_TEXT',
          `No row has text in its searchable fields (${table.schema.searchableFields.join(', ')}).`,
        );
      }
      return { chunks: chunks.values(), rowsCount: table.items.length };
    }
    default:
      throw new KbIngestError('MALFORMED', `Unknown document kind "${doc.kind}".`);
  }
}

/** Chunks per INSERT statement (the rows travel as one JSON parameter). */
const insertBatch = 1000;

interface ChunkRow {
  id: string;
  position: number;
  content: string;
  tokens: number;
  metadata: Record<string, unknown>;
  rowMetadata: Record<string, unknown> | null;
}

/** What the swap-in transaction stores for one revision of a document. */
interface SwapIn {
  documentId: string;
  projectId: string;
  revision: number;
  chunks: readonly PreparedChunk[];
  rowsCount: number | null;
  vectors: { model: string; vectors: number[][] } | null;
}

const markSucceeded = {
  sqlite: `UPDATE "KbDocument" SET "status" = 'SUCCESS', "statusDetail" = NULL, "chunkCount" = ?, "rowsCount" = ?, "updatedAt" = ?
    WHERE "id" = ? AND "revision" = ? AND "status" = 'PENDING' RETURNING ${documentColumns}, ${tagLabelsColumn.sqlite}`,
  postgresql: `UPDATE "KbDocument" SET "status" = 'SUCCESS', "statusDetail" = NULL, "chunkCount" = $1, "rowsCount" = $2, "updatedAt" = $3
    WHERE "id" = $4 AND "revision" = $5 AND "status" = 'PENDING' RETURNING ${documentColumns}, ${tagLabelsColumn.postgresql}`,
};
/**
 * A thousand chunks per statement, the rows as one JSON parameter unpacked by the database
 * (`json_each` / `jsonb_to_recordset`); Prisma's `createMany` sent eight bound parameters per row
 * and its query engine took about twice as long as the database (docs/performance.md,
 * "Knowledge-base ingestion"). The full-text triggers index the rows in the same statement.
 */
const insertChunkRows = {
  sqlite: `INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata", "rowMetadata")
    SELECT json_extract(value, '$.id'), ?, ?, json_extract(value, '$.position'), json_extract(value, '$.content'),
           json_extract(value, '$.tokens'), json(json_extract(value, '$.metadata')), json(json_extract(value, '$.rowMetadata'))
    FROM json_each(?)`,
  postgresql: `INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata", "rowMetadata")
    SELECT r.id, $1, $2, r.position, r.content, r.tokens, r.metadata, r."rowMetadata"
    FROM jsonb_to_recordset($3::jsonb)
      AS r(id text, position integer, content text, tokens integer, metadata jsonb, "rowMetadata" jsonb)`,
};

/** The stored rows of the chunks, with the document's metadata as it is inside the transaction. */
function chunkRows(
  chunks: readonly PreparedChunk[],
  documentMetadata: Record<string, unknown>,
  firstPosition = 0,
): ChunkRow[] {
  return chunks.map((c, i) => ({
    id: randomUUID(),
    position: firstPosition + i,
    content: c.content,
    tokens: c.tokens,
    metadata: chunkMetadata(documentMetadata, c.rowMetadata),
    rowMetadata: c.rowMetadata,
  }));
}

/**
 * Swaps a revision's chunks in, in one transaction run straight through the database driver
 * (Db.driver: no Prisma query compiler and interpreter around its five statements, about half a
 * millisecond each): marks the document done, and only while it still waits for this revision,
 * replaces its chunks (and their embeddings), drops the stored upload. Answers the document as
 * it committed it (for this process's waiters: publishDocumentStatus), or null, having changed
 * nothing, when the document moved on (deleted, re-uploaded, done by an earlier delivery).
 *
 * Marking the document comes first: the row lock it takes (PostgreSQL) makes a concurrent
 * metadata update wait for this commit and then update these chunks too, and the metadata read
 * back is the current one. Nothing of it is visible before the commit, so the order is free.
 * Columns and stored forms are Prisma's: JSON as text on SQLite, DateTime as storedTimestamp.
 */
async function swapIn(db: Db, input: SwapIn): Promise<KbDocumentRow | null> {
  const { documentId, projectId, revision } = input;
  const driver = db.driver;
  if (driver.provider === 'sqlite') {
    const now = storedTimestamp('sqlite', new Date());
    // Synchronous, on the connection alone: BEGIN IMMEDIATE … COMMIT, or nothing if it throws.
    return driver.exclusive(
      'kb.ingest.swap',
      (sql) => {
        const current = sql.get<Record<string, unknown> & { metadata: string }>(
          markSucceeded.sqlite,
          input.chunks.length,
          input.rowsCount,
          now,
          documentId,
          revision,
        );
        if (!current) return null;
        sql.run('DELETE FROM "KbChunk" WHERE "documentId" = ?', documentId);
        const rows = chunkRows(input.chunks, JSON.parse(current.metadata) as Record<string, unknown>);
        for (let i = 0; i < rows.length; i += insertBatch)
          sql.run(insertChunkRows.sqlite, documentId, projectId, JSON.stringify(rows.slice(i, i + insertBatch)));
        if (input.vectors) {
          const { model, vectors } = input.vectors;
          const seqs = sql.all<{ seq: number; position: number }>(
            'SELECT "seq", "position" FROM "KbChunk" WHERE "documentId" = ?',
            documentId,
          );
          for (const s of seqs) {
            const vector = vectors[s.position];
            if (vector?.length) sql.run(embeddingUpsert.sqlite, s.seq, model, vector.length, vectorBytes(vector));
          }
        }
        sql.run('DELETE FROM "KbDocumentSource" WHERE "documentId" = ? AND "revision" = ?', documentId, revision);
        return withTagLabels(storedDocumentRow(current), current.tagLabels);
      },
      { transaction: true },
    );
  }
  const now = storedTimestamp('postgresql', new Date());
  return driver.transaction('kb.ingest.swap', async (sql) => {
    const marked = await sql.query<Record<string, unknown> & { metadata: Record<string, unknown> }>(
      markSucceeded.postgresql,
      [input.chunks.length, input.rowsCount, now, documentId, revision],
    );
    const [current] = marked.rows;
    if (!current) return null;
    await sql.query('DELETE FROM "KbChunk" WHERE "documentId" = $1', [documentId]);
    const rows = chunkRows(input.chunks, current.metadata);
    for (let i = 0; i < rows.length; i += insertBatch)
      await sql.query(insertChunkRows.postgresql, [
        documentId,
        projectId,
        JSON.stringify(rows.slice(i, i + insertBatch)),
      ]);
    if (input.vectors) {
      const { model, vectors } = input.vectors;
      const seqs = await sql.query<{ seq: number; position: number }>(
        'SELECT "seq", "position" FROM "KbChunk" WHERE "documentId" = $1',
        [documentId],
      );
      const stored = seqs.rows
        .map((s) => ({ seq: s.seq, vector: vectors[s.position] ?? [] }))
        .filter((r) => r.vector.length);
      for (let i = 0; i < stored.length; i += embeddingBatch)
        await sql.query(embeddingUpsert.postgresql, [model, embeddingRowsJson(stored.slice(i, i + embeddingBatch))]);
    }
    await sql.query('DELETE FROM "KbDocumentSource" WHERE "documentId" = $1 AND "revision" = $2', [
      documentId,
      revision,
    ]);
    return withTagLabels(storedDocumentRow(current), current.tagLabels);
  });
}

/**
 * Chunks in the pipelined swap-in's next INSERT, with `stored` chunks already sent: 16 at first,
 * then half of what went before (at most insertBatch), so that the last INSERT, which no chunking
 * overlaps, stays short, and a long document takes a few statements more, not one per 16 chunks.
 */
export function pipelinedInsertSize(stored: number): number {
  return Math.min(insertBatch, Math.max(16, Math.floor(stored / 2)));
}

/** What swapInPipelined stores: the chunks already cut, then the rest as they are cut. */
interface PipelinedSwapIn {
  documentId: string;
  projectId: string;
  revision: number;
  first: readonly PreparedChunk[];
  rest: Iterator<PreparedChunk>;
  rowsCount: number | null;
  signal: AbortSignal;
}

const lockPending = `SELECT "metadata" FROM "KbDocument" WHERE "id" = $1 AND "revision" = $2 AND "status" = 'PENDING' FOR UPDATE`;
const markSucceededLocked = `UPDATE "KbDocument" SET "status" = 'SUCCESS', "statusDetail" = NULL, "chunkCount" = $1, "rowsCount" = $2, "updatedAt" = $3
  WHERE "id" = $4 AND "revision" = $5 AND "status" = 'PENDING' RETURNING ${documentColumns}, ${tagLabelsColumn.postgresql}`;

/**
 * swapIn on PostgreSQL, with the chunking inside the transaction: each batch of chunks is
 * inserted (and indexed by the full-text trigger, `to_tsvector` and the GIN insertion, the
 * database's work on the other core) while Node cuts the next batch, instead of Node waiting
 * for one INSERT of them all at the end. The same guarantees as swapIn: the document's row is
 * locked first (a concurrent metadata update waits and then updates these chunks too), nothing
 * is visible before the commit, so a reader sees the old chunks or all the new ones, and any
 * failure (a statement, the chunker, an abort) rolls everything back and leaves the old chunks.
 * The old chunks and the stored upload are dropped while the first batch is cut, so that the
 * document's mark, once its chunks are counted, is the one statement after the last INSERT.
 * Answers the document as it committed it, or null, having changed nothing, when the document
 * moved on.
 */
async function swapInPipelined(db: Db, input: PipelinedSwapIn): Promise<KbDocumentRow | null> {
  const { documentId, projectId, revision } = input;
  const driver = db.driver;
  if (driver.provider !== 'postgresql') throw new Error('swapInPipelined is for PostgreSQL');
  return driver.transaction('kb.ingest.swap', async (sql) => {
    /** The statement in flight; its rejection is seen where it is awaited (or by the rollback). */
    let inFlight: Promise<unknown> = sql.query<{ metadata: Record<string, unknown> }>(lockPending, [
      documentId,
      revision,
    ]);
    inFlight.catch(() => {});
    let batch = [...input.first, ...take(input.rest, pipelinedInsertSize(0) - input.first.length)];
    const [current] = ((await inFlight) as { rows: { metadata: Record<string, unknown> }[] }).rows;
    if (!current) return null;
    // The old chunks and the revision's stored upload go while the first batch is cut: nothing
    // of either is visible before the commit, and a rollback keeps both. The connection runs
    // them in order; both are awaited before the first INSERT.
    inFlight = Promise.all([
      sql.query('DELETE FROM "KbChunk" WHERE "documentId" = $1', [documentId]),
      sql.query('DELETE FROM "KbDocumentSource" WHERE "documentId" = $1 AND "revision" = $2', [documentId, revision]),
    ]);
    inFlight.catch(() => {});
    let position = 0;
    while (batch.length) {
      const rows = chunkRows(batch, current.metadata, position);
      position += batch.length;
      await inFlight;
      input.signal.throwIfAborted();
      inFlight = sql.query(insertChunkRows.postgresql, [documentId, projectId, JSON.stringify(rows)]);
      inFlight.catch(() => {});
      batch = take(input.rest, pipelinedInsertSize(position));
    }
    await inFlight;
    const now = storedTimestamp('postgresql', new Date());
    const marked = await sql.query(markSucceededLocked, [position, input.rowsCount, now, documentId, revision]);
    const [stored] = marked.rows;
    // The row is locked by this transaction: it cannot have moved on.
    if (!stored) throw new Error(`document ${documentId} changed under its row lock`);
    return withTagLabels(storedDocumentRow(stored), stored.tagLabels);
  });
}

/** Marks the revision failed (its previous chunks, if any, stay). */
async function markFailed(deps: KbIngestDeps, payload: KbIngestJobPayload, reason: string): Promise<void> {
  const updated = await deps.db.prisma.$transaction(async (tx) => {
    const { count } = await tx.kbDocument.updateMany({
      where: { id: payload.documentId, revision: payload.revision, status: 'PENDING' },
      data: { status: 'ERROR', statusDetail: reason.slice(0, 2000) },
    });
    if (count)
      await tx.kbDocumentSource.deleteMany({ where: { documentId: payload.documentId, revision: payload.revision } });
    return count > 0;
  });
  if (updated)
    publishDocumentStatus(deps.pubsub, { id: payload.documentId, revision: payload.revision, status: 'ERROR' });
}

/** An error of the chunker while the pipelined swap-in ran: handled as a failure to prepare. */
class ChunkingFailed extends Error {
  constructor(readonly reason: unknown) {
    super('chunking failed');
  }
}

/** Up to `n` chunks from `chunks` (an error of the chunker comes out as ChunkingFailed). */
function take(chunks: Iterator<PreparedChunk>, n: number): PreparedChunk[] {
  const batch: PreparedChunk[] = [];
  try {
    while (batch.length < n) {
      const next = chunks.next();
      if (next.done) break;
      batch.push(next.value);
    }
  } catch (err) {
    throw new ChunkingFailed(err);
  }
  return batch;
}

export function createKbIngestHandler(deps: KbIngestDeps): JobHandler {
  const log = deps.logger.child({ component: 'kb-ingest' });
  return async (job) => {
    const payload = job.payload as Partial<KbIngestJobPayload>;
    if (typeof payload.documentId !== 'string' || typeof payload.revision !== 'number') {
      throw new PermanentJobError('malformed kb-ingest job payload');
    }
    const target = payload as KbIngestJobPayload;
    // Handed by the upload that wrote it (it waits, and this instance runs the job at once); the
    // swap-in and markFailed still change the document only while it waits for this revision.
    const doc = handedDocument(job.local, target) ?? (await loadDocument(deps.db, target.documentId));
    // Deleted, replaced by a newer upload (which has its own job), or already done by an earlier delivery.
    if (!doc || doc.revision !== target.revision || doc.status !== 'PENDING') return;

    /** A failure to read, parse or chunk: final (the document says ERROR), or thrown for a retry. */
    const failed = async (err: unknown): Promise<void> => {
      if (job.signal.aborted) throw err;
      const known = err instanceof KbIngestError;
      if ((known && err.permanent) || job.attempt >= job.maxAttempts) {
        const reason = known
          ? err.message
          : `Ingestion failed unexpectedly (job ${job.id}); the operator's logs have the details.`;
        if (!known) log.error({ err, jobId: job.id, documentId: doc.id }, 'knowledge-base ingestion failed');
        await markFailed(deps, target, reason);
        return;
      }
      throw err;
    };

    // On PostgreSQL without embeddings, a file's or URL's chunks are cut inside the swap-in transaction, each
    // batch stored while the next is cut (swapInPipelined); the first is cut here, so that a
    // document without text fails before any transaction. Otherwise every chunk is cut first (a
    // table's rows are already chunks: nothing to overlap).
    const pipelined = deps.db.driver.provider === 'postgresql' && !deps.llm.supportsEmbeddings && doc.kind !== 'table';
    let prepared: Prepared;
    let firstChunks: PreparedChunk[];
    try {
      prepared = await prepare(deps, doc, job.signal);
      firstChunks = take(prepared.chunks, pipelined ? 1 : Number.POSITIVE_INFINITY);
      if (firstChunks.length === 0) throw new KbIngestError('NO_TEXT', 'The document has no text to index.');
    } catch (err) {
      return failed(err instanceof ChunkingFailed ? err.reason : err);
    }

    let stored: KbDocumentRow | null;
    if (pipelined) {
      try {
        stored = await swapInPipelined(deps.db, {
          documentId: doc.id,
          projectId: doc.projectId,
          revision: target.revision,
          first: firstChunks,
          rest: prepared.chunks,
          rowsCount: prepared.rowsCount,
          signal: job.signal,
        });
      } catch (err) {
        // The transaction rolled back: the previous chunks stay, the document still waits.
        if (err instanceof ChunkingFailed) return failed(err.reason);
        throw err;
      }
    } else {
      let vectors: { model: string; vectors: number[][] } | null = null;
      if (deps.llm.supportsEmbeddings) {
        try {
          const embedded = await embedTexts(
            deps.llm,
            firstChunks.map((c) => c.content),
            job.signal,
          );
          vectors = embedded;
          await recordEmbeddingUsage(
            deps,
            { projectId: doc.projectId, environmentId: doc.environmentId },
            embedded.accounting,
            `kb-ingest:${doc.id}:${doc.revision}`,
          );
        } catch (err) {
          if (job.signal.aborted) throw err;
          // The chunks go live without vectors (full-text search works); the embedding sweep retries.
          log.warn({ err, documentId: doc.id }, 'embedding a document failed; its chunks are stored without vectors');
        }
      }
      stored = await swapIn(deps.db, {
        documentId: doc.id,
        projectId: doc.projectId,
        revision: target.revision,
        chunks: firstChunks,
        rowsCount: prepared.rowsCount,
        vectors,
      });
    }
    if (stored) {
      publishDocumentStatus(deps.pubsub, stored, stored);
      log.info({ documentId: doc.id, revision: target.revision, chunks: stored.chunkCount }, 'ingested document');
    }
  };
}
