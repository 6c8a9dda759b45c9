import type { Request } from 'express';

/**
 * Reads a request body whose length is declared (`Content-Length`, no transfer coding) and within
 * `limit`, into one buffer. This is the common case of a JSON API request, for which body-parser's
 * reader (content-type and charset checks, a decoder, five stream listeners and an end-of-request
 * watcher) does nothing more; anything else (no or an oversized `Content-Length`, a chunked or
 * compressed body) answers `false`, and the caller reads it with body-parser, which answers the
 * limit (413) and its other errors as it always has.
 *
 * Node's parser delivers exactly the declared bytes, or ends the request early when the client
 * goes away: that is body-parser's `request.aborted` error, passed to `done` the same way.
 */
export function readDeclaredBody(
  req: Request,
  limit: number,
  done: (err: Error | null, body?: Buffer) => void,
): boolean {
  const declared = req.headers['content-length'];
  if (!declared || req.headers['transfer-encoding'] !== undefined) return false;
  const encoding = req.headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') return false;
  const length = Number(declared);
  if (!Number.isSafeInteger(length) || length <= 0 || length > limit) return false;
  new DeclaredBodyReader(req, length, done);
  return true;
}

/**
 * The listeners of one `readDeclaredBody`. They are members assigned in the constructor, not named
 * constants: Parley runs through tsx, whose esbuild transform keeps names, and would name each
 * listener with Object.defineProperty on every request.
 */
class DeclaredBodyReader {
  private readonly chunks: Buffer[] = [];
  private received = 0;
  private settled = false;
  private readonly onData: (chunk: Buffer) => void;
  private readonly onEnd: () => void;
  private readonly onAborted: () => void;
  private readonly onError: (err: Error) => void;

  constructor(
    private readonly req: Request,
    length: number,
    private readonly done: (err: Error | null, body?: Buffer) => void,
  ) {
    this.onData = (chunk) => {
      this.received += chunk.length;
      this.chunks.push(chunk);
    };
    this.onEnd = () => {
      if (this.received !== length) {
        this.settle(bodyError('request size did not match content length', 'request.size.invalid', 400));
        return;
      }
      this.settle(null, this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.received));
    };
    this.onAborted = () => this.settle(bodyError('request aborted', 'request.aborted', 400));
    this.onError = (err) =>
      this.settle(
        (err as { code?: string }).code === 'ECONNRESET' ? bodyError('request aborted', 'request.aborted', 400) : err,
      );
    req.on('data', this.onData);
    req.on('end', this.onEnd);
    req.on('aborted', this.onAborted);
    req.on('error', this.onError);
  }

  private settle(err: Error | null, body?: Buffer): void {
    if (this.settled) return;
    this.settled = true;
    const req = this.req;
    req.removeListener('data', this.onData);
    req.removeListener('end', this.onEnd);
    req.removeListener('aborted', this.onAborted);
    req.removeListener('error', this.onError);
    this.done(err, body);
  }
}

function bodyError(message: string, type: string, status: number): Error {
  return Object.assign(new Error(message), { type, status, statusCode: status, expose: true });
}

/** A `Content-Type` body-parser would decode as UTF-8: no parameter, or only `charset=utf-8`. */
const utf8OrNoCharset = /^[^;]*(?:;\s*charset="?utf-8"?\s*)?$/i;

/**
 * Reads a REST JSON body as `express.json` (strict, the given limit) would, without it, when its
 * length is declared (see `readDeclaredBody`) and its media type is one the REST router parses
 * with no charset or UTF-8. Answers `false` for anything else, which the caller leaves to
 * body-parser. `done` gets the parsed value, or body-parser's errors: `entity.parse.failed`
 * (status 400) for a body that is not a JSON object or array, the reader's own otherwise.
 */
export function readDeclaredJson(
  req: Request,
  limit: number,
  types: string[],
  done: (err: Error | null, value?: unknown) => void,
): boolean {
  const contentType = req.headers['content-type'];
  if (!contentType || !utf8OrNoCharset.test(contentType) || !req.is(types)) return false;
  // Already consumed (body-parser's `onFinished.isFinished`): body-parser passes it by.
  if (req.complete && !req.readable) return false;
  return readDeclaredBody(req, limit, (err, raw) => {
    if (err) {
      done(err);
      return;
    }
    let value: unknown;
    try {
      value = parseStrictJson((raw as Buffer).toString('utf8'));
    } catch (thrown) {
      done(Object.assign(thrown as Error, { type: 'entity.parse.failed', status: 400, statusCode: 400, expose: true }));
      return;
    }
    done(null, value);
  });
}

/**
 * body-parser's strict JSON parse of a UTF-8 body: its decoder drops a byte order mark, an empty
 * body is `{}`, and the first non-whitespace character must open an object or an array.
 */
export function parseStrictJson(text: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (body.length === 0) return {};
  const first = body[0] === '{' || body[0] === '[' ? body[0] : /^[ \t\n\r]*(.|$)/s.exec(body)?.[1];
  if (first !== '{' && first !== '[') throw new SyntaxError('strict violation: the body is not a JSON object or array');
  return JSON.parse(body) as unknown;
}
