import type { OutboundFetch } from '../lib/outbound-http';
import { KbIngestError } from './errors';
import { type KbFileType, kbFileTypeOfContentType, kbFileTypeOfExtension, mediaTypeOf } from './parse';

export interface FetchUrlOptions {
  /** From `createOutboundFetch({ allowPrivate, maxRedirects })`: the address guard and redirect limit. */
  fetch: OutboundFetch;
  /** For the whole fetch: connection, redirects, headers and body. */
  timeoutMs: number;
  /** Largest body accepted (after content decoding), checked while it streams in. */
  maxBytes: number;
  /** The job's signal (shutdown, cancellation). */
  signal?: AbortSignal;
}

export interface FetchedDocument {
  bytes: Uint8Array;
  type: KbFileType;
  /** The address after redirects. */
  finalUrl: string;
  /** The response's Content-Type header ('' when it had none). */
  contentType: string;
}

const SUPPORTED = 'HTML, plain text, Markdown, PDF, DOCX, JSON or CSV';

// Content types servers send for "a file" without saying which: the URL's extension decides
// then (object stores serve PDFs as octet-stream, raw-file hosts serve .md/.csv/.json as
// text/plain).
const GENERIC = new Set(['', 'application/octet-stream', 'binary/octet-stream', 'application/download', 'text/plain']);

function typeOfResponse(contentType: string, finalUrl: URL): KbFileType | null {
  const media = mediaTypeOf(contentType);
  if (GENERIC.has(media)) {
    const byExtension = kbFileTypeOfExtension(decodeURIComponentSafe(finalUrl.pathname));
    if (byExtension) return byExtension;
  }
  return kbFileTypeOfContentType(media);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const megabytes = (bytes: number) => {
  const mb = bytes / (1024 * 1024);
  return mb >= 1 ? `${Number.isInteger(mb) ? mb : mb.toFixed(1)} MB` : `${Math.ceil(bytes / 1024)} kB`;
};

/** The errors and causes under an error, outermost first (fetch wraps the reason in `cause`). */
function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && chain.length < 10; e = (e as { cause?: unknown }).cause) {
    chain.push(e);
    if (typeof e !== 'object') break;
  }
  return chain;
}

/** A fetch failure (no HTTP status) as a KbIngestError. */
function networkError(err: unknown, url: string): KbIngestError {
  const chain = causeChain(err);
  const codeOf = (e: unknown) => (typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined);
  const refused = chain.find(
    (e) => codeOf(e) === 'PRIVATE_ADDRESS' || (e as Error | undefined)?.name === 'PrivateAddressError',
  );
  if (refused) {
    const host = (refused as { host?: string }).host;
    return new KbIngestError(
      'PRIVATE_ADDRESS',
      `The URL ${url} leads to a private, loopback or link-local address${host ? ` (${host})` : ''}, which this server does not fetch. Use a public URL, or ask the operator to set KB_ALLOW_PRIVATE_URLS=true.`,
      { cause: err },
    );
  }
  const messages = chain.map((e) => (e instanceof Error ? e.message : String(e)));
  const redirects = messages.find((m) => /^more than \d+ redirects$/.test(m));
  if (redirects)
    return new KbIngestError(
      'FETCH_FAILED',
      `The URL ${url} redirects ${redirects.slice(0, -10)} times: link to the final page instead.`,
      {
        cause: err,
      },
    );
  const scheme = messages.find((m) => m.startsWith('unsupported URL scheme'));
  if (scheme)
    return new KbIngestError('FETCH_FAILED', `The URL ${url} redirects to a non-HTTP address (${scheme.slice(23)}).`, {
      cause: err,
    });
  const code = chain.map(codeOf).find((c): c is string => typeof c === 'string');
  // An unknown host or a certificate the server gets wrong needs a person to fix the URL or
  // the server; retrying will not help.
  if (code === 'ENOTFOUND')
    return new KbIngestError('FETCH_FAILED', `The host of ${url} was not found: check the URL.`, { cause: err });
  if (code && /CERT|TLS|SSL/.test(code))
    return new KbIngestError('FETCH_FAILED', `The server of ${url} has an invalid TLS certificate (${code}).`, {
      cause: err,
    });
  // Connection refused or reset, DNS timeouts, sockets closed early: a later attempt can pass.
  return new KbIngestError(
    'FETCH_FAILED',
    `The URL ${url} could not be fetched (${code ?? messages.at(-1) ?? 'network error'}); it will be tried again.`,
    { cause: err, permanent: false },
  );
}

/** An HTTP status that is not 2xx as a KbIngestError: 4xx permanent, 408/429/5xx transient. */
function statusError(response: Response, url: string): KbIngestError {
  const status = response.status;
  const text = `${status}${response.statusText ? ` ${response.statusText}` : ''}`;
  const transient = status === 408 || status === 425 || status === 429 || status >= 500;
  const hint =
    status === 401 || status === 403
      ? ': the page needs a login, which the fetcher does not have'
      : status === 404 || status === 410
        ? ': check the URL'
        : transient
          ? '; it will be tried again'
          : '';
  return new KbIngestError('FETCH_FAILED', `The server answered ${text} for ${url}${hint}.`, { permanent: !transient });
}

/**
 * Fetches a document for the knowledge base: http(s) only, one deadline for everything, the
 * type from the Content-Type (the URL's extension for generic types), the size capped while the
 * body streams. The address guard and redirect limit come from `opts.fetch`.
 */
export async function fetchUrlDocument(url: string, opts: FetchUrlOptions): Promise<FetchedDocument> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new KbIngestError('FETCH_FAILED', `"${url}" is not a valid URL.`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new KbIngestError(
      'FETCH_FAILED',
      `Only http and https URLs can be fetched, not ${parsed.protocol.slice(0, -1)}.`,
    );
  if (parsed.username || parsed.password)
    throw new KbIngestError(
      'FETCH_FAILED',
      'URLs with a user name or password cannot be fetched: remove the credentials from the URL.',
    );
  if (opts.signal?.aborted) throw aborted(opts.signal);

  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error('timeout'));
  }, opts.timeoutMs);
  const onAbort = () => controller.abort(opts.signal?.reason);
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const failure = (err: unknown): KbIngestError => {
    if (err instanceof KbIngestError) return err;
    if (timedOut)
      return new KbIngestError(
        'TIMEOUT',
        `The page at ${url} did not arrive within ${opts.timeoutMs / 1000} s; it will be tried again.`,
        { permanent: false, cause: err },
      );
    if (opts.signal?.aborted) return aborted(opts.signal);
    return networkError(err, url);
  };

  let response: Response;
  try {
    response = await opts.fetch(parsed, {
      signal: controller.signal,
      headers: {
        accept:
          'text/html,application/xhtml+xml,application/pdf,application/vnd.openxmlformats-officedocument.wordprocessingml.document,text/markdown,text/csv,application/json,text/plain;q=0.9,*/*;q=0.5',
        'user-agent': 'Parley-KnowledgeBase/1.0 (+document fetcher)',
      },
    });
  } catch (err) {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
    throw failure(err);
  }

  try {
    const finalUrl = response.url || parsed.href;
    if (response.status < 200 || response.status > 299) throw statusError(response, url);
    const contentType = response.headers.get('content-type') ?? '';
    const type = typeOfResponse(contentType, new URL(finalUrl));
    if (!type)
      throw new KbIngestError(
        'UNSUPPORTED_TYPE',
        `The URL ${url} returned ${mediaTypeOf(contentType) || 'content without a Content-Type'}, which the knowledge base cannot read (it reads ${SUPPORTED}).`,
      );
    const declared = Number(response.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > opts.maxBytes) throw tooLarge(url, opts.maxBytes);
    const bytes = await readCapped(response, opts.maxBytes, url);
    return { bytes, type, finalUrl, contentType };
  } catch (err) {
    // Stop the download (and free the connection) when we give up on it.
    await response.body?.cancel().catch(() => {});
    throw failure(err);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

function aborted(signal: AbortSignal): KbIngestError {
  return new KbIngestError('ABORTED', 'Fetching was interrupted before it finished; it will be tried again.', {
    permanent: false,
    cause: signal.reason,
  });
}

function tooLarge(url: string, maxBytes: number): KbIngestError {
  return new KbIngestError(
    'TOO_LARGE',
    `The document at ${url} is larger than the ${megabytes(maxBytes)} limit: link to a smaller document or split it.`,
  );
}

/** The body, refusing it as soon as it passes `maxBytes` (a Content-Length can be absent or wrong). */
async function readCapped(response: Response, maxBytes: number, url: string): Promise<Uint8Array> {
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(url, maxBytes);
    }
    parts.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.byteLength;
  }
  return bytes;
}
