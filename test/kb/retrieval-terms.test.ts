import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject } from '../../src/admin/service';
import { createDb, type Db } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { Prisma } from '../../src/generated/sqlite/client';
import { compileMetadataFilter, parseMetadataFilter } from '../../src/kb/filter';
import { fullTextSql, metadataColumn, searchChunks, termTiers } from '../../src/kb/search';
import { commonTermThreshold, MIN_COMMON_CHUNKS, planTermTiers } from '../../src/kb/terms';
import { newId } from '../../src/lib/ids';
import { createAppPubSub } from '../../src/lib/pubsub';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

/**
 * Term weighting in retrieval: words most chunks hold do not make every chunk a match
 * (planTermTiers), and on PostgreSQL a selective metadata filter is served by the GIN index on
 * chunk metadata (docs/performance.md, "Knowledge-base retrieval").
 */

describe('planTermTiers', () => {
  it('matches distinctive terms alone, then all common terms, then any of them', () => {
    const counts = [
      { term: 'refund', chunks: 3 },
      { term: 'policy', chunks: 900 },
      { term: 'shipping', chunks: 600 },
      { term: 'xylophone', chunks: 0 },
    ];
    expect(planTermTiers(counts, 500)).toEqual([
      { terms: ['refund'], mode: 'any' },
      { terms: ['policy', 'shipping'], mode: 'all' },
      { terms: ['policy', 'shipping'], mode: 'any' },
    ]);
    // One common term: no separate "all" tier; no term held anywhere: nothing to search.
    expect(planTermTiers([{ term: 'policy', chunks: 900 }], 500)).toEqual([{ terms: ['policy'], mode: 'any' }]);
    expect(planTermTiers([{ term: 'xylophone', chunks: 0 }], 500)).toEqual([]);
  });

  it('counts a term as common above 5 % of the chunks, and never below MIN_COMMON_CHUNKS', () => {
    expect(commonTermThreshold(0)).toBe(MIN_COMMON_CHUNKS);
    expect(commonTermThreshold(1_000)).toBe(MIN_COMMON_CHUNKS);
    expect(commonTermThreshold(200_000)).toBe(10_000);
  });
});

describeEachDatabase('retrieval with common terms', (provider) => {
  let database: ScratchDatabase;
  let db: Db;
  let projectId: string;
  const TOTAL = 1_200;

  /** Chunk i: "policy" in 1,100 chunks, "shipping" in every other one, "refund" in three, and a rare tag. */
  function contentOf(i: number): string {
    const words = [`filler${i % 37}`, 'otter'];
    if (i < 1_100) words.push('policy');
    if (i % 2 === 0) words.push('shipping');
    if (i === 5 || i === 600 || i === 1_150) words.push('refund');
    return words.join(' ');
  }

  beforeAll(async () => {
    database = await createTestDatabase(provider);
    db = await createDb(database.url);
    const created = await createProject(
      { db, pubsub: createAppPubSub().pubsub },
      { name: 'terms', workspaceId: null, actor: 'cli', key: {} },
    );
    projectId = created.project.id;
    const documentId = newId();
    await db.prisma.kbDocument.create({
      data: { id: documentId, projectId, kind: 'table', type: 'table', name: 'terms', metadata: {}, status: 'SUCCESS' },
    });
    const json = (text: string) => (provider === 'postgresql' ? Prisma.sql`${text}::jsonb` : Prisma.sql`${text}`);
    const rows = Array.from({ length: TOTAL }, (_, i) => {
      const metadata = JSON.stringify({ category: i % 240 === 7 ? 'rare' : `common-${i % 3}`, n: i });
      return Prisma.sql`(${`chunk-${i}`}, ${documentId}, ${projectId}, ${i}, ${contentOf(i)}, 4, ${json(metadata)})`;
    });
    await db.prisma.$executeRaw`
      INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata")
      VALUES ${Prisma.join(rows)}`;
    // PostgreSQL reads term frequencies and row counts from the statistics ANALYZE keeps.
    if (provider === 'postgresql') await db.prisma.$executeRawUnsafe('ANALYZE');
  }, 120_000);
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  const search = (question: string, limit = 10, filter: Prisma.Sql = Prisma.sql`TRUE`) =>
    searchChunks(db, { projectId, question, limit, filter });

  it('tiers the terms by how many chunks hold them', async () => {
    expect(await termTiers(db, ['refund', 'policy', 'shipping'])).toEqual([
      { terms: ['refund'], mode: 'any' },
      { terms: ['policy', 'shipping'], mode: 'all' },
      { terms: ['policy', 'shipping'], mode: 'any' },
    ]);
  });

  it('does not let a common word make every chunk a match', async () => {
    const found = await search('What is the refund policy?', 10);
    // Only the three chunks that hold the distinctive word, although 1,100 hold "policy".
    expect(found.map((c) => c.chunkId).sort()).toEqual(['chunk-1150', 'chunk-5', 'chunk-600']);
  });

  it('matches the chunks that hold every common word of a question made only of common words', async () => {
    const found = await search('shipping policy', 1_000);
    expect(found.length).toBe(550);
    for (const chunk of found) expect(chunk.content).toMatch(/policy.*shipping/);
  });

  it('falls back to the common words when the distinctive ones match nothing', async () => {
    const found = await search('xylophone policy', 5);
    expect(found).toHaveLength(5);
    for (const chunk of found) expect(chunk.content).toMatch(/policy/);
  });

  it('applies the filter within the tier', async () => {
    const filter = compileMetadataFilter(parseMetadataFilter({ category: 'rare' }), db.provider, metadataColumn);
    const found = await search('shipping policy', 100, filter);
    // category "rare": i % 240 === 7, all odd, so none holds "shipping": the "all" tier finds
    // nothing and the "any" tier answers with those that hold "policy".
    expect(found.map((c) => c.chunkId).sort()).toEqual(['chunk-247', 'chunk-487', 'chunk-7', 'chunk-727', 'chunk-967']);
  });

  it.runIf(provider === 'postgresql')('serves a selective metadata filter from the GIN index on metadata', async () => {
    const filter = compileMetadataFilter(parseMetadataFilter({ category: 'rare' }), db.provider, metadataColumn);
    const sql = fullTextSql(db.provider, { projectId, terms: ['policy'], mode: 'any', filter, limit: 10 });
    // At 1,200 chunks a sequential scan is the cheaper plan, so seq scans are priced out here; this
    // proves the compiled filter is indexable by it. At 200k chunks the planner picks the index
    // on its own (the EXPLAIN ANALYZE in docs/performance.md).
    const plan = await db.prisma.$transaction(async (tx) => {
      await tx.$executeRawUnsafe('SET LOCAL enable_seqscan = off');
      return tx.$queryRaw<{ 'QUERY PLAN': string }[]>(Prisma.sql`EXPLAIN ${sql}`);
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/Bitmap Index Scan on "KbChunk_metadata_gin_idx"/);
  });

  it('ranks the same with no filter as with an always-true one, and only within the project', async () => {
    // Another project whose chunks hold the same words, shorter (so they would rank first).
    const other = await createProject(
      { db, pubsub: createAppPubSub().pubsub },
      { name: 'terms-other', workspaceId: null, actor: 'cli', key: {} },
    );
    const documentId = newId();
    await db.prisma.kbDocument.create({
      data: {
        id: documentId,
        projectId: other.project.id,
        kind: 'table',
        type: 'table',
        name: 'other',
        metadata: {},
        status: 'SUCCESS',
      },
    });
    await db.prisma.kbChunk.createMany({
      data: Array.from({ length: 20 }, (_, i) => ({
        id: `other-${i}`,
        documentId,
        projectId: other.project.id,
        position: i,
        content: 'shipping policy refund',
        tokens: 3,
        metadata: {},
      })),
    });
    const cases: [string, number][] = [
      ['shipping policy', 1_000],
      ['shipping policy', 7],
      ['refund policy', 10],
      ['xylophone policy', 5],
    ];
    for (const [question, limit] of cases) {
      const plain = await searchChunks(db, { projectId, question, limit, filter: null });
      expect(plain).toEqual(await search(question, limit));
      expect(plain.length).toBeGreaterThan(0);
      for (const chunk of plain) expect(chunk.chunkId).toMatch(/^chunk-/);
    }
    if (provider !== 'postgresql') return;
    // PostgreSQL ranks in the index table and reads only the chunks it returns.
    const sql = fullTextSql(db.provider, {
      projectId,
      terms: ['policy', 'shipping'],
      mode: 'all',
      filter: null,
      limit: 7,
    });
    const [row] = await db.prisma.$transaction(async (tx) => {
      await tx.$executeRawUnsafe('SET LOCAL enable_seqscan = off');
      return tx.$queryRaw<{ 'QUERY PLAN': unknown }[]>(Prisma.sql`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`);
    });
    type PlanNode = { 'Relation Name'?: string; 'Actual Rows': number; 'Actual Loops': number; Plans?: PlanNode[] };
    const nodes: PlanNode[] = [];
    const walk = (node: PlanNode) => {
      nodes.push(node);
      for (const child of node.Plans ?? []) walk(child);
    };
    const explained = row?.['QUERY PLAN'] as { Plan: PlanNode }[] | undefined;
    walk(explained![0]!.Plan);
    const chunkReads = nodes.filter((n) => n['Relation Name'] === 'KbChunk');
    expect(chunkReads.length).toBeGreaterThan(0);
    for (const n of chunkReads) expect(n['Actual Rows'] * n['Actual Loops']).toBeLessThanOrEqual(7);
  });
});
