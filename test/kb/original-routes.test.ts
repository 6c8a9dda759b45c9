import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { conforms } from '../contract/harness';
import { type HttpResponse, type TestProject, useTestApp } from '../helpers/app';
import { kbQuery, uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';

/**
 * The original's remaining knowledge-base routes (issue 14 item 9, docs/knowledge-base.md): the
 * v3alpha tags, tags in queries and uploads, URL documents at /upload/url, chunk metadata, and the
 * original's shapes of the document-with-chunks GET and DELETE. Every success is checked against
 * the response schemas of every original document that describes the route, through the contract
 * harness (test/contract/harness.ts, fixtures in test/fixtures/contract/), and the members those schemas list are
 * required here (the documents mark none required, which would let an empty object pass).
 */

/** Checks a 200 against every contract document that describes `operation` (test/contract/harness.ts). */
const documented = (operation: string, res: HttpResponse) => conforms(operation, res, 200);

const documentMembers = {
  documentID: expect.any(String),
  data: expect.objectContaining({ type: expect.any(String), name: expect.any(String), metadata: expect.any(Object) }),
  status: expect.stringMatching(/^(PENDING|SUCCESS|ERROR)$/),
  updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
  tags: expect.any(Array),
};

async function startSite(pages: Record<string, string>) {
  const server: Server = createServer((req, res) => {
    const body = pages[req.url ?? ''];
    if (body === undefined) res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const page = (title: string, text: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body><article><h1>${title}</h1><p>${text}</p></article></body></html>`;

describeEachDatabase("the original's remaining knowledge-base routes", (provider) => {
  const t = useTestApp(provider, { env: { KB_ALLOW_PRIVATE_URLS: 'true' } });
  let p: TestProject;
  let site: Awaited<ReturnType<typeof startSite>>;

  beforeAll(async () => {
    p = await t.app.createProject();
    site = await startSite({
      '/walrus': page('Walrus facts', 'The walrus sleeps on floating ice near the shore.'),
      '/puffin': page('Puffin facts', 'The puffin dives for small fish near the cliffs.'),
    });
  });
  afterAll(async () => {
    await site?.close();
  });

  const http = (
    method: string,
    path: string,
    opts: { body?: unknown; query?: Record<string, string | string[]> } = {},
  ) => t.app.http(method, path, { key: p.apiKey, ...opts });
  const expectError = (res: HttpResponse, status: number, code: string, message?: RegExp) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body).toMatchObject({ statusCode: status, errorCode: code });
    if (message) expect(res.body.message).toMatch(message);
  };
  const tagsOf = async (documentID: string) => {
    const res = await http('GET', `/v1/knowledge-base/docs/${documentID}`);
    documented('GET /v1/knowledge-base/docs/{documentID}', res);
    return res.body.data[0].tags as string[];
  };

  it('creates, lists, reads, relabels and deletes tags in the documented shapes', async () => {
    const created = await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: { label: 'billing' } } });
    documented('POST /v3alpha/knowledge-base/tags', created);
    expect(created.body).toEqual({
      data: [{ data: { label: 'billing', tagID: expect.stringMatching(/^[0-9a-f]{24}$/) } }],
    });
    const tagID = created.body.data[0].data.tagID as string;

    expectError(
      await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: { label: 'billing' } } }),
      409,
      'CONFLICT',
      /billing/,
    );
    expectError(
      await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: { label: '  ' } } }),
      400,
      'VALIDATION_FAILED',
      /label/,
    );
    expectError(
      await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: {} } }),
      400,
      'VALIDATION_FAILED',
      /label/,
    );
    expectError(
      await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: { label: 'x'.repeat(101) } } }),
      400,
      'VALIDATION_FAILED',
      /100/,
    );
    const second = await http('POST', '/v3alpha/knowledge-base/tags', { body: { data: { label: 'alpha' } } });
    documented('POST /v3alpha/knowledge-base/tags', second);

    const list = await http('GET', '/v3alpha/knowledge-base/tags');
    documented('GET /v3alpha/knowledge-base/tags', list);
    expect(list.body.data.map((d: { data: { label: string } }) => d.data.label)).toEqual(['alpha', 'billing']);

    const one = await http('GET', `/v3alpha/knowledge-base/tags/${tagID}`);
    documented('GET /v3alpha/knowledge-base/tags/{tagID}', one);
    expect(one.body).toEqual({ data: [{ data: { label: 'billing', tagID } }] });

    const relabelled = await http('PATCH', `/v3alpha/knowledge-base/tags/${tagID}`, {
      body: { data: { label: 'invoices' } },
    });
    documented('PATCH /v3alpha/knowledge-base/tags/{tagID}', relabelled);
    expect(relabelled.body).toEqual({ data: [{ data: { label: 'invoices', tagID } }] });
    expectError(
      await http('PATCH', `/v3alpha/knowledge-base/tags/${tagID}`, { body: { data: { label: 'alpha' } } }),
      409,
      'CONFLICT',
    );
    expect((await http('GET', `/v3alpha/knowledge-base/tags/${tagID}`)).body.data[0].data.label).toBe('invoices');

    const deleted = await http('DELETE', `/v3alpha/knowledge-base/tags/${tagID}`);
    documented('DELETE /v3alpha/knowledge-base/tags/{tagID}', deleted);
    expectError(await http('GET', `/v3alpha/knowledge-base/tags/${tagID}`), 404, 'NOT_FOUND', /Tag/);
    expectError(await http('DELETE', `/v3alpha/knowledge-base/tags/${tagID}`), 404, 'NOT_FOUND');
    expectError(await http('GET', '/v3alpha/knowledge-base/tags/not-an-id'), 400, 'VALIDATION_FAILED', /tagID/);
    // Without a key: 401 before the body is looked at.
    const anonymous = await t.app.http('POST', '/v3alpha/knowledge-base/tags', { body: { data: {} } });
    expect(anonymous.status).toBe(401);
  });

  it('attaches tags at upload and through attach/detach, and queries choose documents by them', async () => {
    const upload = (name: string, text: string, query: Record<string, string> = {}, search = '') =>
      uploadFile(t.app, {
        key: p.apiKey,
        filename: name,
        content: text,
        path: `/v1/knowledge-base/docs/upload${search}`,
        query: { wait: 'true', ...query },
      });
    // `tags=a&tags=b` and `tags=["a","b"]` both work; unknown labels are created at upload.
    const lion = await upload('lion.txt', 'The zebra grazes while the lion sleeps.', {}, '?tags=savanna&tags=cats');
    expect(lion.status, lion.text).toBe(200);
    expect(lion.body.data[0].tags).toEqual(['cats', 'savanna']);
    const zebra = await upload('zebra.txt', 'The zebra runs across the plain.', { tags: '["savanna"]' });
    expect(zebra.body.data[0].tags).toEqual(['savanna']);
    const tiger = await upload('tiger.txt', 'The tiger and the zebra never meet.', { tags: 'cats' });
    const plain = await upload('plain.txt', 'A zebra crossing is painted on the road.');
    expect(plain.body.data[0].tags).toEqual([]);
    const ids = {
      lion: lion.body.data[0].documentID as string,
      zebra: zebra.body.data[0].documentID as string,
      tiger: tiger.body.data[0].documentID as string,
      plain: plain.body.data[0].documentID as string,
    };
    const labels = (await http('GET', '/v3alpha/knowledge-base/tags')).body.data.map(
      (d: { data: { label: string } }) => d.data.label,
    );
    expect(labels).toEqual(expect.arrayContaining(['cats', 'savanna']));
    expectError(await upload('bad.txt', 'x', { tags: 'x'.repeat(101) }), 400, 'VALIDATION_FAILED', /tags/);

    const docsFor = async (tags: unknown) => {
      const res = await kbQuery(t.app, p.apiKey, { question: 'zebra', synthesis: false, chunkLimit: 10, tags });
      documented('POST /knowledge-base/query', res);
      const byId = Object.fromEntries(Object.entries(ids).map(([name, id]) => [id, name]));
      return (res.body.chunks as { documentID: string }[]).map((c) => byId[c.documentID]).sort();
    };
    expect(await docsFor(undefined)).toEqual(['lion', 'plain', 'tiger', 'zebra']);
    expect(await docsFor({ include: { items: ['cats'] } })).toEqual(['lion', 'tiger']);
    expect(await docsFor({ include: { items: ['cats', 'savanna'], operator: 'or' } })).toEqual([
      'lion',
      'tiger',
      'zebra',
    ]);
    expect(await docsFor({ include: { items: ['cats', 'savanna'], operator: 'and' } })).toEqual(['lion']);
    expect(await docsFor({ exclude: { items: ['cats', 'savanna'] } })).toEqual(['plain', 'tiger', 'zebra']);
    expect(await docsFor({ exclude: { items: ['cats', 'savanna'], operator: 'or' } })).toEqual(['plain']);
    expect(await docsFor({ includeAllTagged: true })).toEqual(['lion', 'tiger', 'zebra']);
    expect(await docsFor({ includeAllNonTagged: true })).toEqual(['plain']);
    expect(await docsFor({ include: { items: ['savanna'] }, includeAllNonTagged: true })).toEqual([
      'lion',
      'plain',
      'zebra',
    ]);
    expect(await docsFor({ include: { items: ['no-such-tag'] } })).toEqual([]);
    // Tags and metadata filters together.
    const both = await kbQuery(t.app, p.apiKey, {
      question: 'zebra',
      synthesis: false,
      tags: { includeAllTagged: true },
      filters: { nothing: { $eq: 'here' } },
    });
    expect(both.body.chunks).toEqual([]);
    const sourced = await kbQuery(t.app, p.apiKey, {
      question: 'lion sleeps',
      synthesis: false,
      chunkLimit: 1,
      tags: { include: { items: ['cats'] } },
    });
    expect(sourced.body.chunks[0].source).toEqual({ type: 'text', name: 'lion.txt', tags: ['cats', 'savanna'] });
    for (const bad of [
      { include: { items: ['a'], operator: 'xor' } },
      { include: { items: 'cats' } },
      { includeAllTagged: 'yes' },
      { unknown: true },
    ]) {
      expectError(await kbQuery(t.app, p.apiKey, { question: 'zebra', tags: bad }), 400, 'VALIDATION_FAILED', /tags/);
    }

    // Attach: existing tags only; an unknown label changes nothing.
    const attachPath = `/v3alpha/knowledge-base/docs/${ids.plain}/tags/attach`;
    expectError(
      await http('POST', attachPath, { body: { data: { tags: ['cats', 'unheard'] } } }),
      404,
      'NOT_FOUND',
      /unheard/,
    );
    expect(await tagsOf(ids.plain)).toEqual([]);
    expectError(await http('POST', attachPath, { body: { data: { tags: [] } } }), 400, 'VALIDATION_FAILED', /tags/);
    expectError(await http('POST', attachPath, { body: { data: {} } }), 400, 'VALIDATION_FAILED', /tags/);
    documented(
      'POST /v3alpha/knowledge-base/docs/{documentID}/tags/attach',
      await http('POST', attachPath, { body: { data: { tags: ['cats', 'cats'] } } }),
    );
    // Attaching again is no change.
    documented(
      'POST /v3alpha/knowledge-base/docs/{documentID}/tags/attach',
      await http('POST', attachPath, { body: { data: { tags: ['cats'] } } }),
    );
    expect(await tagsOf(ids.plain)).toEqual(['cats']);
    expect(await docsFor({ include: { items: ['cats'] } })).toEqual(['lion', 'plain', 'tiger']);

    const detachPath = `/v3alpha/knowledge-base/docs/${ids.lion}/tags/detach`;
    expectError(await http('POST', detachPath, { body: { data: { tags: ['unheard'] } } }), 404, 'NOT_FOUND');
    documented(
      'POST /v3alpha/knowledge-base/docs/{documentID}/tags/detach',
      await http('POST', detachPath, { body: { data: { tags: ['cats'] } } }),
    );
    expect(await tagsOf(ids.lion)).toEqual(['savanna']);
    expectError(
      await http('POST', '/v3alpha/knowledge-base/docs/0123456789abcdef01234567/tags/attach', {
        body: { data: { tags: ['cats'] } },
      }),
      404,
      'NOT_FOUND',
      /Document/,
    );

    // Deleting a tag detaches it everywhere.
    const cats = (await http('GET', '/v3alpha/knowledge-base/tags')).body.data.find(
      (d: { data: { label: string } }) => d.data.label === 'cats',
    ).data.tagID;
    await http('DELETE', `/v3alpha/knowledge-base/tags/${cats}`);
    expect(await tagsOf(ids.tiger)).toEqual([]);
    expect(await docsFor({ include: { items: ['cats'] } })).toEqual([]);
  });

  it('uploads and replaces URL documents at /upload/url in the documented shape', async () => {
    const created = await http('POST', '/v1/knowledge-base/docs/upload/url', {
      query: { wait: 'true', tags: 'animals' },
      body: { data: { type: 'url', url: `${site.url}/walrus`, metadata: { kind: 'fact' } } },
    });
    documented('POST /v1/knowledge-base/docs/upload/url', created);
    expect(created.body.data).toEqual([
      expect.objectContaining({
        ...documentMembers,
        data: { type: 'url', name: `${site.url}/walrus`, url: `${site.url}/walrus`, metadata: { kind: 'fact' } },
        status: 'SUCCESS',
        tags: ['animals'],
      }),
    ]);
    const documentID = created.body.data[0].documentID as string;
    expect(
      (await kbQuery(t.app, p.apiKey, { question: 'walrus ice', synthesis: false })).body.chunks[0].documentID,
    ).toBe(documentID);

    // `type` defaults to url, as documented.
    const untyped = await http('POST', '/v1/knowledge-base/docs/upload/url', {
      body: { data: { url: `${site.url}/puffin`, name: 'Puffins' } },
    });
    documented('POST /v1/knowledge-base/docs/upload/url', untyped);
    expect(untyped.body.data[0]).toMatchObject({ data: { type: 'url', name: 'Puffins' }, status: 'PENDING' });

    const replaced = await http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, {
      query: { wait: 'true' },
      body: { data: { type: 'url', url: `${site.url}/puffin`, name: 'Puffin page' } },
    });
    documented('PUT /v1/knowledge-base/docs/{documentID}/upload/url', replaced);
    expect(replaced.body.data[0]).toMatchObject({
      ...documentMembers,
      documentID,
      data: { type: 'url', name: 'Puffin page', url: `${site.url}/puffin`, metadata: { kind: 'fact' } },
      status: 'SUCCESS',
      tags: ['animals'],
      revision: 2,
    });
    const walrus = await kbQuery(t.app, p.apiKey, { question: 'walrus', synthesis: false });
    expect(walrus.body.chunks.filter((c: { documentID: string }) => c.documentID === documentID)).toEqual([]);

    // Bad input: nothing changes.
    for (const body of [
      { data: { type: 'pdf', url: `${site.url}/walrus` } },
      { data: { type: 'url', url: 'ftp://example.com/x' } },
      { data: { type: 'url' } },
      { data: { type: 'url', url: `${site.url}/walrus`, metadata: 'no' } },
    ]) {
      expectError(
        await http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, { body }),
        400,
        'VALIDATION_FAILED',
      );
      expectError(await http('POST', '/v1/knowledge-base/docs/upload/url', { body }), 400, 'VALIDATION_FAILED');
    }
    expectError(
      await http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, {
        query: { tags: 'x' },
        body: { data: { url: `${site.url}/walrus` } },
      }),
      400,
      'VALIDATION_FAILED',
      /tags/,
    );
    expectError(
      await http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, {
        query: { llmGeneratedQ: 'true' },
        body: { data: { url: `${site.url}/walrus` } },
      }),
      400,
      'VALIDATION_FAILED',
      /llmGeneratedQ/,
    );
    expect((await http('GET', `/v1/knowledge-base/docs/${documentID}`)).body.data[0].revision).toBe(2);
    expectError(
      await http('PUT', '/v1/knowledge-base/docs/0123456789abcdef01234567/upload/url', {
        body: { data: { url: `${site.url}/walrus` } },
      }),
      404,
      'NOT_FOUND',
    );
    // Only URL documents: a file is replaced at /upload.
    const file = await uploadFile(t.app, { key: p.apiKey, filename: 'note.txt', content: 'A note.' });
    expectError(
      await http('PUT', `/v1/knowledge-base/docs/${file.body.data[0].documentID}/upload/url`, {
        body: { data: { url: `${site.url}/walrus` } },
      }),
      400,
      'VALIDATION_FAILED',
      /not a URL/,
    );
  });

  it('updates one chunk’s metadata, and filters see it at once', async () => {
    const table = await http('POST', '/v1/knowledge-base/docs/upload/table', {
      query: { wait: 'true' },
      body: {
        data: {
          name: 'birds',
          schema: { searchableFields: ['text'], metadataFields: ['kind'] },
          items: [
            { text: 'The heron wades in the marsh.', kind: 'wader' },
            { text: 'The heron nests in tall trees.', kind: 'wader' },
          ],
          metadata: { area: 'north' },
        },
      },
    });
    expect(table.status, table.text).toBe(200);
    const documentID = table.body.data.documentID as string;
    const doc = await http('GET', `/v1/knowledge-base/docs/${documentID}`);
    documented('GET /v1/knowledge-base/docs/{documentID}', doc);
    expect(doc.body.data).toEqual([expect.objectContaining({ ...documentMembers, documentID, status: 'SUCCESS' })]);
    expect(doc.body.chunks).toEqual([
      expect.objectContaining({
        chunkID: expect.any(String),
        content: 'text: The heron wades in the marsh.',
        position: 0,
      }),
      expect.objectContaining({
        chunkID: expect.any(String),
        content: 'text: The heron nests in tall trees.',
        position: 1,
      }),
    ]);
    const [first, second] = doc.body.chunks as { chunkID: string }[];
    const path = `/v1/knowledge-base/docs/${documentID}/chunk/${first!.chunkID}`;

    const updated = await http('PATCH', path, { body: { data: { metadata: { verified: true, kind: 'heron' } } } });
    documented('PATCH /v1/knowledge-base/docs/{documentID}/chunk/{chunkID}', updated);
    expect(updated.body.data).toMatchObject({ ...documentMembers, documentID, data: { type: 'table', name: 'birds' } });
    const after = (await http('GET', `/v1/knowledge-base/docs/${documentID}`)).body.chunks;
    expect(after[0].metadata).toEqual({ area: 'north', kind: 'heron', verified: true });
    expect(after[1].metadata).toEqual({ area: 'north', kind: 'wader' });
    const verified = await kbQuery(t.app, p.apiKey, {
      question: 'heron',
      synthesis: false,
      filters: { verified: true },
    });
    expect(verified.body.chunks.map((c: { chunkID: string }) => c.chunkID)).toEqual([first!.chunkID]);

    // A later metadata update of the document keeps the chunk's own keys on top.
    await http('PATCH', `/v1/knowledge-base/docs/${documentID}`, { body: { data: { metadata: { area: 'south' } } } });
    const rebuilt = (await http('GET', `/v1/knowledge-base/docs/${documentID}`)).body.chunks;
    expect(rebuilt[0].metadata).toEqual({ area: 'south', kind: 'heron', verified: true });

    // Bad input: nothing changes.
    expectError(await http('PATCH', path, { body: { data: { metadata: [1] } } }), 400, 'VALIDATION_FAILED', /metadata/);
    expectError(await http('PATCH', path, { body: { data: {} } }), 400, 'VALIDATION_FAILED', /metadata/);
    expectError(
      await http('PATCH', `/v1/knowledge-base/docs/${documentID}/chunk/00000000-0000-4000-8000-000000000000`, {
        body: { data: { metadata: { a: 1 } } },
      }),
      404,
      'NOT_FOUND',
      /Chunk/,
    );
    // A chunk of another document of the same project is not this document's.
    const other = await uploadFile(t.app, {
      key: p.apiKey,
      filename: 'o.txt',
      content: 'Other.',
      query: { wait: 'true' },
    });
    expectError(
      await http('PATCH', `/v1/knowledge-base/docs/${other.body.data[0].documentID}/chunk/${second!.chunkID}`, {
        body: { data: { metadata: { a: 1 } } },
      }),
      404,
      'NOT_FOUND',
      /Chunk/,
    );
    expect((await http('GET', `/v1/knowledge-base/docs/${documentID}`)).body.chunks[1].metadata).toEqual({
      area: 'south',
      kind: 'wader',
    });

    // DELETE: 200 with no content, as documented.
    const deleted = await http('DELETE', `/v1/knowledge-base/docs/${documentID}`);
    documented('DELETE /v1/knowledge-base/docs/{documentID}', deleted);
    expectError(await http('GET', `/v1/knowledge-base/docs/${documentID}`), 404, 'NOT_FOUND');
  });
});
