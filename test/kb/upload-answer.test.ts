import { expect, it } from 'vitest';
import type { QueryEvent } from '../../src/db/client';
import { useTestApp } from '../helpers/app';
import { uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSqlStatements } from '../helpers/sql-statements';

/**
 * An upload with wait=true answers the row that the wait read once the ingestion settled, without
 * reading it again through Prisma; the answer is the document as any later read gives it. A
 * selection with `chunks` still reads them (through Prisma, in document order).
 */
describeEachDatabase('knowledge-base upload answer', (provider) => {
  const t = useTestApp(provider);

  async function recordPrisma<T>(fn: () => Promise<T>): Promise<{ result: T; events: QueryEvent[] }> {
    const events: QueryEvent[] = [];
    const listener = (event: QueryEvent) => {
      events.push(event);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      return { result: await fn(), events };
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
  }

  it('answers a waited upload as a later read does, with no Prisma read of the document', async () => {
    const p = await t.app.createProject();
    const { result: res, events } = await recordPrisma(() =>
      uploadFile(t.app, {
        key: p.apiKey,
        filename: 'answer.txt',
        content: `plover ${'lorem ipsum dolor sit amet '.repeat(300)}`,
        metadata: { team: 'ops', n: 1 },
        query: { wait: 'true', maxChunkSize: '500' },
      }),
    );
    expect(res.status, res.text).toBe(200);
    const [doc] = (res.body as { data: { documentID: string; status: string; chunkCount: number }[] }).data;
    expect(doc!.status).toBe('SUCCESS');
    expect(doc!.chunkCount).toBeGreaterThan(1);
    expect(events.filter((e) => e.model === 'KbDocument').map((e) => e.operation)).toEqual([]);
    const read = await t.app.http('GET', `/v1/knowledge-base/docs/${doc!.documentID}`, { key: p.apiKey });
    expect(read.status, read.text).toBe(200);
    expect((res.body as { data: unknown[] }).data).toEqual((read.body as { data: unknown[] }).data);
  });

  it('wakes a waited upload with the row the job committed, without reading the document again', async () => {
    const p = await t.app.createProject();
    let res: Awaited<ReturnType<typeof uploadFile>> | undefined;
    const statements = await recordSqlStatements(async () => {
      res = await uploadFile(t.app, {
        key: p.apiKey,
        filename: 'handed.txt',
        content: `dunlin ${'lorem ipsum dolor sit amet '.repeat(300)}`,
        metadata: { team: 'ops' },
        query: { wait: 'true', maxChunkSize: '500' },
      });
    });
    expect(res!.status, res!.text).toBe(200);
    const [doc] = (res!.body as { data: { documentID: string; status: string; chunkCount: number }[] }).data;
    expect(doc!.status).toBe('SUCCESS');
    // The wait does not read the document: its job runs here and starts after the waiter
    // registered, so the waiter starts from the row the upload wrote, and the job's event wakes
    // it with the row the swap-in returned.
    const documentReads = (all: string[]) =>
      all.filter((s) => /^\s*SELECT "id", "projectId", "kind"[^;]*FROM "KbDocument" WHERE "id"/.test(s)).length;
    expect(documentReads(statements)).toBe(0);
    const read = await t.app.http('GET', `/v1/knowledge-base/docs/${doc!.documentID}`, { key: p.apiKey });
    expect((res!.body as { data: unknown[] }).data).toEqual((read.body as { data: unknown[] }).data);
    // An overwrite's job is queued (not handed to this runner): its wait reads the document first,
    // since the job may have finished already, and answers the new revision settled.
    let again: Awaited<ReturnType<typeof uploadFile>> | undefined;
    const overwritten = await recordSqlStatements(async () => {
      again = await uploadFile(t.app, {
        key: p.apiKey,
        filename: 'handed.txt',
        content: `sanderling ${'lorem ipsum dolor sit amet '.repeat(300)}`,
        query: { wait: 'true', maxChunkSize: '500', overwrite: 'true' },
      });
    });
    expect(again!.status, again!.text).toBe(200);
    expect((again!.body as { data: { documentID: string; status: string }[] }).data[0]).toMatchObject({
      documentID: doc!.documentID,
      status: 'SUCCESS',
    });
    expect(documentReads(overwritten)).toBeGreaterThanOrEqual(1);
  });

  it("runs a waited upload's ingestion here, claimed in the upload's transaction, without reading back the upload", async () => {
    const p = await t.app.createProject();
    const readsUpload = (statements: string[]) =>
      statements.filter((s) => /LEFT JOIN "KbDocumentSource" s ON s."documentId" = d."id"/.test(s)).length;
    let res: Awaited<ReturnType<typeof uploadFile>> | undefined;
    const waited = await recordSqlStatements(async () => {
      res = await uploadFile(t.app, {
        key: p.apiKey,
        filename: 'here.txt',
        content: `godwit ${'lorem ipsum dolor sit amet '.repeat(300)}`,
        query: { wait: 'true', maxChunkSize: '500' },
      });
    });
    expect(res!.status, res!.text).toBe(200);
    const [doc] = (res!.body as { data: { documentID: string; status: string; chunkCount: number }[] }).data;
    expect(doc).toMatchObject({ status: 'SUCCESS' });
    expect(doc!.chunkCount).toBeGreaterThan(1);
    // The job had the document and its bytes from the upload, and ran once, as attempt 1.
    expect(readsUpload(waited)).toBe(0);
    const job = () =>
      t.app.services.db.prisma.job.findFirstOrThrow({
        where: { queue: 'kb-ingest', payload: { equals: { documentId: doc!.documentID, revision: 1 } } },
      });
    await expect.poll(async () => (await job()).status, { timeout: 10_000 }).toBe('done');
    expect(await job()).toMatchObject({ attempts: 1, lockedBy: null, lastError: null });
    // Without wait the job is queued for any instance, and reads the upload back.
    let queued: Awaited<ReturnType<typeof uploadFile>> | undefined;
    const unwaited = await recordSqlStatements(async () => {
      queued = await uploadFile(t.app, {
        key: p.apiKey,
        filename: 'queued.txt',
        content: `knot ${'lorem ipsum dolor sit amet '.repeat(300)}`,
        query: { maxChunkSize: '500' },
      });
      const id = (queued.body as { data: { documentID: string }[] }).data[0]!.documentID;
      await expect
        .poll(
          async () =>
            (await t.app.http('GET', `/v1/knowledge-base/docs/${id}`, { key: p.apiKey })).body.data[0].status as string,
          { timeout: 10_000 },
        )
        .toBe('SUCCESS');
    });
    expect(queued!.status, queued!.text).toBe(200);
    expect(readsUpload(unwaited)).toBe(1);
  });

  it("answers a waited upload's tags as its ingestion read them when it settled the document, without reading them again", async () => {
    const p = await t.app.createProject();
    const tagReads = (statements: string[]) =>
      statements.filter((s) => /FROM "KbDocumentTag" dt JOIN "KbTag" t/.test(s));
    for (const [filename, tags, expected] of [
      ['tagged.txt', '["zebra", "Aardvark", "mole"]', ['Aardvark', 'mole', 'zebra']],
      ['untagged.txt', undefined, []],
    ] as const) {
      let res: Awaited<ReturnType<typeof uploadFile>> | undefined;
      const statements = await recordSqlStatements(async () => {
        res = await uploadFile(t.app, {
          key: p.apiKey,
          filename,
          content: `whimbrel ${'lorem ipsum dolor sit amet '.repeat(300)}`,
          query: { wait: 'true', maxChunkSize: '500', ...(tags ? { tags } : {}) },
        });
      });
      expect(res!.status, res!.text).toBe(200);
      const [doc] = (res!.body as { data: { documentID: string; status: string; tags: string[] }[] }).data;
      expect(doc).toMatchObject({ status: 'SUCCESS', tags: expected });
      // The only statements on the tags are the upload's own (attaching them), none after the job.
      expect(tagReads(statements).filter((s) => /^\s*SELECT dt\."documentId"/.test(s))).toEqual([]);
      const read = await t.app.http('GET', `/v1/knowledge-base/docs/${doc!.documentID}`, { key: p.apiKey });
      expect((res!.body as { data: unknown[] }).data).toEqual((read.body as { data: unknown[] }).data);
    }
  });

  it('reads the chunks of a waited upload that selects them, in order', async () => {
    const p = await t.app.createProject();
    const res = await t.app.gql(
      `mutation { uploadKnowledgeBaseTable(wait: true, input: { name: "birds", schema: { searchableFields: ["q"] },
        items: [{ q: "avocet" }, { q: "bittern" }, { q: "curlew" }] }) {
          documentID status { type } chunkCount chunks { position content } } }`,
      {},
      p.apiKey,
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body.errors).toBeUndefined();
    const doc = res.body.data.uploadKnowledgeBaseTable;
    expect(doc.status.type).toBe('SUCCESS');
    expect(doc.chunkCount).toBe(3);
    expect(doc.chunks.map((c: { position: number }) => c.position)).toEqual([0, 1, 2]);
    expect(doc.chunks.map((c: { content: string }) => c.content).join(' ')).toMatch(/avocet.*bittern.*curlew/s);
    const read = await t.app.gql(
      `query($id: ID!) { knowledgeBaseDocument(documentID: $id) { documentID status { type } chunkCount chunks { position content } } }`,
      { id: doc.documentID },
      p.apiKey,
    );
    expect(read.body.data.knowledgeBaseDocument).toEqual(doc);
  });
});
