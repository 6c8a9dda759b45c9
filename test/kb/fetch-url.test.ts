import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KbIngestError } from '../../src/kb/errors';
import { type FetchUrlOptions, fetchUrlDocument } from '../../src/kb/fetch-url';
import { createOutboundFetch } from '../../src/lib/outbound-http';

/** A real HTTP server on 127.0.0.1; nothing leaves the machine. */

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const routes: Record<string, Handler> = {
  '/page': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<html><body><article><p>Hello from the page.</p></article></body></html>');
  },
  '/redirect-once': (_req, res) => {
    res.writeHead(302, { location: '/page' });
    res.end();
  },
  '/slow-headers': () => {
    // Never answers: the deadline must end the wait.
  },
  '/slow-body': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('the start of a body that never ends');
  },
  '/huge-chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' }); // no content-length: chunked
    const block = 'x'.repeat(16 * 1024);
    let sent = 0;
    const push = () => {
      while (sent < 200 && res.write(block)) sent++;
      if (sent >= 200) res.end();
      else res.once('drain', push);
    };
    push();
  },
  '/huge-declared': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': String(50 * 1024 * 1024) });
    res.write('%PDF-1.7');
  },
  '/image': (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  },
  '/missing': (_req, res) => {
    res.writeHead(404, { 'content-type': 'text/html' });
    res.end('<p>not here</p>');
  },
  '/unavailable': (_req, res) => {
    res.writeHead(503, { 'content-type': 'text/plain' });
    res.end('try later');
  },
  '/busy': (_req, res) => {
    res.writeHead(429, { 'retry-after': '5' });
    res.end();
  },
  '/files/report.pdf': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end('%PDF-1.7 bytes');
  },
  '/raw/rows.csv': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('a,b\n1,2\n');
  },
};

let server: Server;
let origin: string;
const open = createOutboundFetch({ allowPrivate: true, maxRedirects: 3 });
const guarded = createOutboundFetch({ allowPrivate: false, maxRedirects: 3 });

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = req.url ?? '/';
    const hops = /^\/hops\/(\d+)$/.exec(url);
    if (hops) {
      const n = Number(hops[1]);
      res.writeHead(302, { location: n > 0 ? `/hops/${n - 1}` : '/page' });
      res.end();
      return;
    }
    const route = routes[url];
    if (route) route(req, res);
    else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await open.close();
  await guarded.close();
});

const options = (over: Partial<FetchUrlOptions> = {}): FetchUrlOptions => ({
  fetch: open,
  timeoutMs: 5_000,
  maxBytes: 1024 * 1024,
  ...over,
});

async function failure(url: string, over: Partial<FetchUrlOptions> = {}): Promise<KbIngestError> {
  const err = await fetchUrlDocument(url, options(over)).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KbIngestError);
  return err as KbIngestError;
}

describe('fetchUrlDocument', () => {
  it('fetches an HTML page', async () => {
    const doc = await fetchUrlDocument(`${origin}/page`, options());
    expect(doc.type).toBe('html');
    expect(doc.contentType).toBe('text/html; charset=utf-8');
    expect(doc.finalUrl).toBe(`${origin}/page`);
    expect(new TextDecoder().decode(doc.bytes)).toContain('Hello from the page.');
  });

  it('follows redirects within the limit and reports the final URL', async () => {
    const doc = await fetchUrlDocument(`${origin}/hops/2`, options());
    expect(doc.finalUrl).toBe(`${origin}/page`);
    expect((await fetchUrlDocument(`${origin}/redirect-once`, options())).finalUrl).toBe(`${origin}/page`);
  });

  it('refuses a redirect chain beyond the limit, permanently', async () => {
    const err = await failure(`${origin}/hops/10`);
    expect(err.permanent).toBe(true);
    expect(err.message).toBe(`The URL ${origin}/hops/10 redirects more than 3 times: link to the final page instead.`);
  });

  it('times out a server that does not answer, or does not finish its body (transient)', async () => {
    for (const path of ['/slow-headers', '/slow-body']) {
      const err = await failure(`${origin}${path}`, { timeoutMs: 300 });
      expect(err.code).toBe('TIMEOUT');
      expect(err.permanent).toBe(false);
      expect(err.message).toBe(`The page at ${origin}${path} did not arrive within 0.3 s; it will be tried again.`);
    }
  });

  it('stops reading a body without Content-Length once it passes the cap', async () => {
    const err = await failure(`${origin}/huge-chunked`, { maxBytes: 256 * 1024 });
    expect(err.code).toBe('TOO_LARGE');
    expect(err.permanent).toBe(true);
    expect(err.message).toBe(
      `The document at ${origin}/huge-chunked is larger than the 256 kB limit: link to a smaller document or split it.`,
    );
  });

  it('refuses a declared Content-Length over the cap before reading', async () => {
    const err = await failure(`${origin}/huge-declared`, { maxBytes: 10 * 1024 * 1024 });
    expect(err.code).toBe('TOO_LARGE');
    expect(err.message).toContain('larger than the 10 MB limit');
  });

  it('names a content type it cannot read', async () => {
    const err = await failure(`${origin}/image`);
    expect(err.code).toBe('UNSUPPORTED_TYPE');
    expect(err.permanent).toBe(true);
    expect(err.message).toBe(
      `The URL ${origin}/image returned image/png, which the knowledge base cannot read (it reads HTML, plain text, Markdown, PDF, DOCX, JSON or CSV).`,
    );
  });

  it('takes the type from the extension when the content type is generic', async () => {
    expect((await fetchUrlDocument(`${origin}/files/report.pdf`, options())).type).toBe('pdf');
    expect((await fetchUrlDocument(`${origin}/raw/rows.csv`, options())).type).toBe('csv');
  });

  it('treats 4xx as permanent and 5xx or 429 as transient', async () => {
    const missing = await failure(`${origin}/missing`);
    expect(missing.permanent).toBe(true);
    expect(missing.message).toBe(`The server answered 404 Not Found for ${origin}/missing: check the URL.`);
    const unavailable = await failure(`${origin}/unavailable`);
    expect(unavailable.permanent).toBe(false);
    expect(unavailable.message).toBe(
      `The server answered 503 Service Unavailable for ${origin}/unavailable; it will be tried again.`,
    );
    expect((await failure(`${origin}/busy`)).permanent).toBe(false);
  });

  it('refuses private and loopback addresses unless allowed, naming the setting', async () => {
    for (const url of [`${origin}/page`, `http://localhost:${new URL(origin).port}/page`]) {
      const err = await failure(url, { fetch: guarded });
      expect(err.code).toBe('PRIVATE_ADDRESS');
      expect(err.permanent).toBe(true);
      expect(err.message).toContain('KB_ALLOW_PRIVATE_URLS=true');
    }
  });

  it('refuses URLs that are not http(s), malformed, or carry credentials', async () => {
    expect((await failure('ftp://example.com/file.txt')).message).toBe(
      'Only http and https URLs can be fetched, not ftp.',
    );
    expect((await failure('file:///etc/passwd')).permanent).toBe(true);
    expect((await failure('not a url')).message).toBe('"not a url" is not a valid URL.');
    expect((await failure(`http://user:secret@127.0.0.1:1/x`)).message).toMatch(/^URLs with a user name or password/);
  });

  it("stops when the caller's signal aborts (transient)", async () => {
    const controller = new AbortController();
    const pending = fetchUrlDocument(`${origin}/slow-headers`, options({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 50);
    const err = await pending.then(
      () => null,
      (e: unknown) => e as KbIngestError,
    );
    expect(err?.code).toBe('ABORTED');
    expect(err?.permanent).toBe(false);
  });

  it('a refused connection is transient', async () => {
    // A port that was just free: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const err = await failure(`http://127.0.0.1:${port}/`);
    expect(err.code).toBe('FETCH_FAILED');
    expect(err.permanent).toBe(false);
    expect(err.message).toContain('ECONNREFUSED');
  });
});
