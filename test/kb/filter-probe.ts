import { createDb, type Db } from '../../src/db/client';
import type { Provider } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { Prisma } from '../../src/generated/sqlite/client';
import { compileMetadataFilter, type MetadataFilter } from '../../src/kb/filter';
import { createTestDatabase } from '../helpers/lanes';

/**
 * A scratch table shaped like the chunk table's metadata column (`"metadata" JSONB NOT NULL` on
 * both engines), for running compiled filters against real SQLite and PostgreSQL.
 */
export interface FilterProbe {
  db: Db;
  /** Replaces the table's rows. `text` is the JSON written to the column, as Prisma would. */
  load(documents: readonly { id: string; text: string }[]): Promise<void>;
  /** IDs of the rows the filter matches, sorted. */
  matching(filter: MetadataFilter): Promise<string[]>;
  /** IDs of the rows where NOT of the filter's expression holds, sorted. */
  notMatching(filter: MetadataFilter): Promise<string[]>;
  /** For each filter, the sorted IDs it matches, from one query. */
  matchingEach(filters: readonly MetadataFilter[]): Promise<string[][]>;
  close(): Promise<void>;
}

const column = Prisma.raw('d."metadata"');

/** Opens the probe in a fresh test database, or in `database` (which it drops on close). */
export async function openFilterProbe(provider: Provider, database?: ScratchDatabase): Promise<FilterProbe> {
  database ??= await createTestDatabase(provider);
  const db = await createDb(database.url);
  await db.prisma.$executeRawUnsafe('CREATE TABLE kb_filter_probe (id TEXT PRIMARY KEY, metadata JSONB NOT NULL)');
  const compile = (filter: MetadataFilter) => compileMetadataFilter(filter, provider, column);
  return {
    db,
    async load(documents) {
      await db.prisma.$executeRawUnsafe('DELETE FROM kb_filter_probe');
      if (documents.length === 0) return;
      const json =
        provider === 'postgresql'
          ? (text: string) => Prisma.sql`${text}::jsonb`
          : (text: string) => Prisma.sql`${text}`;
      const rows = documents.map((doc) => Prisma.sql`(${doc.id}, ${json(doc.text)})`);
      await db.prisma.$executeRaw`INSERT INTO kb_filter_probe (id, metadata) VALUES ${Prisma.join(rows)}`;
    },
    async matching(filter) {
      const rows = await db.prisma.$queryRaw<{ id: string }[]>`
        SELECT d.id FROM kb_filter_probe AS d WHERE ${compile(filter)} ORDER BY d.id`;
      return rows.map((r) => r.id).sort(byCodeUnit);
    },
    async notMatching(filter) {
      const rows = await db.prisma.$queryRaw<{ id: string }[]>`
        SELECT d.id FROM kb_filter_probe AS d WHERE NOT (${compile(filter)}) ORDER BY d.id`;
      return rows.map((r) => r.id).sort(byCodeUnit);
    },
    async matchingEach(filters) {
      if (filters.length === 0) return [];
      const columns = filters.map(
        (f, i) => Prisma.sql`CASE WHEN ${compile(f)} THEN 1 ELSE 0 END AS ${Prisma.raw(`f${i}`)}`,
      );
      const rows = await db.prisma.$queryRaw<Record<string, unknown>[]>`
        SELECT d.id, ${Prisma.join(columns)} FROM kb_filter_probe AS d ORDER BY d.id`;
      return filters.map((_, i) =>
        rows
          .filter((r) => Number(r[`f${i}`]) === 1)
          .map((r) => String(r.id))
          .sort(byCodeUnit),
      );
    },
    async close() {
      await db.close();
      await database?.drop();
    },
  };
}

/** IDs are ASCII here; a fixed JS order keeps the comparison independent of collations. */
export const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
