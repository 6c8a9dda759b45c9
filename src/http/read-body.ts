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
  const chunks: Buffer[] = [];
  let received = 0;
  let settled = false;
  const settle = (err: Error | null, body?: Buffer) => {
    if (settled) return;
    settled = true;
    req.removeListener('data', onData);
    req.removeListener('end', onEnd);
    req.removeListener('aborted', onAborted);
    req.removeListener('error', onError);
    done(err, body);
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    chunks.push(chunk);
  };
  const onEnd = () => {
    if (received !== length) {
      settle(bodyError('request size did not match content length', 'request.size.invalid', 400));
      return;
    }
    settle(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received));
  };
  const onAborted = () => settle(bodyError('request aborted', 'request.aborted', 400));
  const onError = (err: Error) =>
    settle(
      (err as { code?: string }).code === 'ECONNRESET' ? bodyError('request aborted', 'request.aborted', 400) : err,
    );
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('aborted', onAborted);
  req.on('error', onError);
  return true;
}

function bodyError(message: string, type: string, status: number): Error {
  return Object.assign(new Error(message), { type, status, statusCode: status, expose: true });
}
