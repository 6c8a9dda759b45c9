/**
 * Why a document could not be ingested. `message` is shown to the person who uploaded it (as the
 * document's ERROR status), so it says what is wrong and what to do; `permanent` tells the job
 * runner whether trying again can help (a timeout or a 503 may pass, a damaged file will not).
 */
export type KbIngestErrorCode =
  /** The file or response is not one of the supported types. */
  | 'UNSUPPORTED_TYPE'
  /** The file, response or its unpacked content is over a limit. */
  | 'TOO_LARGE'
  /** The document was read but holds no text. */
  | 'NO_TEXT'
  /** The file is damaged, or its content does not match its type. */
  | 'MALFORMED'
  /** The file is password-protected. */
  | 'ENCRYPTED'
  /** The URL could not be fetched (network failure, HTTP error status). */
  | 'FETCH_FAILED'
  /** The URL points at a private, loopback or link-local address. */
  | 'PRIVATE_ADDRESS'
  /** The fetch took longer than the configured timeout. */
  | 'TIMEOUT'
  /** The caller's signal aborted the work (shutdown, cancellation). */
  | 'ABORTED';

export class KbIngestError extends Error {
  readonly code: KbIngestErrorCode;
  readonly permanent: boolean;

  constructor(code: KbIngestErrorCode, message: string, opts: { permanent?: boolean; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'KbIngestError';
    this.code = code;
    this.permanent = opts.permanent ?? true;
  }
}

/** The error to throw when `signal` has aborted: transient, since the job can run again later. */
export function abortedError(signal: AbortSignal): KbIngestError {
  return new KbIngestError('ABORTED', 'Processing was interrupted before it finished; it will be tried again.', {
    permanent: false,
    cause: signal.reason,
  });
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortedError(signal);
}
