import { expect, it } from 'vitest';
import { startTestApp, useTestApp } from '../helpers/app';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

describeEachDatabase('HTTP basics', (provider) => {
  const t = useTestApp(provider, { env: { BODY_LIMIT_BYTES: '2048' } });

  it('answers /healthz and /readyz', async () => {
    expect((await t.app.http('GET', '/healthz')).body).toEqual({ status: 'ok' });
    const ready = await t.app.http('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready', database: provider });
  });

  it('puts a request ID on every response, keeping a sane one sent by the caller', async () => {
    const generated = await t.app.http('GET', '/healthz');
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const kept = await t.app.http('GET', '/nope', { headers: { 'x-request-id': 'trace-123' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-123');
    const replaced = await t.app.http('GET', '/healthz', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(replaced.headers.get('x-request-id')).not.toBe('bad id with spaces');
  });

  it('answers an unknown route with a JSON 404', async () => {
    const res = await t.app.http('DELETE', '/v1/nothing/here');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      statusCode: 404,
      statusText: 'Not Found',
      errorCode: 'NOT_FOUND',
      message: 'No route for DELETE /v1/nothing/here',
    });
  });

  it('answers malformed JSON with 400 and a body over the limit with 413, storing nothing', async () => {
    const p = await t.app.createProject();
    const malformed = await t.app.http('POST', '/v1/environment', { key: p.apiKey, body: '{"projectID": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ statusCode: 400, errorCode: 'MALFORMED_JSON' });
    const big = await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: { projectID: p.projectID, alias: 'big', padding: 'x'.repeat(3000) },
    });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({
      statusCode: 413,
      statusText: 'Payload Too Large',
      errorCode: 'PAYLOAD_TOO_LARGE',
    });
    const gqlBig = await t.app.http('POST', '/graphql', {
      key: p.apiKey,
      body: { query: `{ viewer { kind } } #${'x'.repeat(3000)}` },
    });
    expect(gqlBig.status).toBe(413);
    const envs = await t.app.services.db.prisma.environment.count({ where: { projectId: p.projectID } });
    expect(envs).toBe(2);
  });

  it('counts the bytes of a chunked GraphQL body (no Content-Length) against the limit', async () => {
    const p = await t.app.createProject();
    const chunked = (text: string) => {
      const bytes = new TextEncoder().encode(text);
      // A stream body makes fetch send Transfer-Encoding: chunked, without Content-Length.
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += 512) controller.enqueue(bytes.slice(i, i + 512));
          controller.close();
        },
      });
      return fetch(`${t.app.url}/graphql`, {
        method: 'POST',
        headers: { authorization: p.apiKey, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit);
    };
    const big = await chunked(JSON.stringify({ query: `{ viewer { kind } } #${'x'.repeat(5000)}` }));
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ statusCode: 413, errorCode: 'PAYLOAD_TOO_LARGE' });
    const small = await chunked(JSON.stringify({ query: '{ viewer { kind } }' }));
    expect(small.status).toBe(200);
    expect(await small.json()).toEqual({ data: { viewer: { kind: 'key' } } });
  });

  it('answers a body that is not JSON with 415, and a missing body with 400', async () => {
    const p = await t.app.createProject();
    const text = await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: 'projectID=1',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.status).toBe(415);
    expect(text.body.errorCode).toBe('UNSUPPORTED_MEDIA_TYPE');
    const none = await t.app.http('POST', '/v1/environment', { key: t.app.operatorToken });
    expect(none.status).toBe(400);
    expect(none.body.message).toMatch(/JSON request body/);
    expect(p.projectID).toBeTruthy();
  });

  it('answers a JSON body of declared length exactly as body-parser answers it sent chunked', async () => {
    const p = await t.app.createProject();
    // Declared length: read by the edge's own reader (src/http/read-body.ts). Chunked (no
    // Content-Length): read by body-parser. Every answer must be the same, byte for byte.
    const send = async (bytes: Uint8Array, contentType: string, chunked: boolean) => {
      const body = chunked
        ? new ReadableStream<Uint8Array>({
            start(controller) {
              controller.enqueue(bytes);
              controller.close();
            },
          })
        : bytes;
      const res = await fetch(`${t.app.url}/v1/environment`, {
        method: 'POST',
        headers: { authorization: t.app.operatorToken, 'content-type': contentType, 'x-request-id': 'same-id' },
        body,
        duplex: 'half',
      } as RequestInit);
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    };
    const utf8 = (text: string) => new TextEncoder().encode(text);
    const invalid = JSON.stringify({ projectID: p.projectID, alias: 7, note: 'é' });
    const cases: [Uint8Array, string][] = [
      [utf8(invalid), 'application/json'],
      [utf8(`\uFEFF${invalid}`), 'application/json'],
      [utf8(` \n\t${invalid}`), 'application/json; charset=utf-8'],
      [utf8(invalid), 'application/json; charset="UTF-8"'],
      [utf8(invalid), 'application/json; charset=utf8'],
      [utf8(invalid), 'application/merge-patch+json'],
      [utf8('"a string"'), 'application/json'],
      [utf8('  42'), 'application/json'],
      [utf8('[1, 2]'), 'application/json'],
      [utf8('{"projectID": '), 'application/json'],
      [utf8('   '), 'application/json'],
      [utf8('\uFEFF'), 'application/json'],
      [Uint8Array.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'application/json'],
    ];
    for (const [bytes, contentType] of cases) {
      const declared = await send(bytes, contentType, false);
      const chunked = await send(bytes, contentType, true);
      expect({ contentType, ...declared }).toEqual({ contentType, ...chunked });
    }
    // The cases reach the body's checks: not all refused before them.
    const validation = await send(utf8(`\uFEFF${invalid}`), 'application/json', false);
    expect(validation.status).toBe(400);
    expect(JSON.parse(validation.body)).toMatchObject({ errorCode: 'VALIDATION_FAILED' });
    const created = await send(
      utf8(JSON.stringify({ projectID: p.projectID, alias: 'declared' })),
      'application/json',
      false,
    );
    expect(created.status).toBe(201);
  });

  it('names every problem of a body: unknown members, wrong types, missing members', async () => {
    const p = await t.app.createProject();
    const res = await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: { projectID: p.projectID, alias: 7, extra: true },
    });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual(
      expect.arrayContaining([
        { path: 'alias', message: 'must be a string (got an integer)' },
        { path: 'extra', message: 'is not an allowed member' },
      ]),
    );
    const missing = await t.app.http('POST', '/v1/environment', { key: t.app.operatorToken, body: { alias: 'x' } });
    expect(missing.body.details).toEqual([{ path: 'projectID', message: 'is required' }]);
    const path = await t.app.http('GET', '/v1/environment/project/not-an-id', { key: p.apiKey });
    expect(path.status).toBe(400);
    expect(path.body.details[0]).toEqual({
      path: 'projectID',
      message: 'must be a 24-character lowercase hex project ID',
    });
  });

  it('serves GraphiQL on /graphql to browsers', async () => {
    const res = await t.app.http('GET', '/graphql', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.text).toContain('Parley GraphQL');
  });

  it('masks unexpected errors and gives the caller the request ID to quote', async () => {
    // A broken database handle makes the resolver fail in a way no code expects.
    const original = t.app.services.db.prisma.environment.findMany;
    (t.app.services.db.prisma.environment as { findMany: unknown }).findMany = () =>
      Promise.reject(new Error('disk on fire: SELECT secret'));
    try {
      const p = await t.app.createProject();
      const res = await t.app.http('GET', `/v1/environment/project/${p.projectID}`, {
        key: p.apiKey,
        headers: { 'x-request-id': 'req-42' },
      });
      expect(res.status).toBe(500);
      expect(res.body).toMatchObject({ errorCode: 'INTERNAL_ERROR', requestId: 'req-42' });
      expect(res.text).not.toContain('disk on fire');
      expect(res.text).not.toContain('SELECT');
      const gql = await t.app.gql('query($p: ID!) { environments(projectID: $p) { id } }', { p: p.projectID });
      expect(gql.body.errors[0].extensions).toMatchObject({ code: 'INTERNAL_ERROR' });
      expect(gql.text).not.toContain('disk on fire');
    } finally {
      (t.app.services.db.prisma.environment as { findMany: unknown }).findMany = original;
    }
  });
});

describeEachDatabase('readiness before migrations', (provider) => {
  it('is 503 while migrations are pending', async () => {
    const database = await createTestDatabase(provider);
    const app = await startTestApp(provider, { database });
    try {
      await app.services.db.prisma.$executeRawUnsafe('DELETE FROM _prisma_migrations');
      const res = await app.http('GET', '/readyz');
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({
        errorCode: 'SERVICE_UNAVAILABLE',
        message: expect.stringContaining('migrations pending'),
      });
    } finally {
      await app.close();
      await database.drop();
    }
  });

  it('is 503 once shutdown has begun', async () => {
    const app = await startTestApp(provider);
    try {
      expect((await app.http('GET', '/readyz')).status).toBe(200);
      app.running.parley.setDraining();
      const res = await app.http('GET', '/readyz');
      expect(res.status).toBe(503);
      expect(res.body.message).toBe('Shutting down.');
    } finally {
      await app.close();
    }
  });
});
