import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import {
  commonTermThreshold,
  fts5AndQuery,
  fts5OrQuery,
  planTermTiers,
  questionTerms,
  type TermTier,
  tsqueryAnd,
  tsqueryOr,
} from './terms';
import { similaritySql } from './vectors';

/**
 * Retrieval: BM25 over the full-text index (FTS5 on SQLite, tsvector + GIN on PostgreSQL), and,
 * when embeddings are on, nearest chunks by cosine similarity, merged by reciprocal rank fusion.
 * The metadata filter (src/kb/filter) is part of each query's WHERE clause, so ranking and the
 * limit apply to matching chunks only; nothing is filtered after the fact in memory.
 *
 * Full-text matching is tiered by how common the question's terms are (planTermTiers): terms most
 * chunks hold do not make every chunk a match, so the ranking only ever sees the chunks that hold
 * the question's distinctive terms, or all of its common ones, and stops at the first tier that
 * finds something. How the filter and the match meet is left to each engine's plan: on SQLite the
 * FTS5 table drives (the filter is tested on the matches), on PostgreSQL the planner starts from
 * the GIN index on metadata when the filter is selective and from the full-text GIN index when
 * it is not (docs/performance.md, "Knowledge-base retrieval").
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
  /**
   * A boolean SQL expression over `c."metadata"` and `c."documentId"` (compileMetadataFilter,
   * compileTagFilter); null when the query has no condition, which lets PostgreSQL rank the
   * full-text matches before reading any chunk (fullTextSql).
   */
  filter: Prisma.Sql | null;
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

const noFilter = Prisma.sql`TRUE`;

/**
 * The full-text query. On SQLite it is driven by the FTS5 table (CROSS JOIN keeps that order, so
 * the planner never starts from a filter and scans every chunk); a test asserts the plan.
 *
 * On PostgreSQL, with no filter (`filter: null`), the matches are ranked and cut to the limit in
 * the index table alone (its rows carry the chunk's project), and only the chunks returned are
 * read from "KbChunk": a question's matches at 200k chunks are about 600 rows, each of which
 * otherwise cost a visit to its chunk's row to check the project before ranking. The ranking,
 * its order and ties are those of the general form. With a filter, the chunk's row is needed to
 * test it anyway, so the general form stands and the planner picks the index to start from.
 */
export function fullTextSql(
  provider: Db['provider'],
  input: {
    projectId: string;
    terms: readonly string[];
    mode?: TermTier['mode'];
    filter: Prisma.Sql | null;
    limit: number;
  },
): Prisma.Sql {
  const all = input.mode === 'all';
  const filter = input.filter ?? noFilter;
  if (provider === 'sqlite') {
    return Prisma.sql`
      SELECT c."seq", c."id", c."documentId", c."content", c."metadata", -bm25("kb_chunk_fts") AS "score"
      FROM "kb_chunk_fts" CROSS JOIN "KbChunk" AS c ON c."seq" = "kb_chunk_fts".rowid
      WHERE "kb_chunk_fts" MATCH ${all ? fts5AndQuery(input.terms) : fts5OrQuery(input.terms)} AND c."projectId" = ${input.projectId} AND (${filter})
      ORDER BY bm25("kb_chunk_fts"), c."seq"
      LIMIT ${input.limit}`;
  }
  const tsquery = all ? tsqueryAnd(input.terms) : tsqueryOr(input.terms);
  if (!input.filter) {
    return Prisma.sql`
      SELECT c."seq", c."id", c."documentId", c."content", c."metadata", r."score"
      FROM (
        SELECT s."seq", ts_rank_cd(s."tsv", q.query, 1) AS "score"
        FROM to_tsquery('english', ${tsquery}) AS q(query)
        JOIN "kb_chunk_search" AS s ON s."tsv" @@ q.query
        WHERE s."projectId" = ${input.projectId}
        ORDER BY "score" DESC, s."seq"
        LIMIT ${input.limit}
      ) AS r
      JOIN "KbChunk" AS c ON c."seq" = r."seq"
      ORDER BY r."score" DESC, c."seq"`;
  }
  return Prisma.sql`
    SELECT c."seq", c."id", c."documentId", c."content", c."metadata", ts_rank_cd(s."tsv", q.query, 1) AS "score"
    FROM to_tsquery('english', ${tsquery}) AS q(query)
    JOIN "kb_chunk_search" AS s ON s."tsv" @@ q.query
    JOIN "KbChunk" AS c ON c."seq" = s."seq"
    WHERE c."projectId" = ${input.projectId} AND (${filter})
    ORDER BY "score" DESC, c."seq"
    LIMIT ${input.limit}`;
}

/**
 * How many chunks hold each term, over the whole index (all projects together: a term is common
 * or not for the installation, which is what makes its matches expensive), and how many chunks
 * the index holds.
 * - SQLite counts the chunks (a walk of the smallest index, well under a millisecond at 200k
 *   chunks), then each term's FTS5 matches up to the common threshold (beyond it the exact number
 *   does not matter, and counting stops there; a walk of part of one doclist).
 * - PostgreSQL answers both in one statement from what (auto)ANALYZE keeps: the planner's row
 *   estimate (an exact count(*) there reads every visible row) and the statistics of the tsvector
 *   column (`most_common_elems` and their frequencies, sampled; read once, not once per term):
 *   counting matches there would build the whole bitmap of a common term. A term the statistics
 *   do not list is rarer than every term they do: it is counted as held by one chunk
 *   (distinctive), so it is searched, never dropped.
 */
async function countTermChunks(db: Db, terms: readonly string[]): Promise<{ total: number; counts: number[] }> {
  if (db.provider === 'sqlite') {
    const [totalRow] = await db.prisma.$queryRaw<{ n: number | bigint }[]>`SELECT count(*) AS "n" FROM "KbChunk"`;
    const total = Number(totalRow?.n ?? 0);
    const cap = commonTermThreshold(total);
    const counts = terms.map(
      (term, i) =>
        Prisma.sql`(SELECT count(*) FROM (SELECT 1 FROM "kb_chunk_fts" WHERE "kb_chunk_fts" MATCH ${fts5OrQuery([term])} LIMIT ${cap})) AS ${Prisma.raw(`"n${i}"`)}`,
    );
    const [row] = await db.prisma.$queryRaw<Record<string, number | bigint>[]>(
      Prisma.sql`SELECT ${Prisma.join(counts, ', ')}`,
    );
    return { total, counts: terms.map((_, i) => Number(row?.[`n${i}`] ?? 0)) };
  }
  const rows = await db.prisma.$queryRaw<{ i: number | bigint; share: number | null; total: number | bigint }[]>`
    WITH st AS MATERIALIZED (
      SELECT s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs
      FROM pg_stats AS s
      WHERE s.schemaname = current_schema() AND s.tablename = 'kb_chunk_search' AND s.attname = 'tsv'
    ), total AS (
      SELECT greatest(reltuples, 0)::bigint AS n FROM pg_class WHERE oid = '"KbChunk"'::regclass
    )
    SELECT q.i, (SELECT st.freqs[array_position(st.elems, l.lexeme)] FROM st) AS share, (SELECT n FROM total) AS total
    FROM unnest(${terms as string[]}::text[]) WITH ORDINALITY AS q(term, i)
    LEFT JOIN LATERAL (SELECT min(v.lexeme) AS lexeme FROM unnest(to_tsvector('english', q.term)) AS v) AS l ON TRUE`;
  const total = Number(rows[0]?.total ?? 0);
  const shares = new Map(rows.map((r) => [Number(r.i), r.share]));
  return {
    total,
    counts: terms.map((_, i) => {
      const share = shares.get(i + 1);
      return share == null ? 1 : Math.max(1, Math.round(share * total));
    }),
  };
}

/** The full-text tiers for a question's terms (planTermTiers), from the index's term counts. */
export async function termTiers(db: Db, terms: readonly string[]): Promise<TermTier[]> {
  if (terms.length === 0) return [];
  const { total, counts } = await countTermChunks(db, terms);
  return planTermTiers(
    terms.map((term, i) => ({ term, chunks: counts[i] ?? 0 })),
    commonTermThreshold(total),
  );
}

function vectorSql(
  db: Db,
  input: { projectId: string; model: string; vector: readonly number[]; filter: Prisma.Sql | null; limit: number },
): Prisma.Sql {
  const similarity = similaritySql(db.vectorSupport, input.vector);
  return Prisma.sql`
    SELECT c."seq", c."id", c."documentId", c."content", c."metadata", ${similarity} AS "score"
    FROM "kb_chunk_embedding" AS e JOIN "KbChunk" AS c ON c."seq" = e."seq"
    WHERE e."model" = ${input.model} AND e."dims" = ${input.vector.length}
      AND c."projectId" = ${input.projectId} AND (${input.filter ?? noFilter})
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
  let fullText: RetrievedChunk[] = [];
  for (const tier of await termTiers(db, terms)) {
    fullText = (
      await db.prisma.$queryRaw<ChunkRow[]>(
        fullTextSql(db.provider, {
          projectId: input.projectId,
          terms: tier.terms,
          mode: tier.mode,
          filter: input.filter,
          limit: candidates,
        }),
      )
    ).map(toChunk);
    if (fullText.length) break;
  }
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
