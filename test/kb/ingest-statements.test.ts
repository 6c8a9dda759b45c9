import { expect, it } from 'vitest';
import { KB_INGEST_QUEUE } from '../../src/kb/documents';
import { pipelinedInsertSize } from '../../src/kb/ingest';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { kbIngestHandlerOf, uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSqlStatements } from '../helpers/sql-statements';

/**
 * The ingestion job stores a document in a fixed number of statements whatever its number of
 * chunks: the chunks go in as one multi-row INSERT (one per thousand), never one per chunk, and
 * each is stored with its content, position, token count and metadata.
 */
describeEachDatabase('knowledge-base ingestion statements', (provider) => {
  // No job runner: its polls would be recorded beside the job's statements; the test runs the job.
  const t = useTestApp(provider, { env: { JOBS_ENABLED: 'false' } });

  const paragraphs = (n: number, word: string) =>
    Array.from({ length: n }, (_, i) => `${word} paragraph ${i} ${'lorem ipsum dolor sit amet '.repeat(80)}.`).join(
      '\n\n',
    );

  async function ingest(p: TestProject, filename: string, content: string): Promise<string[]> {
    const res = await uploadFile(t.app, {
      key: p.apiKey,
      filename,
      content,
      metadata: { team: 'ops', n: 1 },
      query: { maxChunkSize: '500' },
    });
    expect(res.status, res.text).toBe(200);
    const [doc] = (res.body as { data: { documentID: string; revision?: number }[] }).data;
    return runJob(p, doc!.documentID);
  }

  /** Runs the ingestion job of the document's current revision; answers its SQL statements. */
  async function runJob(p: TestProject, documentId: string): Promise<string[]> {
    const { services } = t.app;
    const row = await services.db.prisma.kbDocument.findUniqueOrThrow({ where: { id: documentId } });
    const { handler, close } = await kbIngestHandlerOf(t.app);
    try {
      return await recordSqlStatements(() =>
        handler({
          id: `kb-ingest:${row.id}:${row.revision}`,
          queue: KB_INGEST_QUEUE,
          payload: { documentId: row.id, revision: row.revision },
          attempt: 1,
          maxAttempts: 1,
          projectId: p.projectID,
          signal: new AbortController().signal,
        }),
      );
    } finally {
      await close();
    }
  }

  const chunkInserts = (statements: string[]) => statements.filter((s) => /^\s*INSERT INTO\s+"?KbChunk"?/i.test(s));

  it('inserts the chunks of a small and a large document in one INSERT (SQLite) or one per batch (PostgreSQL)', async () => {
    const p = await t.app.createProject();
    const small = await ingest(p, 'small.txt', paragraphs(2, 'heron'));
    const large = await ingest(p, 'large.txt', paragraphs(60, 'osprey'));
    const { prisma } = t.app.services.db;
    const counts = await prisma.kbDocument.findMany({
      where: { projectId: p.projectID },
      select: { name: true, status: true, chunkCount: true },
      orderBy: { name: 'asc' },
    });
    expect(counts.map((d) => d.status)).toEqual(['SUCCESS', 'SUCCESS']);
    const [largeDoc, smallDoc] = counts;
    expect(smallDoc!.chunkCount).toBeGreaterThan(0);
    expect(largeDoc!.chunkCount).toBeGreaterThan(20 * smallDoc!.chunkCount);
    const shape = (sql: string) => {
      const words = sql.trim().split(/\s+/);
      const verb = (words[0] as string).toUpperCase();
      if (verb === 'BEGIN' || verb === 'COMMIT') return verb;
      const table = /^(?:UPDATE|INSERT INTO|DELETE FROM|SELECT .*? FROM)\s+"?(\w+)"?/is.exec(sql.trim())?.[1];
      return `${verb} ${table}`;
    };
    if (provider === 'sqlite') {
      // One INSERT for all the chunks of each, and no statement more for the larger document.
      expect(chunkInserts(small)).toHaveLength(1);
      expect(chunkInserts(large)).toHaveLength(1);
      expect(large.length).toBe(small.length);
      // The whole job: one read of the document with its upload, then one transaction of four
      // statements (mark done, drop the old chunks, insert the new, drop the upload).
      expect(large.map(shape)).toEqual([
        'SELECT KbDocument',
        'BEGIN',
        'UPDATE KbDocument',
        'DELETE KbChunk',
        'INSERT KbChunk',
        'DELETE KbDocumentSource',
        'COMMIT',
      ]);
    } else {
      // PostgreSQL cuts the chunks inside the transaction and inserts them in batches, each while
      // the next is cut (swapInPipelined): one INSERT per batch of chunks, never one per chunk.
      const batches = (n: number) => {
        let count = 0;
        for (let stored = 0; stored < n; count++) stored += pipelinedInsertSize(stored);
        return count;
      };
      expect(pipelinedInsertSize(0)).toBeGreaterThan(1);
      expect(chunkInserts(small)).toHaveLength(batches(smallDoc!.chunkCount));
      expect(chunkInserts(large)).toHaveLength(batches(largeDoc!.chunkCount));
      expect(chunkInserts(large).length).toBeGreaterThan(1);
      // A long document takes a few more statements, not one per batch of the first size.
      expect(batches(2000)).toBeLessThan(20);
      // One read of the document with its upload; then one transaction: lock the document while
      // it waits for this revision, drop the old chunks and the upload (while the first batch is
      // cut), insert the new, and, the one statement after the last INSERT, mark it done with
      // their count.
      expect(large.map(shape)).toEqual([
        'SELECT KbDocument',
        'BEGIN',
        'SELECT KbDocument',
        'DELETE KbChunk',
        'DELETE KbDocumentSource',
        ...Array.from({ length: batches(largeDoc!.chunkCount) }, () => 'INSERT KbChunk'),
        'UPDATE KbDocument',
        'COMMIT',
      ]);
      expect(large[2]).toMatch(/FOR UPDATE$/);
    }

    // What the statement stored: every chunk with its position, tokens and the document's metadata.
    const chunks = await prisma.kbChunk.findMany({
      where: { document: { projectId: p.projectID, name: 'large.txt' } },
      orderBy: { position: 'asc' },
    });
    expect(chunks.map((c) => c.position)).toEqual(chunks.map((_, i) => i));
    for (const c of chunks) {
      expect(c.content.length).toBeGreaterThan(0);
      expect(c.tokens).toBeGreaterThan(0);
      expect(c.tokens).toBeLessThanOrEqual(500);
      expect(c.metadata).toEqual({ team: 'ops', n: 1 });
      expect(c.rowMetadata).toBeNull();
    }
    expect(chunks[0]!.content.startsWith('osprey paragraph 0')).toBe(true);
  });

  it("inserts a table's rows as chunks in one INSERT on both engines (nothing to cut while they go in)", async () => {
    const p = await t.app.createProject();
    const items = Array.from({ length: 120 }, (_, i) => ({ q: `question ${i} about egrets`, a: `answer ${i}` }));
    const res = await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: p.apiKey,
      body: { data: { name: 'egrets', schema: { searchableFields: ['q', 'a'] }, items } },
    });
    expect(res.status, res.text).toBe(200);
    const statements = await runJob(p, (res.body as { data: { documentID: string } }).data.documentID);
    expect(chunkInserts(statements)).toHaveLength(1);
    const doc = await t.app.services.db.prisma.kbDocument.findFirstOrThrow({ where: { projectId: p.projectID } });
    expect(doc).toMatchObject({ status: 'SUCCESS', chunkCount: 120, rowsCount: 120 });
  });

  it('stores a plain upload, its bytes and its job in one transaction (three INSERTs; one statement on PostgreSQL)', async () => {
    const p = await t.app.createProject();
    const content = paragraphs(3, 'plover');
    let res: Awaited<ReturnType<typeof uploadFile>> | undefined;
    const statements = await recordSqlStatements(async () => {
      res = await uploadFile(t.app, { key: p.apiKey, filename: 'plain.txt', content, metadata: { team: 'ops' } });
    });
    expect(res?.status, res?.text).toBe(200);
    const first = statements.findIndex((s) => /^\s*(BEGIN|WITH "document")/i.test(s));
    expect(first).toBeGreaterThanOrEqual(0);
    // On SQLite BEGIN, the three INSERTs, COMMIT. On PostgreSQL the document, its bytes and its
    // job go in one statement (three INSERTs in a WITH), which is its own transaction: one round
    // trip where BEGIN, the statements and COMMIT were four.
    const transactionEnds = statements.filter((s) => /^\s*(BEGIN|COMMIT)/i.test(s));
    let last: number;
    if (provider === 'sqlite') {
      expect(transactionEnds).toHaveLength(2);
      last = statements.findIndex((s, i) => i > first && /^\s*COMMIT/i.test(s));
      const written = statements
        .slice(first, last + 1)
        .map((s) => s.trim().split(/\s+/).slice(0, 3).join(' ').replaceAll('"', ''));
      expect(written).toEqual([
        expect.stringMatching(/^BEGIN/),
        'INSERT INTO KbDocument',
        'INSERT INTO KbDocumentSource',
        'INSERT INTO Job',
        'COMMIT',
      ]);
    } else {
      expect(transactionEnds).toHaveLength(0);
      last = first;
      const all = statements[first] as string;
      expect(all).toMatch(/INSERT INTO "KbDocument"/);
      expect(all).toMatch(/INSERT INTO "KbDocumentSource"/);
      expect(all).toMatch(/INSERT INTO "Job"/);
      expect(statements.filter((s) => /INSERT INTO "(KbDocument|KbDocumentSource|Job)"/.test(s))).toHaveLength(1);
    }
    const commit = last;
    // The response reads the document once, and its tags with one more statement (a join), not
    // the three SELECTs of a Prisma relation (document, links, tags).
    const reads = statements.slice(commit + 1).filter((s) => /^\s*SELECT/i.test(s));
    expect(reads).toHaveLength(2);
    expect(reads[0]).toMatch(/FROM\s+[`"]?(main|public)?[`".]*KbDocument[`"]?\s/);
    expect(reads[1]).toMatch(/FROM "KbDocumentTag" dt JOIN "KbTag" t/);
    expect(statements.filter((s) => /KbDocumentTag/.test(s))).toHaveLength(1);
    // What was stored is what Prisma reads: the document as answered, the bytes as sent, the job.
    const [answered] = (res!.body as { data: { documentID: string; metadata: unknown; status: string }[] }).data;
    const { prisma } = t.app.services.db;
    const doc = await prisma.kbDocument.findUniqueOrThrow({
      where: { id: answered!.documentID },
      include: { source: true },
    });
    expect(doc).toMatchObject({
      projectId: p.projectID,
      kind: 'file',
      type: 'text',
      name: 'plain.txt',
      metadata: { team: 'ops' },
      status: 'PENDING',
      revision: 1,
      chunkCount: 0,
      environmentId: null,
    });
    expect(answered).toMatchObject({ metadata: { team: 'ops' }, status: 'PENDING' });
    expect(Buffer.from(doc.source!.bytes!).toString('utf8')).toBe(content);
    expect(doc.source).toMatchObject({ revision: 1, filename: 'plain.txt', table: null });
    const job = await prisma.job.findUniqueOrThrow({ where: { dedupeKey: `kb-ingest:${doc.id}:1` } });
    expect(job).toMatchObject({ queue: KB_INGEST_QUEUE, status: 'queued', projectId: p.projectID });
    expect(job.payload).toEqual({ documentId: doc.id, revision: 1 });
  });

  it('answers metadata keys in the same order from every upload path and from a read', async () => {
    const p = await t.app.createProject();
    const metadata = { zeta: 1, a: { y: 2, b: 3 }, team: 'ops' };
    const keys = (m: unknown): unknown => {
      const o = m as Record<string, unknown>;
      return Object.keys(o).map((k) => (o[k] && typeof o[k] === 'object' ? [k, keys(o[k])] : k));
    };
    const upload = async (fields: Record<string, string> = {}) => {
      const res = await uploadFile(t.app, {
        key: p.apiKey,
        filename: 'order.txt',
        content: 'sandpiper',
        metadata,
        query: fields,
      });
      expect(res.status, res.text).toBe(200);
      return (res.body as { data: { documentID: string; metadata: unknown }[] }).data[0]!;
    };
    // The plain upload (driver INSERTs), then an overwrite of it (the Prisma transaction).
    const plain = await upload();
    const overwritten = await upload({ overwrite: 'true' });
    expect(overwritten.documentID).toBe(plain.documentID);
    const read = await t.app.http('GET', `/v1/knowledge-base/docs/${plain.documentID}`, { key: p.apiKey });
    expect(read.status, read.text).toBe(200);
    const readMetadata = (read.body as { data: { metadata: unknown }[] }).data[0]!.metadata;
    expect(readMetadata).toEqual(metadata);
    expect(keys(plain.metadata)).toEqual(keys(readMetadata));
    expect(keys(overwritten.metadata)).toEqual(keys(readMetadata));
    // And the document the upload function returns, before any read.
    const { uploadDocument } = await import('../../src/kb/documents');
    const row = await uploadDocument(
      { db: t.app.services.db, pubsub: t.app.services.pubsub },
      {
        projectId: p.projectID,
        source: { kind: 'url', url: 'https://example.com/order' },
        metadata,
        overwrite: false,
      },
    );
    expect(keys(row.metadata)).toEqual(keys(readMetadata));
  });

  it('reads a document through the driver as Prisma reads it (getDocument)', async () => {
    const { documentSelect, getDocument } = await import('../../src/kb/documents');
    const p = await t.app.createProject();
    const other = await t.app.createProject();
    await ingest(p, 'read.txt', paragraphs(3, 'curlew'));
    const url = await t.app.http('POST', '/v1/knowledge-base/docs/upload/url', {
      key: p.apiKey,
      body: { data: { url: 'https://example.com/read', metadata: { zeta: [1, { b: true, a: null }], a: 2.5 } } },
    });
    expect(url.status, url.text).toBe(200);
    const { db } = t.app.services;
    const docs = await db.prisma.kbDocument.findMany({ where: { projectId: p.projectID }, select: documentSelect });
    expect(docs.map((d) => d.status).sort()).toEqual(['PENDING', 'SUCCESS']);
    for (const doc of docs) {
      const read = await getDocument(db, p.projectID, doc.id);
      expect(read).toEqual(doc);
      expect(read.createdAt.getTime()).toBe(doc.createdAt.getTime());
      expect(JSON.stringify(read.metadata)).toBe(JSON.stringify(doc.metadata));
      await expect(getDocument(db, other.projectID, doc.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    }
  });

  it('indexes every inserted chunk for full-text search, and a changed content again', async () => {
    const p = await t.app.createProject();
    await ingest(p, 'index.txt', paragraphs(30, 'kestrel'));
    const { prisma } = t.app.services.db;
    const chunks = await prisma.kbChunk.findMany({
      where: { document: { projectId: p.projectID } },
      select: { seq: true },
      orderBy: { seq: 'asc' },
    });
    expect(chunks.length).toBeGreaterThan(10);
    const seqs = chunks.map((c) => c.seq);
    if (provider === 'sqlite') {
      const hits = await prisma.$queryRawUnsafe<{ rowid: bigint }[]>(
        `SELECT rowid FROM "kb_chunk_fts" WHERE "kb_chunk_fts" MATCH 'kestrel' ORDER BY rowid`,
      );
      expect(hits.map((h) => Number(h.rowid))).toEqual(seqs);
      return;
    }
    // PostgreSQL: one index row per chunk, holding exactly the tsvector of its content and its
    // project, written by the statement trigger (one INSERT … SELECT per chunk INSERT, not a call per row).
    const indexed = await prisma.$queryRawUnsafe<{ seq: number; same: boolean }[]>(
      `SELECT s."seq", s."tsv" = to_tsvector('english', c."content") AND s."projectId" = c."projectId" AS same
       FROM "kb_chunk_search" s JOIN "KbChunk" c ON c."seq" = s."seq"
       WHERE c."projectId" = $1 ORDER BY s."seq"`,
      p.projectID,
    );
    expect(indexed.map((r) => r.seq)).toEqual(seqs);
    expect(indexed.every((r) => r.same)).toBe(true);
    const [trigger] = await prisma.$queryRawUnsafe<{ perRow: boolean }[]>(
      `SELECT ("tgtype" & 1) = 1 AS "perRow" FROM pg_trigger
       WHERE "tgrelid" = '"KbChunk"'::regclass AND "tgname" = 'kb_chunk_search_insert'`,
    );
    expect(trigger).toEqual({ perRow: false });
    // Nothing in Parley rewrites a chunk's content, but the index must follow if anything does.
    await prisma.$executeRawUnsafe(`UPDATE "KbChunk" SET "content" = 'a merlin' WHERE "seq" = $1`, seqs[0]);
    const found = await prisma.$queryRawUnsafe<{ seq: number }[]>(
      `SELECT "seq" FROM "kb_chunk_search" WHERE "tsv" @@ to_tsquery('english', 'merlin')`,
    );
    expect(found.map((r) => r.seq)).toEqual([seqs[0]]);
  });
});
