import pg from 'pg';
import { expect, it } from 'vitest';
import { KB_INGEST_QUEUE } from '../../src/kb/documents';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { kbIngestHandlerOf, uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSqlStatements } from '../helpers/sql-statements';

/**
 * The swap-in of a re-uploaded document's chunks is atomic: a reader sees the old chunks or all
 * the new ones, never a mix, and an ingestion that fails part-way (a statement, an abort), after
 * some of the new chunks went in, leaves the old chunks, their index rows and the waiting
 * revision as they were. On PostgreSQL the chunks are cut and inserted in batches inside the
 * transaction (swapInPipelined), so "part-way" is several statements in.
 */
describeEachDatabase('knowledge-base ingestion swap-in', (provider) => {
  // No job runner: the tests run the job themselves, at the moment they choose.
  const t = useTestApp(provider, { env: { JOBS_ENABLED: 'false' } });

  const paragraphs = (n: number, word: string, last = '') =>
    Array.from(
      { length: n },
      (_, i) => `${word} paragraph ${i} ${'lorem ipsum dolor sit amet '.repeat(80)}${i === n - 1 ? last : ''}.`,
    ).join('\n\n');

  async function upload(
    p: TestProject,
    content: string,
    overwrite: boolean,
  ): Promise<{ id: string; revision: number }> {
    const res = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'swap.txt',
      content,
      metadata: { team: 'ops' },
      query: { maxChunkSize: '500', ...(overwrite ? { overwrite: 'true' } : {}) },
    });
    expect(res.status, res.text).toBe(200);
    const [doc] = (res.body as { data: { documentID: string; revision: number }[] }).data;
    return { id: doc!.documentID, revision: doc!.revision };
  }

  async function runJob(doc: { id: string; revision: number }, signal = new AbortController().signal) {
    const { handler, close } = await kbIngestHandlerOf(t.app);
    try {
      await handler({
        id: `kb-ingest:${doc.id}:${doc.revision}`,
        queue: KB_INGEST_QUEUE,
        payload: { documentId: doc.id, revision: doc.revision },
        attempt: 1,
        maxAttempts: 1,
        projectId: 'unused',
        signal,
      });
    } finally {
      await close();
    }
  }

  const chunksOf = (documentId: string) =>
    t.app.services.db.prisma.kbChunk.findMany({
      where: { documentId },
      select: { id: true, seq: true, content: true, position: true },
      orderBy: { position: 'asc' },
    });
  const documentOf = (id: string) =>
    t.app.services.db.prisma.kbDocument.findUniqueOrThrow({
      where: { id },
      select: { status: true, revision: true, chunkCount: true, source: { select: { revision: true } } },
    });
  /** Full-text index rows of the project's chunks, and index rows with no chunk. */
  async function indexRows(projectId: string): Promise<{ indexed: number; orphans: number }> {
    const { prisma } = t.app.services.db;
    const sql =
      provider === 'sqlite'
        ? `SELECT (SELECT count(*) FROM "kb_chunk_fts" f JOIN "KbChunk" c ON c."seq" = f.rowid WHERE c."projectId" = ?) AS indexed,
                  (SELECT count(*) FROM "kb_chunk_fts" f WHERE NOT EXISTS (SELECT 1 FROM "KbChunk" c WHERE c."seq" = f.rowid)) AS orphans`
        : `SELECT (SELECT count(*) FROM "kb_chunk_search" WHERE "projectId" = $1) AS indexed,
                  (SELECT count(*) FROM "kb_chunk_search" s WHERE NOT EXISTS (SELECT 1 FROM "KbChunk" c WHERE c."seq" = s."seq")) AS orphans`;
    const [row] = await prisma.$queryRawUnsafe<{ indexed: bigint | number; orphans: bigint | number }[]>(
      sql,
      projectId,
    );
    return { indexed: Number(row!.indexed), orphans: Number(row!.orphans) };
  }

  /** Makes every INSERT of a chunk whose content has "poison" fail, while `fn` runs. */
  async function withPoisonedInserts(fn: () => Promise<void>): Promise<void> {
    const { prisma } = t.app.services.db;
    const install =
      provider === 'sqlite'
        ? [
            `CREATE TRIGGER "test_poison" BEFORE INSERT ON "KbChunk" WHEN NEW."content" LIKE '%poison%'
             BEGIN SELECT RAISE(ABORT, 'poisoned chunk'); END`,
          ]
        : [
            `CREATE FUNCTION "test_poison"() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'poisoned chunk'; END; $$`,
            `CREATE TRIGGER "test_poison" BEFORE INSERT ON "KbChunk" FOR EACH ROW
             WHEN (NEW."content" LIKE '%poison%') EXECUTE FUNCTION "test_poison"()`,
          ];
    for (const sql of install) await prisma.$executeRawUnsafe(sql);
    try {
      await fn();
    } finally {
      if (provider === 'sqlite') await prisma.$executeRawUnsafe('DROP TRIGGER "test_poison"');
      else {
        await prisma.$executeRawUnsafe('DROP TRIGGER "test_poison" ON "KbChunk"');
        await prisma.$executeRawUnsafe('DROP FUNCTION "test_poison"()');
      }
    }
  }

  it('leaves the old chunks, their index and the waiting revision when an INSERT fails part-way', async () => {
    const p = await t.app.createProject();
    const first = await upload(p, paragraphs(40, 'heron'), false);
    await runJob(first);
    const old = await chunksOf(first.id);
    expect(old.length).toBeGreaterThanOrEqual(40);
    expect(await documentOf(first.id)).toMatchObject({ status: 'SUCCESS', revision: 1, chunkCount: old.length });

    // The poisoned chunk is the document's last: the chunks before it go in first.
    const second = await upload(p, paragraphs(40, 'osprey', ' poison'), true);
    expect(second).toEqual({ id: first.id, revision: 2 });
    let statements: string[] = [];
    await withPoisonedInserts(async () => {
      statements = await recordSqlStatements(() => expect(runJob(second)).rejects.toThrow(/poisoned chunk/));
    });
    const inserts = statements.filter((s) => /^\s*INSERT INTO "KbChunk"/.test(s));
    // On PostgreSQL, batches of chunks were inserted before the one that failed.
    if (provider === 'postgresql') expect(inserts.length).toBeGreaterThan(2);
    else expect(inserts).toHaveLength(1);
    expect(statements.some((s) => /^\s*ROLLBACK/i.test(s))).toBe(true);

    expect(await chunksOf(first.id)).toEqual(old);
    expect(await documentOf(first.id)).toMatchObject({
      status: 'PENDING',
      revision: 2,
      chunkCount: old.length,
      source: { revision: 2 },
    });
    expect(await indexRows(p.projectID)).toEqual({ indexed: old.length, orphans: 0 });

    // The retry, with nothing poisoned, stores the new revision whole.
    await runJob(second);
    const fresh = await chunksOf(first.id);
    expect(fresh.map((c) => c.position)).toEqual(fresh.map((_, i) => i));
    expect(fresh.every((c) => !c.content.includes('heron'))).toBe(true);
    expect(fresh.at(-1)!.content).toContain('poison');
    expect(await documentOf(first.id)).toMatchObject({
      status: 'SUCCESS',
      revision: 2,
      chunkCount: fresh.length,
      source: null,
    });
    expect(await indexRows(p.projectID)).toEqual({ indexed: fresh.length, orphans: 0 });
  });

  it('never shows a reader a mix of the old and the new chunks', async () => {
    const p = await t.app.createProject();
    const first = await upload(p, paragraphs(40, 'heron'), false);
    await runJob(first);
    const old = await chunksOf(first.id);
    const second = await upload(p, paragraphs(50, 'osprey'), true);

    let done = false;
    const job = runJob(second).finally(() => {
      done = true;
    });
    const key = (chunks: { id: string }[]) => chunks.map((c) => c.id).join(',');
    // The document's row and its chunks in one statement, so in one snapshot on both engines.
    const snapshotSql =
      provider === 'sqlite'
        ? `SELECT d."status", d."chunkCount",
             (SELECT group_concat("id", ',') FROM (SELECT "id" FROM "KbChunk" WHERE "documentId" = d."id" ORDER BY "position")) AS "chunks"
           FROM "KbDocument" d WHERE d."id" = ?`
        : `SELECT d."status", d."chunkCount",
             (SELECT string_agg("id", ',' ORDER BY "position") FROM "KbChunk" WHERE "documentId" = d."id") AS "chunks"
           FROM "KbDocument" d WHERE d."id" = $1`;
    const seen: { chunks: string; status: string; chunkCount: number }[] = [];
    do {
      const [row] = await t.app.services.db.prisma.$queryRawUnsafe<
        { status: string; chunkCount: number | bigint; chunks: string }[]
      >(snapshotSql, first.id);
      seen.push({ chunks: row!.chunks, status: row!.status, chunkCount: Number(row!.chunkCount) });
    } while (!done);
    await job;
    const fresh = await chunksOf(first.id);
    expect(fresh.length).toBeGreaterThan(old.length);
    // The first read is made while the job runs (on PostgreSQL, the job's reads and statements
    // take round trips, and the reads go on until it ends; SQLite's swap-in runs synchronously).
    expect(seen[0]!.chunks).toBe(key(old));
    // Each read is the old chunks whole or the new ones whole.
    for (const s of seen) expect([key(old), key(fresh)]).toContain(s.chunks);
    // And the document's row says what its chunks are.
    for (const s of seen)
      expect(s).toEqual(
        s.chunks === key(old)
          ? { chunks: key(old), status: 'PENDING', chunkCount: old.length }
          : { chunks: key(fresh), status: 'SUCCESS', chunkCount: fresh.length },
      );
    expect(await documentOf(first.id)).toMatchObject({ status: 'SUCCESS', revision: 2, chunkCount: fresh.length });
  });

  it.runIf(provider === 'postgresql')(
    'rolls back an ingestion aborted between two batches of chunks, and the retry stores them all',
    async () => {
      const p = await t.app.createProject();
      const first = await upload(p, paragraphs(40, 'heron'), false);
      await runJob(first);
      const old = await chunksOf(first.id);
      const second = await upload(p, paragraphs(40, 'osprey'), true);

      // Abort (a shutdown) as the job sends its second batch of chunks.
      const abort = new AbortController();
      const client = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
      const query = client.query;
      let inserts = 0;
      client.query = function (this: unknown, ...args: unknown[]) {
        if (typeof args[0] === 'string' && /^\s*INSERT INTO "KbChunk"/.test(args[0]) && ++inserts === 2) abort.abort();
        return query.apply(this, args);
      };
      try {
        await expect(runJob(second, abort.signal)).rejects.toThrow();
      } finally {
        client.query = query;
      }
      expect(inserts).toBe(2);
      expect(await chunksOf(first.id)).toEqual(old);
      expect(await documentOf(first.id)).toMatchObject({ status: 'PENDING', revision: 2, chunkCount: old.length });
      expect(await indexRows(p.projectID)).toEqual({ indexed: old.length, orphans: 0 });

      await runJob(second);
      const fresh = await chunksOf(first.id);
      expect(fresh.every((c) => !c.content.includes('heron'))).toBe(true);
      expect(await documentOf(first.id)).toMatchObject({ status: 'SUCCESS', chunkCount: fresh.length, source: null });
      expect(await indexRows(p.projectID)).toEqual({ indexed: fresh.length, orphans: 0 });
    },
  );
});
