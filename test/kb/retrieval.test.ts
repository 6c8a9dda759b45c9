import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createProject } from '../../src/admin/service';
import { createDb, type Db } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { Prisma } from '../../src/generated/sqlite/client';
import { compileMetadataFilter, parseMetadataFilter } from '../../src/kb/filter';
import { metadataColumn, searchChunks } from '../../src/kb/search';
import { newId } from '../../src/lib/ids';
import { createAppPubSub } from '../../src/lib/pubsub';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';
import { byCodeUnit } from './filter-probe';

/**
 * The filter conformance table through the real retrieval query: every document of the table is
 * a chunk that matches the question, so the chunks the full-text query returns are exactly those
 * its WHERE clause (with the compiled filter) admits. This is the query the REST endpoint runs.
 */

interface ConformanceDocument {
  id: string;
  metadata: Record<string, unknown>;
  metadataText?: string;
}

const table = JSON.parse(readFileSync(new URL('./filter-conformance.json', import.meta.url), 'utf8')) as {
  documents: ConformanceDocument[];
  cases: ({ name: string; filter: unknown } & ({ expect: string[] } | { error: string }))[];
};
const cases = table.cases.filter((c): c is { name: string; filter: unknown; expect: string[] } => 'expect' in c);

describeEachDatabase('retrieval with the filter conformance table', (provider) => {
  let database: ScratchDatabase;
  let db: Db;
  let projectId: string;

  beforeAll(async () => {
    database = await createTestDatabase(provider);
    db = await createDb(database.url);
    const { pubsub } = createAppPubSub();
    const created = await createProject(
      { db, pubsub },
      { name: 'conformance', workspaceId: null, actor: 'cli', key: {} },
    );
    projectId = created.project.id;
    const documentId = newId();
    await db.prisma.kbDocument.create({
      data: {
        id: documentId,
        projectId,
        kind: 'table',
        type: 'table',
        name: 'conformance',
        metadata: {},
        status: 'SUCCESS',
      },
    });
    const json = (text: string) => (provider === 'postgresql' ? Prisma.sql`${text}::jsonb` : Prisma.sql`${text}`);
    const rows = table.documents.map(
      (d, position) =>
        Prisma.sql`(${d.id}, ${documentId}, ${projectId}, ${position}, ${'a common passage about otters'}, 5, ${json(
          d.metadataText ?? JSON.stringify(d.metadata),
        )})`,
    );
    await db.prisma.$executeRaw`
      INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata")
      VALUES ${Prisma.join(rows)}`;
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  it('finds every chunk without a filter', async () => {
    const all = await searchChunks(db, { projectId, question: 'otters', limit: 1000, filter: Prisma.sql`TRUE` });
    expect(all).toHaveLength(table.documents.length);
  });

  it.each(cases)('$name', async ({ filter, expect: expected }) => {
    const compiled = compileMetadataFilter(parseMetadataFilter(filter), db.provider, metadataColumn);
    const found = await searchChunks(db, { projectId, question: 'otters', limit: 1000, filter: compiled });
    expect(found.map((c) => c.chunkId).sort(byCodeUnit)).toEqual([...expected].sort(byCodeUnit));
  });
});
