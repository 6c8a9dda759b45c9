/** Statuses worth another attempt: rate limits, server errors and a server-side request timeout. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * How long the provider asked us to wait, in milliseconds: `retry-after-ms` (OpenAI's own,
 * more precise) or `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
 */
export function retryAfterMsFromHeaders(headers: Headers | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return Math.ceil(value);
  }
  const header = headers.get('retry-after');
  if (header === null || header.trim() === '') return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(header)) return Math.ceil(Number(header) * 1000);
  const date = Date.parse(header);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * Exponential backoff with jitter for attempt n (0 = the wait before the first retry):
 * base·2ⁿ capped at 8 s, minus up to a quarter at random so that many clients spread out.
 */
export function backoffDelayMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const delay = Math.min(baseMs * 2 ** attempt, 8000);
  return Math.round(delay * (1 - random() * 0.25));
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
