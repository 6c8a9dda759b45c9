import './zod-messages';

/**
 * Expected failures. Domain code throws these; the GraphQL layer turns them into errors with
 * `extensions.code` and `extensions.http.status`, and the REST adapter into the error body of
 * DECISIONS.md §3. Anything else is a bug: masked, logged, answered with 500.
 */
export type ErrorCode =
  | 'VALIDATION_FAILED'
  | 'MALFORMED_JSON'
  | 'UNAUTHENTICATED'
  | 'INSUFFICIENT_SCOPE'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'INVALID_FILTER'
  | 'RATE_LIMITED'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_ERROR';

export const statusOf: Record<ErrorCode, number> = {
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  UNAUTHENTICATED: 401,
  INSUFFICIENT_SCOPE: 401,
  /** SPEC.md answers a key that lacks permission for a requested resource with 401, not 403. */
  FORBIDDEN: 401,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  INVALID_FILTER: 422,
  RATE_LIMITED: 429,
  SERVICE_UNAVAILABLE: 503,
  INTERNAL_ERROR: 500,
};

export interface ErrorDetail {
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: ErrorDetail[];
  /** Extra response headers, e.g. Retry-After on 429. */
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = statusOf[code];
    this.details = opts.details?.length ? opts.details : undefined;
    this.headers = opts.headers;
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) =>
  new AppError('VALIDATION_FAILED', message, { details });

export const notFound = (what: string, id?: string) =>
  new AppError('NOT_FOUND', id === undefined ? `${what} not found` : `${what} "${id}" not found`);

export const conflict = (message: string) => new AppError('CONFLICT', message);

interface SchemaIssue {
  message: string;
  path?: ReadonlyArray<PropertyKey | { key: PropertyKey }>;
  code?: string;
  keys?: readonly string[];
}

/** Formats standard-schema (zod) issues as error details with dotted paths. */
export function issuesToDetails(issues: ReadonlyArray<SchemaIssue>, prefix?: string): ErrorDetail[] {
  return issues.flatMap((issue) => {
    const segments = (issue.path ?? []).map((s) => String(typeof s === 'object' && s !== null ? s.key : s));
    const join = (extra: string[] = []) =>
      [prefix, ...segments, ...extra].filter((s) => s !== undefined && s !== '').join('.');
    // One detail per member that is not allowed, at that member's own path.
    if (issue.code === 'unrecognized_keys' && issue.keys?.length) {
      return issue.keys.map((key) => ({ path: join([key]), message: 'is not an allowed member' }));
    }
    return [{ path: join(), message: issue.message }];
  });
}

export function summarizeDetails(details: ErrorDetail[]): string {
  const first = details[0];
  if (!first) return 'Invalid request';
  const head = first.path ? `${first.path}: ${first.message}` : first.message;
  return details.length > 1 ? `${head} (and ${details.length - 1} more problem${details.length > 2 ? 's' : ''})` : head;
}
