import type { UsageEvent } from '../analytics/events';
import { recordUsageEvents } from '../analytics/usage-event-writer';
import type { Db } from '../db/client';
import { enqueueJob, notifyEnqueued } from '../jobs/queue';
import type { JobHandler } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import type { LlmAccounting, LlmProvider } from '../llm';
import { storeEmbeddings } from './vectors';

/**
 * Embeddings of chunks, when an embedding model is configured (EMBEDDING_MODEL). Ingestion embeds
 * a document's chunks before they go live; this sweep embeds whatever has no vector for the
 * current model: chunks stored while the model server was down, and every chunk after the model
 * changes (their old vectors are replaced one document at a time; until then a query ranks those
 * chunks by full text only).
 */

export const KB_EMBED_QUEUE = 'kb-embed';

/** Texts per embeddings request. */
const EMBED_BATCH = 64;
/** Documents one sweep run looks at before it hands over to the next run. */
const DOCUMENTS_PER_SWEEP = 50;

export interface EmbeddedTexts {
  model: string;
  vectors: number[][];
  accounting: LlmAccounting[];
}

/** Embeds texts in batches, in order. */
export async function embedTexts(
  llm: LlmProvider,
  texts: readonly string[],
  signal?: AbortSignal,
): Promise<EmbeddedTexts> {
  const out: EmbeddedTexts = { model: llm.info.embeddingModel ?? '', vectors: [], accounting: [] };
  for (let i = 0; i < texts.length; i += EMBED_BATCH) {
    const result = await llm.embed({ texts: texts.slice(i, i + EMBED_BATCH), signal });
    out.model = result.model;
    out.vectors.push(...result.vectors);
    out.accounting.push(result.accounting);
  }
  return out;
}

/** Embedding tokens as `credit_usage` (llm-input) of the project's development environment. */
export async function recordEmbeddingUsage(
  deps: { db: Db; pubsub?: AppPubSub },
  document: { projectId: string; environmentId: string | null },
  accounting: readonly LlmAccounting[],
  key: string,
): Promise<void> {
  const tokens = accounting.reduce((sum, a) => sum + a.inputTokens, 0);
  if (tokens === 0 || accounting.length === 0) return;
  const { projectId } = document;
  // The environment the document is used in (named at upload); `development` when it named none
  // or that environment was deleted since.
  const named = document.environmentId
    ? await deps.db.prisma.environment.findFirst({
        where: { projectId, id: document.environmentId },
        select: { id: true },
      })
    : null;
  const env =
    named ??
    (await deps.db.prisma.environment.findFirst({
      where: { projectId, alias: 'development' },
      select: { id: true },
    }));
  if (!env) return;
  const event: UsageEvent = {
    projectId,
    environmentId: env.id,
    kind: 'credit',
    type: 'llm-input',
    model: accounting[0]?.model ?? '',
    tokens,
    idempotencyKey: key,
  };
  await recordUsageEvents(deps, [event]);
}

/** Documents with chunks that have no vector for `model`. */
async function documentsMissingVectors(
  db: Db,
  model: string,
  limit: number,
): Promise<{ documentId: string; projectId: string }[]> {
  return db.prisma.$queryRaw<{ documentId: string; projectId: string }[]>`
    SELECT DISTINCT c."documentId", c."projectId"
    FROM "KbChunk" AS c LEFT JOIN "kb_chunk_embedding" AS e ON e."seq" = c."seq" AND e."model" = ${model}
    WHERE e."seq" IS NULL
    LIMIT ${limit}`;
}

/** Embeds the chunks of one document that lack a vector for the current model. */
async function embedDocument(
  deps: { db: Db; llm: LlmProvider; pubsub?: AppPubSub },
  doc: { documentId: string; projectId: string },
  model: string,
  signal: AbortSignal,
): Promise<number> {
  const missing = await deps.db.prisma.$queryRaw<{ seq: number | bigint; content: string }[]>`
    SELECT c."seq", c."content"
    FROM "KbChunk" AS c LEFT JOIN "kb_chunk_embedding" AS e ON e."seq" = c."seq" AND e."model" = ${model}
    WHERE c."documentId" = ${doc.documentId} AND e."seq" IS NULL
    ORDER BY c."seq"`;
  if (missing.length === 0) return 0;
  const embedded = await embedTexts(
    deps.llm,
    missing.map((m) => m.content),
    signal,
  );
  // A chunk deleted meanwhile (its document was replaced) is skipped by the foreign key check
  // failing the whole batch; store only chunks that still exist.
  await deps.db.prisma.$transaction(async (tx) => {
    const alive = new Set(
      (
        await tx.kbChunk.findMany({
          where: { seq: { in: missing.map((m) => Number(m.seq)) } },
          select: { seq: true },
        })
      ).map((c) => c.seq),
    );
    await storeEmbeddings(
      tx,
      deps.db.provider,
      embedded.model,
      missing
        .map((m, i) => ({ seq: Number(m.seq), vector: embedded.vectors[i] ?? [] }))
        .filter((r) => alive.has(r.seq) && r.vector.length > 0),
    );
  });
  const owner = await deps.db.prisma.kbDocument.findUnique({
    where: { id: doc.documentId },
    select: { environmentId: true },
  });
  await recordEmbeddingUsage(
    deps,
    { projectId: doc.projectId, environmentId: owner?.environmentId ?? null },
    embedded.accounting,
    `kb-embed:${doc.documentId}:${missing[0]?.seq}:${model}`,
  );
  return missing.length;
}

/**
 * The sweep: embeds documents that miss vectors for the current model, then, if some are left,
 * enqueues its next run at once.
 */
export function createKbEmbedHandler(deps: {
  db: Db;
  llm: LlmProvider;
  pubsub: AppPubSub;
  logger: Logger;
}): JobHandler {
  return async (job) => {
    const model = deps.llm.info.embeddingModel;
    if (!model) return;
    const docs = await documentsMissingVectors(deps.db, model, DOCUMENTS_PER_SWEEP);
    let embedded = 0;
    for (const doc of docs) {
      if (job.signal.aborted) break;
      embedded += await embedDocument(deps, doc, model, job.signal);
    }
    if (embedded) deps.logger.info({ embedded, documents: docs.length, model }, 'embedded knowledge-base chunks');
    if (docs.length === DOCUMENTS_PER_SWEEP && !job.signal.aborted) {
      await requestEmbeddingSweep(deps, `more:${job.id}`);
    }
  };
}

/** Enqueues a sweep run now (idempotent per `key`). */
export async function requestEmbeddingSweep(deps: { db: Db; pubsub: AppPubSub }, key: string): Promise<void> {
  await enqueueJob(deps.db.prisma, { queue: KB_EMBED_QUEUE, payload: {}, dedupeKey: `kb-embed:${key}` });
  notifyEnqueued(deps.pubsub, KB_EMBED_QUEUE);
}
