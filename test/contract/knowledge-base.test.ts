import { expect, it } from 'vitest';
import { type TestProject, useTestApp } from '../helpers/app';
import { uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { conforms, documents, uncovered, uncoveredStatuses } from './harness';
import { beingAligned, notYetImplemented, unansweredStatuses } from './pending';

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
    const documentID = uploaded.data.documentID as string;
    expect(uploaded.data.status.type).toBe('SUCCESS');
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
    expect(got.data.documentID).toBe(documentID);
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
    expect(replaced.data.documentID).toBe(documentID);
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
    // beingAligned (pending.ts): today's 204, until h14-kb's documented 200 is merged.
    const deleted = await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`, { key });
    expect(deleted.status, deleted.text).toBe(204);
    conforms(DELETE, await t.app.http('DELETE', `/v1/knowledge-base/docs/${documentID}`, { key }), 404);
  });
});

it.each(KB_DOCUMENTS)(
  'drives every documented route and status of %s (or lists it as not yet implemented)',
  (document) => {
    expect(uncovered(document, { ...notYetImplemented, ...beingAligned })).toEqual([]);
    expect(uncoveredStatuses(document, { ...notYetImplemented, ...beingAligned }, unansweredStatuses)).toEqual([]);
  },
);
