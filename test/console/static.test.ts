import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initialJsBudgetBytes, initialScripts } from '../../scripts/build-web';
import { consoleCsp, consoleDistDir, consoleRouter } from '../../src/http/console';
import { useTestApp } from '../helpers/app';
import { ensureConsoleBuild } from '../helpers/browser';
import { describeEachDatabase } from '../helpers/lanes';

describeEachDatabase('console static files', (provider) => {
  const t = useTestApp(provider);
  beforeAll(async () => {
    await ensureConsoleBuild();
  });

  it('serves index.html at / with the console CSP, and GraphQL stays at /graphql', async () => {
    const res = await t.app.http('GET', '/', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.headers.get('content-security-policy')).toBe(consoleCsp);
    expect(res.text).toContain('<div id="app">');
    // No inline script: every script comes from /assets/.
    expect(res.text).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    const gql = await t.app.gql('{ viewer { kind } }');
    expect(gql.status).toBe(200);
    expect(gql.body.data.viewer.kind).toBeTruthy();
  });

  it('serves the hashed assets immutable, and 404s an unknown asset with the JSON error body', async () => {
    const html = readFileSync(join(consoleDistDir, 'index.html'), 'utf8');
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeTruthy();
    const res = await t.app.http('GET', script!);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(res.headers.get('cache-control')).toContain('immutable');
    const missing = await t.app.http('GET', '/assets/nope-123.js');
    expect(missing.status).toBe(404);
    expect(missing.body.errorCode).toBe('NOT_FOUND');
  });

  it('keeps the initial JavaScript under 300 KB gzip', () => {
    const scripts = initialScripts(consoleDistDir);
    expect(scripts.length).toBeGreaterThan(0);
    const total = scripts.reduce((s, x) => s + x.gzipBytes, 0);
    expect(total).toBeLessThanOrEqual(initialJsBudgetBytes);
  });
});

describe('console without a build', () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-no-console-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('answers / with 503 and a page that says how to build it', async () => {
    expect(existsSync(join(dir, 'index.html'))).toBe(false);
    const app = express();
    app.use(consoleRouter(dir));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/`);
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      expect(res.headers.get('content-security-policy')).toBe(consoleCsp);
      const text = await res.text();
      expect(text).toContain('npm run web:build');
    } finally {
      server.close();
    }
  });
});
