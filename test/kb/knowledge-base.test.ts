import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prisma } from '../../src/generated/sqlite/client';
import { fullTextSql } from '../../src/kb/search';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { kbQuery, uploadFile, waitForStatus } from '../helpers/kb';
import { makeDocx, makePdf } from '../helpers/kb-fixtures';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSubscription } from '../helpers/subscriptions';

/** A loopback web server for URL documents. */
async function startSite(pages: Record<string, { status?: number; type: string; body: string }>) {
  const server: Server = createServer((req, res) => {
    const page = pages[req.url ?? ''];
    if (!page) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(page.status ?? 200, { 'content-type': page.type }).end(page.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const article = (title: string, text: string) => `<!doctype html><html><head><title>${title}</title></head><body>
  <nav><a href="/">Home</a> <a href="/about">About us</a> <a href="/jobs">Careers</a></nav>
  <article><h1>${title}</h1><p>${text}</p><p>${text} Further details follow in the next paragraph of this article.</p></article>
  <footer>Copyright footer text that is boilerplate.</footer></body></html>`;

describeEachDatabase('knowledge base over REST', (provider) => {
  const t = useTestApp(provider, { env: { KB_ALLOW_PRIVATE_URLS: 'true', KB_MAX_FILE_BYTES: '300000' } });
  let p: TestProject;
  let site: Awaited<ReturnType<typeof startSite>>;

  beforeAll(async () => {
    p = await t.app.createProject();
    site = await startSite({
      '/guide': {
        type: 'text/html; charset=utf-8',
        body: article('Ferry guide', 'The ferry to the narwhal island leaves at dawn.'),
      },
      '/gone': { status: 404, type: 'text/plain', body: 'nope' },
    });
  });
  afterAll(async () => {
    await site?.close();
  });

  const documentCount = () => t.app.services.db.prisma.kbDocument.count({ where: { projectId: p.projectID } });
  const find = async (question: string, extra: Record<string, unknown> = {}) => {
    const res = await kbQuery(t.app, p.apiKey, { question, synthesis: false, chunkLimit: 10, ...extra });
    expect(res.status, res.text).toBe(200);
    return res.body as { chunks: { documentID: string; content: string; metadata: Record<string, unknown> }[] };
  };

  it('ingests every file type, copies the metadata onto the chunks, and finds each by its words', async () => {
    const files: { filename: string; type: string; content: Uint8Array | string; word: string }[] = [
      {
        filename: 'notes.txt',
        type: 'text',
        content: 'Plain notes about the zebra enclosure.\n\nFeeding is at noon.',
        word: 'zebra',
      },
      {
        filename: 'readme.md',
        type: 'markdown',
        content: '# Kangaroo care\n\nA **kangaroo** needs space.',
        word: 'kangaroo',
      },
      {
        filename: 'page.html',
        type: 'html',
        content: article('Platypus facts', 'The platypus lays eggs.'),
        word: 'platypus',
      },
      {
        filename: 'report.pdf',
        type: 'pdf',
        content: await makePdf([['Quokka survey'], ['The quokka smiles often.']]),
        word: 'quokka',
      },
      {
        filename: 'memo.docx',
        type: 'docx',
        content: makeDocx(['Wombat memo', 'The wombat digs burrows.']),
        word: 'wombat',
      },
      {
        filename: 'animals.csv',
        type: 'csv',
        content: 'name,habitat\nechidna,"forest, scrub"\nkoala,eucalyptus',
        word: 'echidna',
      },
      {
        filename: 'data.json',
        type: 'json',
        content: JSON.stringify({ animal: { name: 'dingo', legs: 4 } }),
        word: 'dingo',
      },
    ];
    for (const file of files) {
      const res = await uploadFile(t.app, {
        key: p.apiKey,
        filename: file.filename,
        content: file.content,
        metadata: { source: file.type, tags: ['animals', file.word] },
        query: { wait: 'true' },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data[0]).toMatchObject({
        data: { type: file.type, name: file.filename },
        metadata: { source: file.type, tags: ['animals', file.word] },
        status: 'SUCCESS',
      });
      expect(res.body.data[0].chunkCount).toBeGreaterThan(0);
      const found = await find(`Tell me about the ${file.word}`);
      expect(found.chunks[0]?.documentID).toBe(res.body.data[0].documentID);
      expect(found.chunks[0]?.content.toLowerCase()).toContain(file.word);
      expect(found.chunks[0]?.metadata).toEqual({ source: file.type, tags: ['animals', file.word] });
    }
    // Readability kept the article and dropped the navigation.
    const html = await find('platypus');
    expect(html.chunks[0]?.content).not.toMatch(/Careers/);
  });

  it('fetches URL documents, and records why a URL could not be read', async () => {
    const ok = await t.app.http('POST', '/v1/knowledge-base/docs/upload', {
      key: p.apiKey,
      query: { wait: 'true' },
      body: { data: { type: 'url', url: `${site.url}/guide`, metadata: { kind: 'web' } } },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data[0]).toMatchObject({
      data: { type: 'url', url: `${site.url}/guide` },
      metadata: { kind: 'web' },
      status: 'SUCCESS',
    });
    const found = await find('When does the ferry to narwhal island leave?');
    expect(found.chunks[0]?.documentID).toBe(ok.body.data[0].documentID);

    const gone = await t.app.http('POST', '/v1/knowledge-base/docs/upload', {
      key: p.apiKey,
      query: { wait: 'true' },
      body: { data: { type: 'url', url: `${site.url}/gone` } },
    });
    expect(gone.status).toBe(200);
    expect(gone.body.data[0].status).toBe('ERROR');
    expect(gone.body.data[0].statusDetail).toMatch(/404/);
  });

  it('answers PENDING at once without wait, and the job finishes the document', async () => {
    const res = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'later.txt',
      content: 'The capybara relaxes in warm water.',
    });
    expect(res.status).toBe(200);
    expect(['PENDING', 'SUCCESS']).toContain(res.body.data[0].status);
    const done = await waitForStatus(t.app, p.apiKey, res.body.data[0].documentID);
    expect(done.data[0].status).toBe('SUCCESS');
    expect(done.chunks).toHaveLength(1);
    expect(done.chunks[0]).toMatchObject({ position: 0, content: 'The capybara relaxes in warm water.' });
  });

  it('makes one chunk per table row with its metadataFields, and filters on them in the query', async () => {
    const res = await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: p.apiKey,
      query: { wait: 'true' },
      body: {
        data: {
          name: 'faq',
          schema: { searchableFields: ['question', 'answer'], metadataFields: ['category', 'level', 'labels'] },
          items: [
            {
              question: 'How do refunds work?',
              answer: 'Refunds take five days.',
              category: 'billing',
              level: 1,
              labels: ['money'],
            },
            {
              question: 'Can I get a refund on shipping?',
              answer: 'Shipping refunds are rare.',
              category: 'shipping',
              level: 2,
              labels: { a: 1 },
            },
            { question: 'Refund status?', answer: 'Check the refund page.', category: 'billing', level: 3, labels: [] },
            { question: '', answer: '', category: 'empty' },
          ],
          metadata: { table: 'faq' },
        },
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({
      data: { type: 'table', name: 'faq', rowsCount: 4 },
      status: { type: 'SUCCESS' },
    });
    expect(res.body.data.chunkCount).toBe(3);
    const doc = await t.app.http('GET', `/v1/knowledge-base/docs/${res.body.data.documentID}`, { key: p.apiKey });
    expect(doc.body.chunks[0]).toMatchObject({
      content: 'question: How do refunds work?\nanswer: Refunds take five days.',
      metadata: { table: 'faq', category: 'billing', level: 1, labels: ['money'] },
    });

    const billing = await find('refund', { filters: { category: 'billing' } });
    expect(billing.chunks.map((c) => c.metadata.level).sort()).toEqual([1, 3]);
    const advanced = await find('refund', { filters: { $and: [{ table: 'faq' }, { level: { $gte: 2 } }] } });
    expect(advanced.chunks.map((c) => c.metadata.level).sort()).toEqual([2, 3]);
    const nested = await find('refund', { filters: { 'labels.a': 1 } });
    expect(nested.chunks.map((c) => c.metadata.category)).toEqual(['shipping']);
  });

  it('applies the filter before ranking, so chunkLimit returns the best chunks the filter admits', async () => {
    const strong = 'Llama llama llama: the llama is a llama of the llama kind.';
    for (let i = 0; i < 4; i++) {
      await uploadFile(t.app, {
        key: p.apiKey,
        filename: `strong-${i}.txt`,
        content: strong,
        metadata: { grade: 'a' },
        query: { wait: 'true' },
      });
    }
    const weak = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'weak.txt',
      content: 'A long text that mentions the llama once among many other words about other animals and places.',
      metadata: { grade: 'b' },
      query: { wait: 'true' },
    });
    const unfiltered = await kbQuery(t.app, p.apiKey, { question: 'llama', synthesis: false, chunkLimit: 1 });
    expect(unfiltered.body.chunks[0].metadata.grade).toBe('a');
    const filtered = await kbQuery(t.app, p.apiKey, {
      question: 'llama',
      synthesis: false,
      chunkLimit: 1,
      filters: { grade: 'b' },
    });
    expect(filtered.body.chunks).toHaveLength(1);
    expect(filtered.body.chunks[0].documentID).toBe(weak.body.data[0].documentID);
  });

  it('overwrites in place, and a failed re-ingestion keeps the previous content searchable', async () => {
    const first = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'policy.txt',
      content: 'The gecko policy says geckos stay indoors.',
      metadata: { v: 1 },
      query: { wait: 'true' },
    });
    const second = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'policy.txt',
      content: 'The iguana policy says iguanas stay outdoors.',
      metadata: { v: 2 },
      query: { wait: 'true', overwrite: 'true' },
    });
    expect(second.body.data[0].documentID).toBe(first.body.data[0].documentID);
    expect(second.body.data[0]).toMatchObject({ revision: 2, status: 'SUCCESS', metadata: { v: 2 } });
    expect((await find('gecko')).chunks.filter((c) => c.documentID === first.body.data[0].documentID)).toHaveLength(0);
    expect((await find('iguana')).chunks[0]).toMatchObject({
      documentID: first.body.data[0].documentID,
      metadata: { v: 2 },
    });

    // Text that is not valid UTF-8: the new revision fails, the iguana text stays.
    const broken = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'policy.txt',
      content: new Uint8Array([0x68, 0x69, 0x20, 0xc3, 0x28, 0x20, 0x21]),
      query: { wait: 'true', overwrite: 'true' },
    });
    expect(broken.body.data[0].documentID).toBe(first.body.data[0].documentID);
    expect(broken.body.data[0].status).toBe('ERROR');
    expect(broken.body.data[0].statusDetail).toMatch(/UTF-8/);
    expect((await find('iguana')).chunks[0]?.documentID).toBe(first.body.data[0].documentID);

    // Without overwrite, the same name makes a new document.
    const third = await uploadFile(t.app, { key: p.apiKey, filename: 'policy.txt', content: 'Another gecko note.' });
    expect(third.body.data[0].documentID).not.toBe(first.body.data[0].documentID);
  });

  it('replaces a document with PUT, updates metadata with PATCH (the chunks at once), and deletes it', async () => {
    const doc = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'heron.txt',
      content: 'The heron waits by the pond.',
      metadata: { team: 'birds' },
      query: { wait: 'true' },
    });
    const id = doc.body.data[0].documentID;
    const replaced = await uploadFile(t.app, {
      key: p.apiKey,
      method: 'PUT',
      path: `/v1/knowledge-base/docs/${id}/upload`,
      filename: 'heron.md',
      content: '# Heron\n\nThe heron fishes at the lake.',
      query: { wait: 'true' },
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.data[0]).toMatchObject({
      documentID: id,
      data: { type: 'markdown', name: 'heron.md' },
      metadata: { team: 'birds' },
    });
    expect((await find('heron lake')).chunks[0]?.content).toMatch(/lake/);

    const patched = await t.app.http('PATCH', `/v1/knowledge-base/docs/${id}`, {
      key: p.apiKey,
      body: { data: { metadata: { team: 'waders' } } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.metadata).toEqual({ team: 'waders' });
    expect((await find('heron', { filters: { team: 'waders' } })).chunks.map((c) => c.documentID)).toEqual([id]);
    expect((await find('heron', { filters: { team: 'birds' } })).chunks).toHaveLength(0);

    const seqs = await t.app.services.db.prisma.kbChunk.findMany({ where: { documentId: id }, select: { seq: true } });
    const deleted = await t.app.http('DELETE', `/v1/knowledge-base/docs/${id}`, { key: p.apiKey });
    // The original's documents: 200 with no content.
    expect(deleted.status).toBe(200);
    expect(deleted.text).toBe('');
    expect((await t.app.http('GET', `/v1/knowledge-base/docs/${id}`, { key: p.apiKey })).status).toBe(404);
    expect((await find('heron')).chunks).toHaveLength(0);
    // The full-text index lost the chunks too (the triggers ran on the cascade).
    const indexRows =
      provider === 'sqlite'
        ? await t.app.services.db.prisma.$queryRaw<
            { n: bigint }[]
          >`SELECT count(*) AS n FROM "kb_chunk_fts" WHERE "kb_chunk_fts" MATCH 'heron'`
        : await t.app.services.db.prisma.$queryRaw<{ n: bigint }[]>`
            SELECT count(*) AS n FROM "kb_chunk_search" WHERE "seq" IN (${Prisma.join(seqs.map((s) => s.seq))})`;
    expect(Number(indexRows[0]?.n)).toBe(0);
  });

  it('lists documents newest first, in pages, by type and status', async () => {
    const q = await t.app.createProject();
    for (const name of ['a.txt', 'b.txt', 'c.md']) {
      await uploadFile(t.app, {
        key: q.apiKey,
        filename: name,
        content: `Document ${name} about otters.`,
        query: { wait: 'true' },
      });
    }
    const page1 = await t.app.http('GET', '/v1/knowledge-base/docs', { key: q.apiKey, query: { limit: '2' } });
    expect(page1.status).toBe(200);
    expect(page1.body.total).toBe(3);
    expect(page1.body.data.map((d: { data: { name: string } }) => d.data.name)).toEqual(['c.md', 'b.txt']);
    const page2 = await t.app.http('GET', '/v1/knowledge-base/docs', {
      key: q.apiKey,
      query: { limit: '2', page: '2' },
    });
    expect(page2.body.data.map((d: { data: { name: string } }) => d.data.name)).toEqual(['a.txt']);
    const md = await t.app.http('GET', '/v1/knowledge-base/docs', {
      key: q.apiKey,
      query: { documentType: 'markdown' },
    });
    expect(md.body).toMatchObject({ total: 1 });
    const failed = await t.app.http('GET', '/v1/knowledge-base/docs', { key: q.apiKey, query: { status: 'ERROR' } });
    expect(failed.body).toEqual({ total: 0, data: [] });
  });

  it('answers from the chunks with the built-in provider, and counts documents and tokens in usage', async () => {
    const q = await t.app.createProject();
    await uploadFile(t.app, {
      key: q.apiKey,
      filename: 'hours.txt',
      content: 'The museum opens at nine. The cafe closes at five. Tickets cost ten euros.',
      query: { wait: 'true' },
    });
    const res = await kbQuery(t.app, q.apiKey, { question: 'When does the cafe close?' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.output).toContain('The cafe closes at five.');
    expect(res.body.model).toBe('builtin');
    expect(res.body.queryTokens).toBeGreaterThan(0);
    expect(res.body.answerTokens).toBeGreaterThan(0);
    expect(res.body.totalTokens).toBe(res.body.queryTokens + res.body.answerTokens);
    expect(res.body.chunks[0].source).toEqual({ type: 'text', name: 'hours.txt', tags: [] });

    // The path older clients use answers the same.
    const legacy = await t.app.http('POST', '/knowledge-base/query', {
      key: q.apiKey,
      body: { question: 'When does the cafe close?' },
    });
    expect(legacy.status).toBe(200);
    expect(legacy.body.output).toBe(res.body.output);

    const none = await kbQuery(t.app, q.apiKey, { question: 'xylophone' });
    expect(none.body).toMatchObject({ output: null, chunks: [], queryTokens: 0, answerTokens: 0, totalTokens: 0 });

    const usage = async (name: string) => {
      const r = await t.app.http('POST', '/v2/query/usage', {
        key: q.apiKey,
        body: { data: { name, filter: { projectID: q.projectID } } },
      });
      expect(r.status, r.text).toBe(200);
      return r.body.result.items as Record<string, unknown>[];
    };
    // Summed over items: the two queries may fall either side of an hour boundary.
    const total = (items: Record<string, unknown>[], where: (i: Record<string, unknown>) => boolean) =>
      items.filter(where).reduce((n, i) => n + Number(i.count), 0);
    const docs = await usage('kb_documents');
    expect(new Set(docs.map((d) => d.documentID))).toEqual(new Set([res.body.chunks[0].documentID]));
    expect(total(docs, () => true)).toBe(2);
    const credit = await usage('credit_usage');
    expect(new Set(credit.map((c) => c.model))).toEqual(new Set(['builtin']));
    expect(total(credit, (c) => c.type === 'llm-input')).toBe(res.body.queryTokens * 2);
    expect(total(credit, (c) => c.type === 'llm-output')).toBe(res.body.answerTokens * 2);
  });

  it('refuses bad input with the documented errors and stores nothing', async () => {
    const before = await documentCount();
    const upload = (opts: Partial<Parameters<typeof uploadFile>[1]>) =>
      uploadFile(t.app, { key: p.apiKey, filename: 'x.txt', content: 'hello', ...opts });
    const expectError = (
      res: { status: number; body: Record<string, unknown> },
      status: number,
      code: string,
      message?: RegExp,
    ) => {
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      expect(res.body).toMatchObject({ statusCode: status, errorCode: code });
      if (message) expect(res.body.message).toMatch(message);
    };
    expectError(await upload({ query: { maxChunkSize: '499' } }), 400, 'VALIDATION_FAILED', /maxChunkSize/);
    expectError(await upload({ query: { maxChunkSize: '1501' } }), 400, 'VALIDATION_FAILED', /maxChunkSize/);
    expectError(await upload({ query: { maxChunkSize: '1000abc' } }), 400, 'VALIDATION_FAILED');
    expectError(await upload({ query: { overwrite: 'maybe' } }), 400, 'VALIDATION_FAILED', /overwrite/);
    // The original's upload options that Parley does not implement: refused by name, never ignored.
    for (const option of [
      'markdownConversion',
      'llmGeneratedQ',
      'llmPrependContext',
      'llmBasedChunks',
      'llmContentSummarization',
    ]) {
      const refused = await upload({ query: { [option]: 'true' } });
      expectError(refused, 400, 'VALIDATION_FAILED', new RegExp(`${option}.*not supported`));
      expect(refused.body.details).toEqual([{ path: option, message: expect.stringContaining('leave it out') }]);
      expectError(await upload({ query: { [option]: 'perhaps' } }), 400, 'VALIDATION_FAILED', new RegExp(option));
    }
    expectError(await upload({ query: { tags: '' + 'x'.repeat(101) } }), 400, 'VALIDATION_FAILED', /tags/);
    const urlRefused = await t.app.http('POST', '/v1/knowledge-base/docs/upload', {
      key: p.apiKey,
      query: { llmGeneratedQ: 'true' },
      body: { data: { type: 'url', url: 'https://example.com/', metadata: {} } },
    });
    expectError(urlRefused, 400, 'VALIDATION_FAILED', /llmGeneratedQ/);
    const tableRefused = await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: p.apiKey,
      query: { llmBasedChunks: '1' },
      body: { data: { name: 't', schema: { searchableFields: ['a'], metadataFields: [] }, items: [{ a: 'x' }] } },
    });
    expectError(tableRefused, 400, 'VALIDATION_FAILED', /llmBasedChunks/);
    expectError(await upload({ filename: 'virus.exe' }), 415, 'UNSUPPORTED_MEDIA_TYPE', /virus\.exe/);
    expectError(await upload({ content: new Uint8Array(400_000) }), 413, 'PAYLOAD_TOO_LARGE');
    expectError(await upload({ metadata: '{not json' }), 400, 'VALIDATION_FAILED', /metadata/);
    expectError(await upload({ metadata: [1, 2] }), 400, 'VALIDATION_FAILED', /metadata/);
    expectError(await upload({ metadata: { big: 'x'.repeat(11_000) } }), 400, 'VALIDATION_FAILED', /metadata/);
    // Text PostgreSQL cannot store is refused on both engines alike.
    expectError(await upload({ metadata: { a: ['ok', 'nul\u0000'] } }), 400, 'VALIDATION_FAILED', /metadata\.a\.1/);
    expectError(await upload({ field: 'document' }), 400, 'VALIDATION_FAILED', /file/);
    expectError(await upload({ fields: { colour: 'red' } }), 400, 'VALIDATION_FAILED', /colour/);
    const post = (body: unknown, path = '/v1/knowledge-base/docs/upload', headers?: Record<string, string>) =>
      t.app.http('POST', path, { key: p.apiKey, body, headers });
    expectError(await post('hello', undefined, { 'content-type': 'text/plain' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    expectError(await post({ data: { type: 'file', url: 'http://x.test' } }), 400, 'VALIDATION_FAILED', /data\.type/);
    expectError(await post({ data: { type: 'url', url: 'ftp://x.test/a' } }), 400, 'VALIDATION_FAILED', /data\.url/);
    expectError(
      await post({ data: { type: 'url', url: 'http://x.test' }, extra: 1 }),
      400,
      'VALIDATION_FAILED',
      /extra/,
    );
    expectError(await post({ data: { type: 'url', url: 'http://x.test', metadata: 'x' } }), 400, 'VALIDATION_FAILED');
    const table = (data: Record<string, unknown>) => post({ data }, '/v1/knowledge-base/docs/upload/table');
    expectError(
      await table({ name: 't', schema: { searchableFields: ['a'] }, items: [] }),
      400,
      'VALIDATION_FAILED',
      /items/,
    );
    expectError(
      await table({ name: 't', schema: { searchableFields: ['a', 'a'] }, items: [{ a: 1 }] }),
      400,
      'VALIDATION_FAILED',
      /twice/,
    );
    expectError(
      await table({ name: '', schema: { searchableFields: ['a'] }, items: [{ a: 1 }] }),
      400,
      'VALIDATION_FAILED',
    );
    expectError(
      await table({ name: 't', schema: { searchableFields: [] }, items: [{ a: 1 }] }),
      400,
      'VALIDATION_FAILED',
    );
    expectError(
      await table({ name: 't', schema: { searchableFields: ['a'] }, items: [{ a: 'x' }, { a: '\ud800' }] }),
      400,
      'VALIDATION_FAILED',
      /data\.items\.1\.a/,
    );

    const query = (body: Record<string, unknown>) => kbQuery(t.app, p.apiKey, body);
    expectError(await query({ question: '' }), 400, 'VALIDATION_FAILED', /question/);
    expectError(await query({ question: 'x', chunkLimit: 0 }), 400, 'VALIDATION_FAILED', /chunkLimit/);
    expectError(await query({ question: 'x', chunkLimit: 11 }), 400, 'VALIDATION_FAILED', /chunkLimit/);
    expectError(await query({ question: 'x', synthesis: 'yes' }), 400, 'VALIDATION_FAILED', /synthesis/);
    expectError(await query({ question: 'x', settings: { temperature: 3 } }), 400, 'VALIDATION_FAILED', /temperature/);
    expectError(await query({ question: 'x', colour: 'red' }), 400, 'VALIDATION_FAILED', /colour/);
    expectError(await query({ question: 'x', filters: { tags: { $regex: 'a' } } }), 422, 'INVALID_FILTER', /\$regex/);
    expectError(await query({ question: 'x', filters: { tags: { $in: 'a' } } }), 422, 'INVALID_FILTER', /\$in/);
    expectError(await query({ question: 'x', filters: { $or: [] } }), 422, 'INVALID_FILTER', /\$or/);
    expectError(await query({ question: 'x', filters: ['a'] }), 422, 'INVALID_FILTER');
    expectError(await query({ question: 'x', filters: { 'bad path!': 1 } }), 422, 'INVALID_FILTER', /bad path/);
    expectError(await query({ question: 'x', environment: 'staging' }), 404, 'NOT_FOUND', /staging/);

    expect(await documentCount()).toBe(before);
  });

  it('keeps projects apart and checks scopes', async () => {
    const mine = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'mine.txt',
      content: 'Secret toucan plans.',
      query: { wait: 'true' },
    });
    const id = mine.body.data[0].documentID;
    const other = await t.app.createProject();
    for (const [method, path, body] of [
      ['GET', `/v1/knowledge-base/docs/${id}`, undefined],
      ['PATCH', `/v1/knowledge-base/docs/${id}`, { data: { metadata: {} } }],
      ['DELETE', `/v1/knowledge-base/docs/${id}`, undefined],
      ['PUT', `/v1/knowledge-base/docs/${id}/upload`, { data: { type: 'url', url: 'http://x.test/' } }],
      ['GET', '/v1/knowledge-base/docs/0123456789abcdef01234567', undefined],
    ] as const) {
      const res = await t.app.http(method, path, { key: other.apiKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.errorCode).toBe('NOT_FOUND');
    }
    expect((await kbQuery(t.app, other.apiKey, { question: 'toucan', synthesis: false })).body.chunks).toEqual([]);
    expect((await t.app.http('GET', '/v1/knowledge-base/docs/not-an-id', { key: p.apiKey })).status).toBe(400);

    const reader = await t.app.createProject({ scopes: ['kb:read'] });
    const refused = await uploadFile(t.app, { key: reader.apiKey, filename: 'a.txt', content: 'a' });
    expect(refused.status).toBe(401);
    expect(refused.body.errorCode).toBe('INSUFFICIENT_SCOPE');
    expect((await kbQuery(t.app, reader.apiKey, { question: 'a' })).status).toBe(200);
    expect((await kbQuery(t.app, 'ak.0123456789abcdef01234567.nope', { question: 'a' })).status).toBe(401);

    // The operator (or a workspace key) names the project.
    const unnamed = await kbQuery(t.app, t.app.operatorToken, { question: 'toucan' });
    expect(unnamed.status).toBe(400);
    expect(unnamed.body.message).toMatch(/projectID/);
    const named = await kbQuery(
      t.app,
      t.app.operatorToken,
      { question: 'toucan', synthesis: false },
      { projectID: p.projectID },
    );
    expect(named.body.chunks[0].documentID).toBe(id);
  });

  it('drives the full-text query from the index', async () => {
    const db = t.app.services.db;
    const sql = fullTextSql(db.provider, {
      projectId: p.projectID,
      terms: ['zebra', 'kangaroo'],
      filter: Prisma.sql`json_extract(c."metadata", '$.source') = 'text'`,
      limit: 2,
    });
    if (provider === 'sqlite') {
      const plan = await db.prisma.$queryRaw<{ detail: string }[]>(Prisma.sql`EXPLAIN QUERY PLAN ${sql}`);
      const details = plan.map((r) => r.detail);
      // FTS5 first (a virtual-table index scan), then each match's chunk by its primary key.
      expect(details[0]).toMatch(/SCAN kb_chunk_fts VIRTUAL TABLE INDEX/);
      expect(details.some((d) => /SEARCH c USING INTEGER PRIMARY KEY/.test(d))).toBe(true);
      expect(details.some((d) => /SCAN c\b/.test(d))).toBe(false);
    } else {
      // PostgreSQL's planner picks between the project's index and the GIN index by statistics
      // (a small project starts from its chunks); what must hold is that the match can use GIN.
      const plan = await db.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe('SET LOCAL enable_seqscan = off');
        return tx.$queryRaw<{ 'QUERY PLAN': string }[]>`
          EXPLAIN SELECT "seq" FROM "kb_chunk_search" WHERE "tsv" @@ to_tsquery('english', ${'zebra | kangaroo'})`;
      });
      expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/Bitmap Index Scan on kb_chunk_search_tsv_idx/);
    }
  });
});

describeEachDatabase('knowledge base over GraphQL', (provider) => {
  const t = useTestApp(provider);

  it('uploads with a GraphQL multipart request and streams an answer token by token', async () => {
    const p = await t.app.createProject();
    const form = new FormData();
    form.append(
      'operations',
      JSON.stringify({
        query: `mutation($file: File!) { uploadKnowledgeBaseFile(file: $file, metadata: {lang: "en"}, wait: true) {
          documentID status { type } data { type name } chunks { content metadata } } }`,
        variables: { file: null },
      }),
    );
    form.append('map', JSON.stringify({ 0: ['variables.file'] }));
    form.append('0', new Blob(['Penguins huddle together to stay warm. They eat fish.']), 'penguins.txt');
    const res = await fetch(`${t.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: p.apiKey },
      body: form,
    });
    const body = await res.json();
    expect(body.errors).toBeUndefined();
    expect(body.data.uploadKnowledgeBaseFile).toMatchObject({
      status: { type: 'SUCCESS' },
      data: { type: 'text', name: 'penguins.txt' },
      chunks: [{ metadata: { lang: 'en' } }],
    });

    const sub = recordSubscription<{ data?: { knowledgeBaseAnswer: Record<string, unknown> }; errors?: unknown }>(
      t.app,
      {
        key: p.apiKey,
        query: `subscription($input: KnowledgeBaseQueryInput!) {
        knowledgeBaseAnswer(input: $input) { type text chunks { documentID } result { output totalTokens } }
      }`,
        variables: { input: { question: 'Why do penguins huddle?', filters: { lang: 'en' } } },
      },
    );
    try {
      const events = await sub.waitFor((e) => e.some((x) => x.data?.knowledgeBaseAnswer.type === 'END'), 15_000);
      const answers = events.map((e) => e.data?.knowledgeBaseAnswer);
      expect(answers[0]).toMatchObject({
        type: 'CHUNKS',
        chunks: [{ documentID: body.data.uploadKnowledgeBaseFile.documentID }],
      });
      const deltas = answers.filter((a) => a?.type === 'DELTA').map((a) => a?.text as string);
      expect(deltas.length).toBeGreaterThan(1);
      const end = answers.at(-1)?.result as { output: string; totalTokens: number };
      expect(deltas.join('')).toBe(end.output);
      expect(end.output).toContain('Penguins huddle together to stay warm.');
    } finally {
      sub.close();
    }

    // Defaults apply over GraphQL as over REST: 2 chunks, synthesis on.
    for (const name of ['more-1.txt', 'more-2.txt']) {
      await uploadFile(t.app, {
        key: p.apiKey,
        filename: name,
        content: 'Penguins swim fast.',
        query: { wait: 'true' },
      });
    }
    const defaults = await t.app.gql(
      'query($input: KnowledgeBaseQueryInput!) { knowledgeBaseQuery(input: $input) { output chunks { chunkID } } }',
      { input: { question: 'penguins' } },
      p.apiKey,
    );
    expect(defaults.body.data.knowledgeBaseQuery.chunks).toHaveLength(2);
    expect(defaults.body.data.knowledgeBaseQuery.output).toBeTruthy();

    const bad = await t.app.gql(
      'subscription($input: KnowledgeBaseQueryInput!) { knowledgeBaseAnswer(input: $input) { type } }',
      { input: { question: 'x', filters: { a: { $nope: 1 } } } },
      p.apiKey,
    );
    expect(bad.body.errors?.[0]?.extensions).toMatchObject({ code: 'INVALID_FILTER' });
  });
});

describe('knowledge base search terms', () => {
  it('never passes query syntax through', async () => {
    const { questionTerms, fts5OrQuery, tsqueryOr } = await import('../../src/kb/terms');
    const terms = questionTerms('What is "NEAR" OR NOT the * price^2 of (tea) & coffee | milk: é? the the');
    expect(terms).toEqual(['near', 'price', '2', 'tea', 'coffee', 'milk', 'é']);
    expect(fts5OrQuery(terms)).toBe('"near" OR "price" OR "2" OR "tea" OR "coffee" OR "milk" OR "é"');
    expect(tsqueryOr(['a1', 'b'])).toBe('a1 | b');
    expect(questionTerms('?!? ...')).toEqual([]);
    expect(questionTerms(Array.from({ length: 40 }, (_, i) => `word${i}`).join(' '))).toHaveLength(16);
  });
});

describeEachDatabase('knowledge base URL uploads with the address guard on', (provider) => {
  const t = useTestApp(provider, { env: { KB_ALLOW_PRIVATE_URLS: 'false' } });

  it('refuses loopback and private addresses with a reason that names the setting', async () => {
    const p = await t.app.createProject();
    const site = await startSite({
      '/inside': { type: 'text/html', body: article('Internal', 'Secret admin panel.') },
    });
    try {
      for (const url of [`${site.url}/inside`, 'http://localhost:9/x', 'http://169.254.169.254/latest/meta-data']) {
        const res = await t.app.http('POST', '/v1/knowledge-base/docs/upload', {
          key: p.apiKey,
          query: { wait: 'true' },
          body: { data: { type: 'url', url } },
        });
        expect(res.status).toBe(200);
        expect(res.body.data[0].status, url).toBe('ERROR');
        expect(res.body.data[0].statusDetail).toMatch(/KB_ALLOW_PRIVATE_URLS/);
      }
      // The original's /upload/url and its replacement go through the same guard.
      const viaUrlRoute = await t.app.http('POST', '/v1/knowledge-base/docs/upload/url', {
        key: p.apiKey,
        query: { wait: 'true' },
        body: { data: { url: `${site.url}/inside` } },
      });
      expect(viaUrlRoute.body.data[0]).toMatchObject({
        status: 'ERROR',
        statusDetail: expect.stringMatching(/KB_ALLOW_PRIVATE_URLS/),
      });
      const replaced = await t.app.http(
        'PUT',
        `/v1/knowledge-base/docs/${viaUrlRoute.body.data[0].documentID}/upload/url`,
        {
          key: p.apiKey,
          query: { wait: 'true' },
          body: { data: { url: 'http://169.254.169.254/latest/meta-data' } },
        },
      );
      expect(replaced.body.data[0]).toMatchObject({
        status: 'ERROR',
        statusDetail: expect.stringMatching(/KB_ALLOW_PRIVATE_URLS/),
      });
      expect(
        (await kbQuery(t.app, p.apiKey, { question: 'secret admin panel', synthesis: false })).body.chunks,
      ).toEqual([]);
    } finally {
      await site.close();
    }
  });
});
