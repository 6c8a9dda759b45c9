import { AppError, type ErrorCode } from '../lib/errors';
import type { LlmAccounting } from './types';

/**
 * - `auth`: the provider refused the credentials (401/403).
 * - `rate_limit`: 429 after the allowed retries; `retryAfterMs` when the provider said how long.
 * - `timeout`: no answer, or no next piece, within the timeout.
 * - `bad_model`: the model does not exist on that server (404).
 * - `provider_down`: 5xx after retries, connection refused or cut.
 * - `bad_request`: the provider rejected the request (other 4xx): a bug or an unsupported option.
 * - `aborted`: the caller's signal fired, or the provider was closed.
 * - `malformed_response`: the provider answered something that is not the OpenAI wire format.
 * - `unsupported`: the provider cannot do this at all (embeddings off, JSON from the built-in one).
 */
export type LlmErrorKind =
  | 'auth'
  | 'rate_limit'
  | 'timeout'
  | 'bad_model'
  | 'provider_down'
  | 'bad_request'
  | 'aborted'
  | 'malformed_response'
  | 'unsupported';

export interface LlmErrorOptions {
  provider: string;
  model?: string;
  /** HTTP status of the provider's answer, when there was one. */
  status?: number;
  retryAfterMs?: number;
  /** The provider's own error message, with the API key removed and cut to 300 characters. */
  providerMessage?: string;
  /** The provider's error code where it gives one (`model_not_found`, `insufficient_quota`). */
  providerCode?: string;
  /** The provider's request ID (x-request-id), for the operator's support ticket. */
  providerRequestId?: string;
  /** Usage so far when the call failed after text had started to arrive. */
  partialAccounting?: LlmAccounting;
  attempts?: number;
}

/**
 * A failed model call. The message is Parley's own sentence: it never holds the API key, the
 * prompt or the provider's text (which can echo either); `providerMessage` keeps the latter,
 * scrubbed of the key, for operators' logs. No `cause` is attached, for the same reason.
 */
export class LlmError extends Error {
  readonly kind: LlmErrorKind;
  readonly provider: string;
  readonly model?: string;
  readonly status?: number;
  readonly retryAfterMs?: number;
  readonly providerMessage?: string;
  readonly providerCode?: string;
  readonly providerRequestId?: string;
  readonly partialAccounting?: LlmAccounting;
  readonly attempts?: number;

  constructor(kind: LlmErrorKind, message: string, opts: LlmErrorOptions) {
    super(message);
    this.name = 'LlmError';
    this.kind = kind;
    this.provider = opts.provider;
    this.model = opts.model;
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
    this.providerMessage = opts.providerMessage;
    this.providerCode = opts.providerCode;
    this.providerRequestId = opts.providerRequestId;
    this.partialAccounting = opts.partialAccounting;
    this.attempts = opts.attempts;
  }

  /** A copy with more facts, e.g. the attempts count or partial usage known only to the caller. */
  with(extra: Partial<LlmErrorOptions>): LlmError {
    return new LlmError(this.kind, this.message, {
      provider: this.provider,
      model: this.model,
      status: this.status,
      retryAfterMs: this.retryAfterMs,
      providerMessage: this.providerMessage,
      providerCode: this.providerCode,
      providerRequestId: this.providerRequestId,
      partialAccounting: this.partialAccounting,
      attempts: this.attempts,
      ...extra,
    });
  }
}

export function isLlmError(err: unknown): err is LlmError {
  return err instanceof LlmError;
}

const appErrorCodeOf: Record<LlmErrorKind, ErrorCode> = {
  auth: 'SERVICE_UNAVAILABLE',
  rate_limit: 'RATE_LIMITED',
  timeout: 'SERVICE_UNAVAILABLE',
  bad_model: 'SERVICE_UNAVAILABLE',
  provider_down: 'SERVICE_UNAVAILABLE',
  bad_request: 'SERVICE_UNAVAILABLE',
  aborted: 'SERVICE_UNAVAILABLE',
  malformed_response: 'SERVICE_UNAVAILABLE',
  unsupported: 'VALIDATION_FAILED',
};

/**
 * For an API endpoint that calls a model while a client waits (a knowledge-base query): the
 * model's trouble is not the client's fault, so it answers 503 (429 with Retry-After for rate
 * limits). A bad key on Parley's side is the operator's problem, not the client's, hence 503 too.
 */
export function llmErrorToAppError(err: LlmError): AppError {
  const headers =
    err.kind === 'rate_limit' && err.retryAfterMs !== undefined
      ? { 'Retry-After': String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))) }
      : undefined;
  return new AppError(appErrorCodeOf[err.kind], `Language model unavailable: ${err.message}`, { headers });
}
