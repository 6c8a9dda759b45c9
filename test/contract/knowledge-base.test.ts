import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { type TestProject, useTestApp } from '../helpers/app';
import { uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { conforms, documents, uncovered, uncoveredStatuses } from './harness';
import { notYetImplemented, unansweredStatuses } from './pending';

/**
 * The knowledge-base documents (knowledge-base-*.json): every documented route Parley serves, success
 * and error, through real HTTP. A route several documents describe is checked against each of them.
 */

const KB_DOCUMENTS = Object.keys(documents).filter((d) => d.startsWith('knowledge-base-'));
const unknownId = 'ffffffffffffffffffffffff';

const UPLOAD = 'POST /v1/knowledge-base/docs/upload';
const TABLE = 'POST /v1/knowledge-base/docs/upload/table';
const LIST = 'GET /v1/knowledge-base/docs';
const GET = 'GET /v1/knowledge-base/docs/{documentID}';
const REPLACE = 'PUT /v1/knowledge-base/docs/{documentID}/upload';
const PATCH = 'PATCH /v1/knowledge-base/docs/{documentID}';
const DELETE = 'DELETE /v1/knowledge-base/docs/{documentID}';
const QUERY = 'POST /knowledge-base/query';
const UPLOAD_URL = 'POST /v1/knowledge-base/docs/upload/url';
const REPLACE_URL = 'PUT /v1/knowledge-base/docs/{documentID}/upload/url';
const CHUNK = 'PATCH /v1/knowledge-base/docs/{documentID}/chunk/{chunkID}';
const TAG_CREATE = 'POST /v3alpha/knowledge-base/tags';
const TAG_LIST = 'GET /v3alpha/knowledge-base/tags';
const TAG_GET = 'GET /v3alpha/knowledge-base/tags/{tagID}';
const TAG_UPDATE = 'PATCH /v3alpha/knowledge-base/tags/{tagID}';
const TAG_DELETE = 'DELETE /v3alpha/knowledge-base/tags/{tagID}';
const TAG_ATTACH = 'POST /v3alpha/knowledge-base/docs/{documentID}/tags/attach';
const TAG_DETACH = 'POST /v3alpha/knowledge-base/docs/{documentID}/tags/detach';

/** A local web site for the URL documents (the app runs with KB_ALLOW_PRIVATE_URLS=true). */
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

describeEachDatabase('knowledge-base documents contract', (provider) => {
  const t = useTestApp(provider);

  it('uploads, lists, reads, replaces, updates, queries and deletes in the documented shapes; and the errors', {
    timeout: 180_000,
  }, async () => {
    const p: TestProject = await t.app.createProject();
    const other: TestProject = await t.app.createProject();
    const key = p.apiKey;

    const uploaded = conforms(
      UPLOAD,
      await uploadFile(t.app, {
        key,
        filename: 'refunds.txt',
        content: 'Refunds take five days. Shipping is free over fifty euros.',
        metadata: { topic: 'billing' },
        query: { wait: 'true' },
      }),
      200,
    );
    const documentID = uploaded.data[0].documentID as string;
    expect(uploaded.data[0]).toMatchObject({ status: 'SUCCESS', data: { metadata: { topic: 'billing' } } });
    conforms(UPLOAD, await uploadFile(t.app, { key, filename: 'virus.exe', content: 'MZ' }), 415);
    conforms(UPLOAD, await uploadFile(t.app, { key, filename: 'a.txt', content: 'x', metadata: '[1]' }), 400);
    conforms(UPLOAD, await uploadFile(t.app, { key: 'nope', filename: 'a.txt', content: 'x' }), 401);

    const table = conforms(
      TABLE,
      await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', {
        key,
        query: { wait: 'true' },
        body: {
          data: {
            name: 'faq',
            schema: { searchableFields: ['question', 'answer'], metadataFields: ['category'] },
            items: [{ question: 'Do you ship abroad?', answer: 'Yes, to the EU.', category: 'shipping' }],
          },
        },
      }),
      200,
    );
    expect(table.data.data.type).toBe('table');
    conforms(
      TABLE,
      await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', { key, body: { data: { name: 'x' } } }),
      400,
    );
    conforms(TABLE, await t.app.http('POST', '/v1/knowledge-base/docs/upload/table', { body: { data: {} } }), 401);

    const list = conforms(LIST, await t.app.http('GET', '/v1/knowledge-base/docs', { key }), 200);
    expect(list.total).toBe(2);
    conforms(
      LIST,
      await t.app.http('GET', '/v1/knowledge-base/docs', {
        key,
        query: { page: '1', limit: '1', documentType: 'text' },
      }),
      200,
    );
    conforms(LIST, await t.app.http('GET', '/v1/knowledge-base/docs', { key, query: { limit: '0' } }), 400);
    conforms(LIST, await t.app.http('GET', '/v1/knowledge-base/docs'), 401);

    const got = conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${documentID}`, { key }), 200);
    expect(got.data[0].documentID).toBe(documentID);
    expect(got.chunks.length).toBeGreaterThan(0);
    conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${documentID}`, { key: other.apiKey }), 404);
    conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${unknownId}`, { key }), 404);
    conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${documentID}`), 401);

    const replaced = conforms(
      REPLACE,
      await uploadFile(t.app, {
        key,
        method: 'PUT',
        path: `/v1/knowledge-base/docs/${documentID}/upload`,
        filename: 'refunds.md',
        content: '# Refunds\n\nRefunds take three days now.',
        query: { wait: 'true' },
      }),
      200,
    );
    expect(replaced.data[0]).toMatchObject({ documentID, status: 'SUCCESS', data: { type: 'markdown' } });
    conforms(
      REPLACE,
      await uploadFile(t.app, {
        key,
        method: 'PUT',
        path: `/v1/knowledge-base/docs/${unknownId}/upload`,
        filename: 'a.txt',
        content: 'x',
      }),
      404,
    );
    conforms(
      REPLACE,
      await uploadFile(t.app, {
        key,
        method: 'PUT',
        path: `/v1/knowledge-base/docs/${documentID}/upload`,
        filename: 'a.exe',
        content: 'x',
      }),
      415,
    );
    conforms(
      REPLACE,
      await uploadFile(t.app, {
        key: 'nope',
        method: 'PUT',
        path: `/v1/knowledge-base/docs/${documentID}/upload`,
        filename: 'a.txt',
        content: 'x',
      }),
      401,
    );

    const patched = conforms(
      PATCH,
      await t.app.http('PATCH', `/v1/knowledge-base/docs/${documentID}`, {
        key,
        body: { data: { metadata: { topic: 'refunds' } } },
      }),
      200,
    );
    expect(patched.data.metadata).toEqual({ topic: 'refunds' });
    conforms(
      PATCH,
      await t.app.http('PATCH', `/v1/knowledge-base/docs/${documentID}`, { key, body: { data: { metadata: [1] } } }),
      400,
    );
    conforms(
      PATCH,
      await t.app.http('PATCH', `/v1/knowledge-base/docs/${unknownId}`, { key, body: { data: { metadata: {} } } }),
      404,
    );
    conforms(
      PATCH,
      await t.app.http('PATCH', `/v1/knowledge-base/docs/${documentID}`, { body: { data: { metadata: {} } } }),
      401,
    );

    const answer = conforms(
      QUERY,
      await t.app.http('POST', '/knowledge-base/query', {
        key,
        body: { question: 'How long do refunds take?', synthesis: false },
      }),
      200,
    );
    expect(answer.chunks.length).toBeGreaterThan(0);
    conforms(
      QUERY,
      await t.app.http('POST', '/knowledge-base/query', { key, body: { question: 'refunds?', chunkLimit: 3 } }),
      200,
    );
    conforms(QUERY, await t.app.http('POST', '/knowledge-base/query', { key, body: { question: '' } }), 400);
    conforms(
      QUERY,
      await t.app.http('POST', '/knowledge-base/query', {
        key,
        body: { question: 'x', filters: { topic: { $near: 1 } } },
      }),
      422,
    );
    conforms(QUERY, await t.app.http('POST', '/knowledge-base/query', { body: { question: '' } }), 401);

    conforms(DELETE, await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`, { key: other.apiKey }), 404);
    conforms(DELETE, await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`), 401);
    conforms(DELETE, await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`, { key }), 200);
    conforms(DELETE, await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`, { key }), 404);
  });
});

describeEachDatabase('knowledge-base documents contract: URL documents, chunks and tags', (provider) => {
  const t = useTestApp(provider, { env: { KB_ALLOW_PRIVATE_URLS: 'true' } });

  it('uploads and replaces URL documents, updates a chunk, and manages tags in the documented shapes; and the errors', {
    timeout: 180_000,
  }, async () => {
    const p: TestProject = await t.app.createProject();
    const other: TestProject = await t.app.createProject();
    const key = p.apiKey;
    const site = await startSite({
      '/walrus': page('Walrus facts', 'The walrus sleeps on floating ice near the shore.'),
      '/puffin': page('Puffin facts', 'The puffin dives for small fish near the cliffs.'),
    });
    try {
      const created = conforms(
        UPLOAD_URL,
        await t.app.http('POST', '/v1/knowledge-base/docs/upload/url', {
          key,
          query: { wait: 'true' },
          body: { data: { type: 'url', url: `${site.url}/walrus`, metadata: { animal: 'walrus' } } },
        }),
        200,
      );
      const documentID = created.data[0].documentID as string;
      expect(created.data[0]).toMatchObject({ status: 'SUCCESS', data: { type: 'url', url: `${site.url}/walrus` } });
      conforms(
        UPLOAD_URL,
        await t.app.http('POST', '/v1/knowledge-base/docs/upload/url', { key, body: { data: { url: 'not a url' } } }),
        400,
      );
      conforms(
        UPLOAD_URL,
        await t.app.http('POST', '/v1/knowledge-base/docs/upload/url', { body: { data: { url: `${site.url}/x` } } }),
        401,
      );

      const moved = conforms(
        REPLACE_URL,
        await t.app.http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, {
          key,
          query: { wait: 'true' },
          body: { data: { type: 'url', url: `${site.url}/puffin` } },
        }),
        200,
      );
      expect(moved.data[0]).toMatchObject({ documentID, status: 'SUCCESS', data: { url: `${site.url}/puffin` } });
      conforms(
        REPLACE_URL,
        await t.app.http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, { key, body: { data: {} } }),
        400,
      );
      conforms(
        REPLACE_URL,
        await t.app.http('PUT', `/v1/knowledge-base/docs/${unknownId}/upload/url`, {
          key,
          body: { data: { url: `${site.url}/puffin` } },
        }),
        404,
      );
      conforms(
        REPLACE_URL,
        await t.app.http('PUT', `/v1/knowledge-base/docs/${documentID}/upload/url`, {
          body: { data: { url: `${site.url}/puffin` } },
        }),
        401,
      );

      const doc = conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${documentID}`, { key }), 200);
      const chunkID = doc.chunks[0].chunkID as string;
      const chunkPath = `/v1/knowledge-base/docs/${documentID}/chunk/${chunkID}`;
      const chunk = conforms(
        CHUNK,
        await t.app.http('PATCH', chunkPath, { key, body: { data: { metadata: { reviewed: true } } } }),
        200,
      );
      expect(chunk.data).toMatchObject({ documentID, status: 'SUCCESS' });
      conforms(CHUNK, await t.app.http('PATCH', chunkPath, { key, body: { data: { metadata: [1] } } }), 400);
      conforms(
        CHUNK,
        await t.app.http('PATCH', `/v1/knowledge-base/docs/${documentID}/chunk/no-such-chunk`, {
          key,
          body: { data: { metadata: { a: 1 } } },
        }),
        404,
      );
      conforms(
        CHUNK,
        await t.app.http('PATCH', chunkPath, { key: other.apiKey, body: { data: { metadata: { a: 1 } } } }),
        404,
      );
      conforms(CHUNK, await t.app.http('PATCH', chunkPath, { body: { data: { metadata: { a: 1 } } } }), 401);

      const tag = conforms(
        TAG_CREATE,
        await t.app.http('POST', '/v3alpha/knowledge-base/tags', { key, body: { data: { label: 'birds' } } }),
        200,
      );
      const tagID = tag.data[0].data.tagID as string;
      expect(tag.data[0].data.label).toBe('birds');
      conforms(
        TAG_CREATE,
        await t.app.http('POST', '/v3alpha/knowledge-base/tags', { key, body: { data: { label: 'birds' } } }),
        409,
      );
      conforms(TAG_CREATE, await t.app.http('POST', '/v3alpha/knowledge-base/tags', { key, body: { data: {} } }), 400);
      conforms(TAG_CREATE, await t.app.http('POST', '/v3alpha/knowledge-base/tags', { body: { data: {} } }), 401);

      const tags = conforms(TAG_LIST, await t.app.http('GET', '/v3alpha/knowledge-base/tags', { key }), 200);
      expect(tags.data.map((d: { data: { label: string } }) => d.data.label)).toEqual(['birds']);
      conforms(TAG_LIST, await t.app.http('GET', '/v3alpha/knowledge-base/tags'), 401);

      conforms(TAG_GET, await t.app.http('GET', `/v3alpha/knowledge-base/tags/${tagID}`, { key }), 200);
      conforms(TAG_GET, await t.app.http('GET', `/v3alpha/knowledge-base/tags/${tagID}`, { key: other.apiKey }), 404);
      conforms(TAG_GET, await t.app.http('GET', '/v3alpha/knowledge-base/tags/not-an-id', { key }), 400);
      conforms(TAG_GET, await t.app.http('GET', `/v3alpha/knowledge-base/tags/${tagID}`), 401);

      const relabelled = conforms(
        TAG_UPDATE,
        await t.app.http('PATCH', `/v3alpha/knowledge-base/tags/${tagID}`, {
          key,
          body: { data: { label: 'seabirds' } },
        }),
        200,
      );
      expect(relabelled.data[0].data).toEqual({ label: 'seabirds', tagID });
      conforms(
        TAG_UPDATE,
        await t.app.http('PATCH', `/v3alpha/knowledge-base/tags/${tagID}`, { key, body: { data: { label: ' ' } } }),
        400,
      );
      conforms(
        TAG_UPDATE,
        await t.app.http('PATCH', `/v3alpha/knowledge-base/tags/${unknownId}`, { key, body: { data: { label: 'x' } } }),
        404,
      );
      conforms(
        TAG_UPDATE,
        await t.app.http('PATCH', `/v3alpha/knowledge-base/tags/${tagID}`, { body: { data: { label: 'x' } } }),
        401,
      );

      const attachPath = `/v3alpha/knowledge-base/docs/${documentID}/tags/attach`;
      conforms(TAG_ATTACH, await t.app.http('POST', attachPath, { key, body: { data: { tags: ['seabirds'] } } }), 200);
      const tagged = conforms(GET, await t.app.http('GET', `/v1/knowledge-base/docs/${documentID}`, { key }), 200);
      expect(tagged.data[0].tags).toEqual(['seabirds']);
      conforms(TAG_ATTACH, await t.app.http('POST', attachPath, { key, body: { data: {} } }), 400);
      conforms(
        TAG_ATTACH,
        await t.app.http('POST', `/v3alpha/knowledge-base/docs/${unknownId}/tags/attach`, {
          key,
          body: { data: { tags: ['seabirds'] } },
        }),
        404,
      );
      conforms(TAG_ATTACH, await t.app.http('POST', attachPath, { body: { data: { tags: ['seabirds'] } } }), 401);

      const detachPath = `/v3alpha/knowledge-base/docs/${documentID}/tags/detach`;
      conforms(TAG_DETACH, await t.app.http('POST', detachPath, { key, body: { data: { tags: ['seabirds'] } } }), 200);
      const untagged = conforms(LIST, await t.app.http('GET', '/v1/knowledge-base/docs', { key }), 200);
      expect(untagged.data[0].tags).toEqual([]);
      conforms(TAG_DETACH, await t.app.http('POST', detachPath, { key, body: { data: { tags: 'x' } } }), 400);
      conforms(
        TAG_DETACH,
        await t.app.http('POST', detachPath, { key: other.apiKey, body: { data: { tags: ['seabirds'] } } }),
        404,
      );
      conforms(TAG_DETACH, await t.app.http('POST', detachPath, { body: { data: { tags: ['seabirds'] } } }), 401);

      conforms(TAG_DELETE, await t.app.http('DELETE', `/v3alpha/knowledge-base/tags/${tagID}`, { key }), 200);
      conforms(TAG_DELETE, await t.app.http('DELETE', `/v3alpha/knowledge-base/tags/${tagID}`, { key }), 404);
      conforms(TAG_DELETE, await t.app.http('DELETE', `/v3alpha/knowledge-base/tags/${tagID}`), 401);
    } finally {
      await site.close();
    }
  });
});

it.each(KB_DOCUMENTS)(
  'drives every documented route and status of %s (or lists it as not yet implemented)',
  (document) => {
    expect(uncovered(document, notYetImplemented)).toEqual([]);
    expect(uncoveredStatuses(document, notYetImplemented, unansweredStatuses)).toEqual([]);
  },
);
