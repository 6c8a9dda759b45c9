import type { Db, VectorSupport } from '../db/client';
import type { PrismaTx } from '../db/transaction';
import { Prisma } from '../generated/sqlite/client';

/**
 * Chunk embeddings, one per chunk for the configured embedding model, in `kb_chunk_embedding`:
 * little-endian float32 bytes on SQLite (compared by sqlite-vec), `real[]` with its norm on
 * PostgreSQL (compared by pgvector when installed, else by a SQL dot product). Either way the
 * comparison runs in the retrieval query, with the metadata filter, before the limit.
 */

export function vectorBytes(vector: readonly number[]): Uint8Array {
  return new Uint8Array(Float32Array.from(vector).buffer);
}

function norm(vector: readonly number[]): number {
  let sum = 0;
  for (const v of vector) sum += v * v;
  return Math.sqrt(sum);
}

/** Rows per statement when storing embeddings (one JSON parameter on PostgreSQL). */
export const embeddingBatch = 200;

/** The rows of `embeddingUpsert.postgresql`'s JSON parameter. */
export function embeddingRowsJson(rows: readonly { seq: number; vector: readonly number[] }[]): string {
  return JSON.stringify(rows.map((r) => ({ seq: r.seq, dims: r.vector.length, e: r.vector, n: norm(r.vector) })));
}

/**
 * The statements of storeEmbeddings for the database driver (Db.driver), as the ingestion job's
 * swap-in transaction runs them: on SQLite one row (seq, model, dims, float32 bytes), on
 * PostgreSQL the model and a JSON array of rows (embeddingRowsJson).
 */
export const embeddingUpsert = {
  sqlite: `INSERT INTO "kb_chunk_embedding" ("seq", "model", "dims", "embedding") VALUES (?, ?, ?, ?)
    ON CONFLICT ("seq") DO UPDATE SET "model" = excluded."model", "dims" = excluded."dims", "embedding" = excluded."embedding"`,
  postgresql: `INSERT INTO "kb_chunk_embedding" ("seq", "model", "dims", "embedding", "norm")
    SELECT j.seq, $1, j.dims, j.e, j.n FROM jsonb_to_recordset($2::jsonb) AS j(seq integer, dims integer, e real[], n real)
    ON CONFLICT ("seq") DO UPDATE SET "model" = excluded."model", "dims" = excluded."dims",
      "embedding" = excluded."embedding", "norm" = excluded."norm"`,
};

/** Stores (or replaces) the embeddings of chunks, all for `model`. */
export async function storeEmbeddings(
  tx: PrismaTx,
  provider: Db['provider'],
  model: string,
  rows: readonly { seq: number; vector: readonly number[] }[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += embeddingBatch) {
    const batch = rows.slice(i, i + embeddingBatch);
    if (provider === 'sqlite') {
      const values = batch.map((r) => Prisma.sql`(${r.seq}, ${model}, ${r.vector.length}, ${vectorBytes(r.vector)})`);
      await tx.$executeRaw`
        INSERT INTO "kb_chunk_embedding" ("seq", "model", "dims", "embedding") VALUES ${Prisma.join(values)}
        ON CONFLICT ("seq") DO UPDATE SET "model" = excluded."model", "dims" = excluded."dims", "embedding" = excluded."embedding"`;
    } else {
      await tx.$executeRawUnsafe(embeddingUpsert.postgresql, model, embeddingRowsJson(batch));
    }
  }
}

/**
 * Similarity (higher is closer, 1 for the same direction) of the embedding `e` to `vector`, as a
 * SQL expression over `kb_chunk_embedding e`.
 */
export function similaritySql(support: VectorSupport, vector: readonly number[]): Prisma.Sql {
  switch (support) {
    case 'sqlite-vec':
    case 'sqlite-js':
      return Prisma.sql`(1 - vec_distance_cosine(e."embedding", ${vectorBytes(vector)}))`;
    case 'pgvector':
      return Prisma.sql`(1 - (e."embedding"::vector <=> ${JSON.stringify(vector)}::vector))`;
    case 'postgresql':
      return Prisma.sql`((SELECT sum(a * b) FROM unnest(e."embedding", ${`{${vector.join(',')}}`}::real[]) AS t(a, b))
        / NULLIF(e."norm" * ${norm(vector)}, 0))`;
  }
}
