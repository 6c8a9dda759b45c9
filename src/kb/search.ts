import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { fts5OrQuery, questionTerms, tsqueryOr } from './terms';
import { similaritySql } from './vectors';

/**
 * Retrieval: BM25 over the full-text index (FTS5 on SQLite, tsvector + GIN on PostgreSQL), and,
 * when embeddings are on, nearest chunks by cosine similarity, merged by reciprocal rank fusion.
 * The metadata filter (src/kb/filter) is part of each query's WHERE clause, so ranking and the
 * limit apply to matching chunks only; nothing is filtered after the fact in memory.
 */

export interface RetrievedChunk {
  seq: number;
  chunkId: string;
  documentId: string;
  content: string;
  metadata: Record<string, unknown>;
  /** Higher is better. BM25 alone: the engine's relevance (not comparable across engines); hybrid: the RRF score. */
  score: number;
}

export interface SearchInput {
  projectId: string;
  question: string;
  limit: number;
  /** A boolean SQL expression over `c."metadata"` (compileMetadataFilter); TRUE for no filter. */
  filter: Prisma.Sql;
  /** The question's embedding, when embeddings are on and the question was embedded. */
  queryVector?: { model: string; vector: readonly number[] } | null;
}

/** The constant of reciprocal rank fusion: score = Σ 1 / (RRF_K + rank). */
export const RRF_K = 60;

/** Candidates each ranking contributes to the fusion, per chunk wanted. */
const CANDIDATES_PER_RESULT = 5;
const MIN_CANDIDATES = 20;

interface ChunkRow {
  seq: number | bigint;
  id: string;
  documentId: string;
  content: string;
  metadata: unknown;
  score: number | string | null;
}

/** The filter column as the compiled filter expects it. */
export const metadataColumn = Prisma.raw('c."metadata"');

/**
 * The full-text query. On SQLite it is driven by the FTS5 table (CROSS JOIN keeps that order, so
 * the planner never starts from a filter and scans every chunk); a test asserts the plan.
 */
export function fullTextSql(
  provider: Db['provider'],
  input: { projectId: string; terms: readonly string[]; filter: Prisma.Sql; limit: number },
): Prisma.Sql {
  if (provider === 'sqlite') {
    return Prisma.sql`
      SELECT c."seq", c."id", c."documentId", c."content", c."metadata", -bm25("kb_chunk_fts") AS "score"
      FROM "kb_chunk_fts" CROSS JOIN "KbChunk" AS c ON c."seq" = "kb_chunk_fts".rowid
      WHERE "kb_chunk_fts" MATCH ${fts5OrQuery(input.terms)} AND c."projectId" = ${input.projectId} AND (${input.filter})
      ORDER BY bm25("kb_chunk_fts"), c."seq"
      LIMIT ${input.limit}`;
  }
  return Prisma.sql`
    SELECT c."seq", c."id", c."documentId", c."content", c."metadata", ts_rank_cd(s."tsv", q.query, 1) AS "score"
    FROM to_tsquery('english', ${tsqueryOr(input.terms)}) AS q(query)
    JOIN "kb_chunk_search" AS s ON s."tsv" @@ q.query
    JOIN "KbChunk" AS c ON c."seq" = s."seq"
    WHERE c."projectId" = ${input.projectId} AND (${input.filter})
    ORDER BY "score" DESC, c."seq"
    LIMIT ${input.limit}`;
}

function vectorSql(
  db: Db,
  input: { projectId: string; model: string; vector: readonly number[]; filter: Prisma.Sql; limit: number },
): Prisma.Sql {
  const similarity = similaritySql(db.vectorSupport, input.vector);
  return Prisma.sql`
    SELECT c."seq", c."id", c."documentId", c."content", c."metadata", ${similarity} AS "score"
    FROM "kb_chunk_embedding" AS e JOIN "KbChunk" AS c ON c."seq" = e."seq"
    WHERE e."model" = ${input.model} AND e."dims" = ${input.vector.length}
      AND c."projectId" = ${input.projectId} AND (${input.filter})
    ORDER BY "score" DESC, c."seq"
    LIMIT ${input.limit}`;
}

function toChunk(row: ChunkRow): RetrievedChunk {
  return {
    seq: Number(row.seq),
    chunkId: row.id,
    documentId: row.documentId,
    content: row.content,
    // The SQLite client returns a JSON column read by raw SQL as text.
    metadata: (typeof row.metadata === 'string' ? JSON.parse(row.metadata) : row.metadata) as Record<string, unknown>,
    score: Number(row.score ?? 0),
  };
}

/** Merges rankings: each chunk scores Σ 1 / (RRF_K + rank) over the lists it appears in (rank from 1). */
export function reciprocalRankFusion(lists: readonly (readonly RetrievedChunk[])[], limit: number): RetrievedChunk[] {
  const fused = new Map<number, RetrievedChunk>();
  for (const list of lists) {
    list.forEach((chunk, index) => {
      const add = 1 / (RRF_K + index + 1);
      const seen = fused.get(chunk.seq);
      if (seen) seen.score += add;
      else fused.set(chunk.seq, { ...chunk, score: add });
    });
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || a.seq - b.seq).slice(0, limit);
}

/** The chunks of a project that best answer `question`, among those the filter admits. */
export async function searchChunks(db: Db, input: SearchInput): Promise<RetrievedChunk[]> {
  const terms = questionTerms(input.question);
  const hybrid = Boolean(input.queryVector);
  const candidates = hybrid ? Math.max(MIN_CANDIDATES, input.limit * CANDIDATES_PER_RESULT) : input.limit;
  const fullText = terms.length
    ? (
        await db.prisma.$queryRaw<ChunkRow[]>(
          fullTextSql(db.provider, { projectId: input.projectId, terms, filter: input.filter, limit: candidates }),
        )
      ).map(toChunk)
    : [];
  if (!input.queryVector) return fullText;
  const nearest = (
    await db.prisma.$queryRaw<ChunkRow[]>(
      vectorSql(db, {
        projectId: input.projectId,
        model: input.queryVector.model,
        vector: input.queryVector.vector,
        filter: input.filter,
        limit: candidates,
      }),
    )
  ).map(toChunk);
  return reciprocalRankFusion([fullText, nearest], input.limit);
}
