import { describe, expect, it } from 'vitest';
import { graphiqlAssetsPath } from '../../src/http/graphiql';
import { useTestApp } from '../helpers/app';
import { databaseLanes } from '../helpers/lanes';

/**
 * GraphiQL works offline: the page references only this server's URLs, every file it needs
 * (its bundle, styles, boot script, favicon and the editor's workers) is served from the installed
 * package with the right type, and the page's CSP allows exactly that.
 */

const provider = databaseLanes()[0] ?? 'sqlite';

const expectedCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "worker-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  'font-src data:',
  "img-src 'self' data:",
  "connect-src 'self'",
  "manifest-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

describe(`GraphiQL offline [${provider}]`, () => {
  const t = useTestApp(provider);
  const off = useTestApp(provider, { env: { GRAPHIQL: 'false' } });

  const page = () => t.app.http('GET', '/graphql', { headers: { accept: 'text/html' } });

  it('serves a page that references only local URLs and runs no inline script', async () => {
    const res = await page();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toContain('<title>Parley GraphQL</title>');
    expect(res.text).not.toMatch(/https?:\/\//);
    const urls = [...res.text.matchAll(/\s(?:src|href)="([^"]*)"/g)].map((m) => m[1] as string);
    expect(urls.length).toBeGreaterThanOrEqual(4);
    for (const url of urls) expect(url.startsWith(`${graphiqlAssetsPath}/`), url).toBe(true);
    // Every script element is a file of this origin, or a JSON data block (never executed).
    for (const [tag] of res.text.matchAll(/<script[^>]*>/g)) {
      expect(tag.includes(' src="') || tag.includes('type="application/json"'), tag).toBe(true);
    }
    const options = /<script type="application\/json" id="graphiql-options">(.*?)<\/script>/s.exec(res.text);
    expect(JSON.parse(options?.[1] ?? 'null')).toMatchObject({ title: 'Parley GraphQL' });
  });

  it('sets the CSP that allows exactly what the page loads', async () => {
    const res = await page();
    expect(res.headers.get('content-security-policy')).toBe(expectedCsp);
  });

  it('serves every file the page and its boot script reference, with the right type', async () => {
    const res = await page();
    const urls = [...res.text.matchAll(/\s(?:src|href)="([^"]*)"/g)].map((m) => m[1] as string);
    const boot = urls.find((u) => u.endsWith('/boot.js'));
    expect(boot).toBeDefined();
    const bootJs = await t.app.http('GET', boot as string);
    // The editor's workers: real files of this origin, named by the boot script.
    const workers = [...bootJs.text.matchAll(/"([a-z]+\.worker\.js)"/g)].map((m) => `${graphiqlAssetsPath}/${m[1]}`);
    expect(workers).toHaveLength(3);
    const typeOf = (url: string) =>
      url.endsWith('.js') ? /^text\/javascript/ : url.endsWith('.css') ? /^text\/css/ : /^image\//;
    for (const url of [...urls, ...workers]) {
      const file = await t.app.http('GET', url);
      expect(file.status, url).toBe(200);
      expect(file.headers.get('content-type'), url).toMatch(typeOf(url));
      expect(Number(file.headers.get('content-length')), url).toBeGreaterThan(100);
      expect(file.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    }
    const bundle = await t.app.http('GET', `${graphiqlAssetsPath}/graphiql.js`);
    expect(bundle.text).toContain('renderYogaGraphiQL');
    expect(bundle.text).not.toContain('unpkg.com');
  });

  it('answers 304 to a matching ETag, HEAD without a body, 404 for a file it does not have', async () => {
    const first = await t.app.http('GET', `${graphiqlAssetsPath}/graphiql.css`);
    const etag = first.headers.get('etag') ?? '';
    expect(etag).toMatch(/^".+"$/);
    const again = await t.app.http('GET', `${graphiqlAssetsPath}/graphiql.css`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    const head = await t.app.http('HEAD', `${graphiqlAssetsPath}/graphiql.css`);
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const missing = await t.app.http('GET', `${graphiqlAssetsPath}/nope.js`);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ errorCode: 'NOT_FOUND' });
    const otherVersion = await t.app.http('GET', '/graphiql/0.0.0/graphiql.js');
    expect(otherVersion.status).toBe(404);
  });

  it('serves neither the page nor its files with GRAPHIQL=false', async () => {
    const res = await off.app.http('GET', '/graphql', { headers: { accept: 'text/html' } });
    expect(res.text).not.toContain('graphiql');
    const file = await off.app.http('GET', `${graphiqlAssetsPath}/graphiql.js`);
    expect(file.status).toBe(404);
  });
});
