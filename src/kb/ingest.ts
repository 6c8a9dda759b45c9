import { randomUUID } from 'node:crypto';
import type { Db } from '../db/client';
import type { PrismaTx } from '../db/transaction';
import type { Prisma } from '../generated/sqlite/client';
import { type JobHandler, PermanentJobError } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { OutboundFetch } from '../lib/outbound-http';
import type { AppPubSub } from '../lib/pubsub';
import { countTokens, type LlmProvider } from '../llm';
import { chunkText } from './chunk';
import { chunkMetadata, type KbIngestJobPayload, publishDocumentStatus } from './documents';
import { embedTexts, recordEmbeddingUsage } from './embeddings';
import { KbIngestError } from './errors';
import { fetchUrlDocument } from './fetch-url';
import { extractText, type KbFileType } from './parse';
import { tableRowToChunk } from './table';
import { storeEmbeddings } from './vectors';

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
  chunks: PreparedChunk[];
  rowsCount: number | null;
  /** For a URL: the type of what the server sent (html, pdf, ...). */
  fetchedType?: KbFileType;
}

type DocumentWithSource = Prisma.KbDocumentGetPayload<{ include: { source: true } }>;

async function prepare(deps: KbIngestDeps, doc: DocumentWithSource, signal: AbortSignal): Promise<Prepared> {
  const maxTokens = doc.maxChunkSize;
  const overlapTokens = Math.round(maxTokens * (deps.overlapRatio ?? 0.1));
  const toChunks = (text: string): PreparedChunk[] =>
    chunkText(text, { maxTokens, overlapTokens }).map((c) => ({ ...c, rowMetadata: null }));

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
      return { chunks, rowsCount: table.items.length };
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

/**
 * Inserts a document's chunks, a thousand per statement, the rows as one JSON parameter unpacked
 * by the database (`json_each` / `jsonb_to_recordset`). Prisma's `createMany` sent the same rows
 * as eight bound parameters each, and its query engine took about twice as long as the database
 * to prepare them (docs/performance.md, "Knowledge-base ingestion"). The full-text triggers index
 * each row as before.
 */
async function insertChunks(
  tx: PrismaTx,
  provider: Db['provider'],
  doc: { documentId: string; projectId: string },
  rows: readonly ChunkRow[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += insertBatch) {
    const json = JSON.stringify(rows.slice(i, i + insertBatch));
    if (provider === 'sqlite') {
      await tx.$executeRaw`
        INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata", "rowMetadata")
        SELECT json_extract(value, '$.id'), ${doc.documentId}, ${doc.projectId}, json_extract(value, '$.position'),
               json_extract(value, '$.content'), json_extract(value, '$.tokens'), json(json_extract(value, '$.metadata')),
               json(json_extract(value, '$.rowMetadata'))
        FROM json_each(${json})`;
    } else {
      await tx.$executeRaw`
        INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata", "rowMetadata")
        SELECT r.id, ${doc.documentId}, ${doc.projectId}, r.position, r.content, r.tokens, r.metadata, r."rowMetadata"
        FROM jsonb_to_recordset(${json}::jsonb)
          AS r(id text, position integer, content text, tokens integer, metadata jsonb, "rowMetadata" jsonb)`;
    }
  }
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

export function createKbIngestHandler(deps: KbIngestDeps): JobHandler {
  const log = deps.logger.child({ component: 'kb-ingest' });
  return async (job) => {
    const payload = job.payload as Partial<KbIngestJobPayload>;
    if (typeof payload.documentId !== 'string' || typeof payload.revision !== 'number') {
      throw new PermanentJobError('malformed kb-ingest job payload');
    }
    const target = payload as KbIngestJobPayload;
    const doc = await deps.db.prisma.kbDocument.findUnique({
      where: { id: target.documentId },
      include: { source: true },
    });
    // Deleted, replaced by a newer upload (which has its own job), or already done by an earlier delivery.
    if (!doc || doc.revision !== target.revision || doc.status !== 'PENDING') return;

    let prepared: Prepared;
    let vectors: { model: string; vectors: number[][] } | null = null;
    try {
      prepared = await prepare(deps, doc, job.signal);
      if (prepared.chunks.length === 0) throw new KbIngestError('NO_TEXT', 'The document has no text to index.');
    } catch (err) {
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
    }

    if (deps.llm.supportsEmbeddings) {
      try {
        const embedded = await embedTexts(
          deps.llm,
          prepared.chunks.map((c) => c.content),
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

    const stored = await deps.db.prisma.$transaction(
      async (tx) => {
        // First, and only while the document still waits for this revision: mark it done. The
        // row lock this takes (PostgreSQL) makes a concurrent metadata update wait for this
        // commit and then update these chunks too, and the metadata read back is the current one.
        // Nothing of it is visible before the commit, so the order within is free.
        const [current] = await tx.kbDocument.updateManyAndReturn({
          where: { id: doc.id, revision: target.revision, status: 'PENDING' },
          data: {
            status: 'SUCCESS',
            statusDetail: null,
            chunkCount: prepared.chunks.length,
            rowsCount: prepared.rowsCount,
          },
          select: { metadata: true },
        });
        if (!current) return false;
        const documentMetadata = current.metadata as Record<string, unknown>;
        await tx.kbChunk.deleteMany({ where: { documentId: doc.id } });
        const rows = prepared.chunks.map((c, position) => ({
          id: randomUUID(),
          position,
          content: c.content,
          tokens: c.tokens,
          metadata: chunkMetadata(documentMetadata, c.rowMetadata),
          rowMetadata: c.rowMetadata,
        }));
        await insertChunks(tx, deps.db.provider, { documentId: doc.id, projectId: doc.projectId }, rows);
        if (vectors) {
          const seqs = await tx.kbChunk.findMany({
            where: { documentId: doc.id },
            select: { seq: true, position: true },
          });
          await storeEmbeddings(
            tx,
            deps.db.provider,
            vectors.model,
            seqs
              .map((s) => ({ seq: s.seq, vector: vectors?.vectors[s.position] ?? [] }))
              .filter((r) => r.vector.length),
          );
        }
        await tx.kbDocumentSource.deleteMany({ where: { documentId: doc.id, revision: target.revision } });
        return true;
      },
      // A large document on a busy SQLite file waits for the single writer.
      { maxWait: 30_000, timeout: 120_000 },
    );
    if (stored) {
      publishDocumentStatus(deps.pubsub, { id: doc.id, revision: target.revision, status: 'SUCCESS' });
      log.info({ documentId: doc.id, revision: target.revision, chunks: prepared.chunks.length }, 'ingested document');
    }
  };
}
