import type { HttpResponse, TestApp } from './app';

/** Helpers for knowledge-base tests: multipart uploads over real HTTP, waiting for ingestion. */

export interface UploadOptions {
  key: string;
  filename: string;
  content: Uint8Array | string;
  /** The file part's content type (default: none, so the server goes by the file name). */
  contentType?: string;
  /** Sent as the `metadata` part: an object is JSON-encoded, a string is sent as is. */
  metadata?: unknown;
  query?: Record<string, string>;
  /** Default POST /v1/knowledge-base/docs/upload. */
  path?: string;
  method?: string;
  /** Extra form fields. */
  fields?: Record<string, string>;
  /** The file part's field name (default `file`). */
  field?: string;
}

/** Uploads a file as multipart/form-data, as a browser or curl -F would. */
export async function uploadFile(app: TestApp, opts: UploadOptions): Promise<HttpResponse> {
  const form = new FormData();
  const bytes = typeof opts.content === 'string' ? new TextEncoder().encode(opts.content) : opts.content;
  form.append(
    opts.field ?? 'file',
    new Blob([new Uint8Array(bytes)], opts.contentType ? { type: opts.contentType } : {}),
    opts.filename,
  );
  if (opts.metadata !== undefined) {
    form.append('metadata', typeof opts.metadata === 'string' ? opts.metadata : JSON.stringify(opts.metadata));
  }
  for (const [name, value] of Object.entries(opts.fields ?? {})) form.append(name, value);
  const url = new URL(opts.path ?? '/v1/knowledge-base/docs/upload', app.url);
  for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
  const res = await fetch(url, { method: opts.method ?? 'POST', headers: { authorization: opts.key }, body: form });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, headers: res.headers, body, text };
}

/** POST /v1/knowledge-base/query. */
export function kbQuery(app: TestApp, key: string, body: Record<string, unknown>, query?: Record<string, string>) {
  return app.http('POST', '/v1/knowledge-base/query', { key, body, query });
}

/** Polls a document until its status is not PENDING (for uploads made without ?wait=true). */
export async function waitForStatus(app: TestApp, key: string, documentID: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await app.http('GET', `/v1/knowledge-base/docs/${documentID}`, { key });
    if (res.status !== 200) throw new Error(`GET document: ${res.status} ${res.text}`);
    // The original's shape: {data: [document], chunks}, the status as its name.
    if (res.body.data[0].status !== 'PENDING') return res.body;
    if (Date.now() > deadline) throw new Error(`document ${documentID} still PENDING after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The app's KB ingestion job handler, built as the services build it but without the job runner,
 * so a test runs one job itself (its statements, its failures); `close` ends its outbound fetch.
 */
export async function kbIngestHandlerOf(app: TestApp) {
  const [{ createKbIngestHandler }, { createOutboundFetch }] = await Promise.all([
    import('../../src/kb/ingest'),
    import('../../src/lib/outbound-http'),
  ]);
  const { services } = app;
  const fetch = createOutboundFetch({ allowPrivate: false, maxRedirects: 0 });
  const handler = createKbIngestHandler({
    db: services.db,
    pubsub: services.pubsub,
    llm: services.llm,
    logger: services.logger,
    fetch,
    urlTimeoutMs: 1000,
    maxUrlBytes: 1000,
  });
  return { handler, close: () => fetch.close() };
}
