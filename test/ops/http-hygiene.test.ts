import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { graphiqlCsp } from '../../src/ops/graphiql';
import { useTestApp } from '../helpers/app';
import { pausingProgram } from '../helpers/fixtures';
import { databaseLanes, describeEachDatabase } from '../helpers/lanes';
import { publish, v2StreamPath } from '../helpers/runtime';

/**
 * HTTP hygiene over real HTTP: CORS (off by default, preflights answered), security headers (and a
 * CSP of its own for GraphiQL), the request timeout (cuts slow requests, never streamed responses),
 * and the admin audit log of keys and agent publishing, from GraphQL and from the CLI.
 */

const provider = databaseLanes()[0] ?? 'sqlite';

describe(`CORS [${provider}]`, () => {
  const none = useTestApp(provider);
  const listed = useTestApp(provider, { env: { CORS_ORIGINS: 'https://app.example.com, http://localhost:5173' } });
  const any = useTestApp(provider, { env: { CORS_ORIGINS: '*' } });

  const preflight = (url: string, origin: string, path = '/v1/whoami') =>
    fetch(new URL(path, url), {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });

  it('sends no CORS headers without CORS_ORIGINS', async () => {
    const res = await none.app.http('GET', '/healthz', { headers: { origin: 'https://app.example.com' } });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const gql = await none.app.http('POST', '/graphql', {
      headers: { origin: 'https://evil.example' },
      body: { query: '{ viewer { kind } }' },
    });
    expect(gql.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers preflights with 204 for listed origins, on REST and GraphQL, and stays silent for others', async () => {
    for (const path of ['/v1/whoami', '/graphql', '/v2/query/usage']) {
      const res = await preflight(listed.app.url, 'https://app.example.com', path);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
      expect(res.headers.get('access-control-allow-methods')).toContain('POST');
      expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
      expect(res.headers.get('access-control-max-age')).toBe('600');
    }
    const other = await preflight(listed.app.url, 'https://evil.example');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const simple = await listed.app.http('GET', '/v1/whoami', { headers: { origin: 'http://localhost:5173' } });
    expect(simple.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    expect(simple.headers.get('access-control-expose-headers')).toContain('Retry-After');
    expect(simple.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('allows every origin with *', async () => {
    const res = await preflight(any.app.url, 'https://anything.example');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('refuses an origin list it cannot read at start', async () => {
    const { loadConfig } = await import('../../src/env');
    expect(() => loadConfig({ CORS_ORIGINS: 'app.example.com/path' })).toThrow(/CORS_ORIGINS/);
    expect(() => loadConfig({ TRUST_PROXY: 'sometimes' })).toThrow(/TRUST_PROXY/);
    expect(() => loadConfig({ RATE_LIMIT_USAGE: 'lots' })).toThrow(/RATE_LIMIT_USAGE/);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, loopback' }).TRUST_PROXY).toEqual(['10.0.0.0/8', 'loopback']);
    expect(loadConfig({ RATE_LIMIT_USAGE: '10/1' }).RATE_LIMIT_USAGE).toEqual({ points: 10, durationSeconds: 1 });
  });
});

describe(`security headers and timeouts [${provider}]`, () => {
  const t = useTestApp(provider, {
    env: {
      REQUEST_TIMEOUT_MS: '1000',
      HEADERS_TIMEOUT_MS: '1000',
      SSE_KEEPALIVE_MS: '200',
      RATE_LIMIT_ENABLED: 'false',
    },
  });

  it('sends helmet’s security headers and a strict CSP on API answers', async () => {
    const res = await t.app.http('GET', '/v1/whoami');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(res.headers.get('strict-transport-security')).toMatch(/max-age=\d+/);
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    // The rest of helmet's defaults (set from one recording of helmet, src/http/middleware.ts).
    expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    expect(res.headers.get('cross-origin-resource-policy')).toBe('same-origin');
    expect(res.headers.get('origin-agent-cluster')).toBe('?1');
    expect(res.headers.get('x-dns-prefetch-control')).toBe('off');
    expect(res.headers.get('x-download-options')).toBe('noopen');
    expect(res.headers.get('x-permitted-cross-domain-policies')).toBe('none');
    expect(res.headers.get('x-xss-protection')).toBe('0');
    expect(res.headers.get('content-security-policy')).toBe(
      "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    );
    expect(res.headers.get('x-powered-by')).toBeNull();
  });

  it('gives GraphiQL its own CSP: scripts and workers from this origin only (test/ops/graphiql.test.ts)', async () => {
    const res = await t.app.http('GET', '/graphql', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe(graphiqlCsp);
  });

  it('cuts a request whose body does not arrive within REQUEST_TIMEOUT_MS', async () => {
    const { port } = new URL(t.app.url);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let answer = '';
    socket.on('data', (chunk) => {
      answer += String(chunk);
    });
    socket.write(
      // With a key: the body is read only once the caller is authenticated.
      `POST /v1/usage/events HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.app.operatorToken}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"ev`,
    );
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('never cuts a streamed response that outlives REQUEST_TIMEOUT_MS', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pausingProgram('Long', { before: 'start', after: 'still here' }));
    const res = await fetch(new URL(v2StreamPath(p.projectID, 'patient'), t.app.url), {
      method: 'POST',
      headers: { authorization: t.app.operatorToken, 'content-type': 'application/json' },
      body: JSON.stringify({ action: { type: 'launch' } }),
    });
    const text = await res.text();
    expect(text).toContain('still here');
    expect(text).toMatch(/event: end\nid: \d+\n\n$/);
  });
});

describeEachDatabase('admin audit log', (auditProvider) => {
  const t = useTestApp(auditProvider, { env: { RATE_LIMIT_ENABLED: 'false' } });

  it('records who created, rotated and revoked keys and published agents, over GraphQL and the CLI', async () => {
    const p = await t.app.createProject({ scopes: ['admin', 'runtime:interact'] });
    const adminKeyId = p.apiKey.split('.')[1];
    const created = await t.app.gql(
      'mutation($p: ID!) { createApiKey(input: { projectID: $p, scopes: ["runtime:interact"] }) { key { id } } }',
      { p: p.projectID },
      p.apiKey,
    );
    const keyId = created.body.data.createApiKey.key.id;
    const rotated = await t.app.gql('mutation($id: ID!) { rotateApiKey(id: $id, graceSeconds: 0) { key { id } } }', {
      id: keyId,
    });
    const rotatedId = rotated.body.data.rotateApiKey.key.id;
    await t.app.gql('mutation($id: ID!) { revokeApiKey(id: $id) { id } }', { id: rotatedId });
    const program = {
      name: 'Audited',
      startFlow: 'main',
      flows: [{ id: 'main', name: 'Main', start: 'a', steps: [{ id: 'a', type: 'message', message: 'hi' }] }],
    };
    await publish(t.app, p.projectID, program);
    // The CLI, on the same database, as an operator at a shell would.
    const file = join(tmpdir(), `parley-audit-${p.projectID}.json`);
    writeFileSync(file, JSON.stringify({ ...program, name: 'AuditedFromCli' }));
    const cli = await promisify(execFile)(
      process.execPath,
      [join(projectRoot, 'bin/parley.js'), 'agent', 'publish', file, '--project', p.projectID],
      { env: { PATH: process.env.PATH ?? '', DATABASE_URL: t.app.database.url, LOG_LEVEL: 'silent' } },
    );
    expect(JSON.parse(cli.stdout)).toMatchObject({ version: 1, created: true });
    await promisify(execFile)(process.execPath, [join(projectRoot, 'bin/parley.js'), 'key', 'revoke', adminKeyId!], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: t.app.database.url, LOG_LEVEL: 'silent' },
    });

    const log = await t.app.gql(
      'query($ws: ID!) { auditEvents(workspaceID: $ws, first: 50) { edges { node { action actor targetType targetID data } } } }',
      { ws: p.workspaceID },
    );
    const events = log.body.data.auditEvents.edges.map(
      (e: { node: { action: string; actor: string; targetType: string; targetID: string; data: unknown } }) => e.node,
    );
    const find = (action: string, targetID?: string) =>
      events.find(
        (e: { action: string; targetID: string }) => e.action === action && (!targetID || e.targetID === targetID),
      );
    const cliActor = `cli:${userInfo().username}`;
    expect(find('key.create', keyId)).toMatchObject({ actor: `key:${adminKeyId}`, targetType: 'apiKey' });
    expect(find('key.rotate')).toMatchObject({ actor: 'operator', targetType: 'apiKey' });
    expect(find('key.revoke', rotatedId)).toMatchObject({ actor: 'operator' });
    expect(find('key.revoke', adminKeyId)).toMatchObject({ actor: cliActor });
    const publishes = events.filter((e: { action: string }) => e.action === 'agent.publish');
    expect(publishes.map((e: { actor: string; data: { name: string } }) => [e.data.name, e.actor]).sort()).toEqual([
      ['Audited', 'operator'],
      ['AuditedFromCli', cliActor],
    ]);
  });
});
