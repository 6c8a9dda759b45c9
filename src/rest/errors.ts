import { STATUS_CODES } from 'node:http';
import type { Response } from 'express';
import type { ErrorCode, ErrorDetail } from '../lib/errors';

/** The REST error body of DECISIONS.md §3. */
export interface RestErrorBody {
  statusCode: number;
  statusText: string;
  errorCode: ErrorCode | string;
  message: string;
  details?: ErrorDetail[];
  /** Only on 500: the ID to quote when reporting the failure. */
  requestId?: string;
}

export function errorBody(
  status: number,
  errorCode: ErrorCode | string,
  message: string,
  details?: ErrorDetail[],
): RestErrorBody {
  return {
    statusCode: status,
    statusText: STATUS_CODES[status] ?? 'Error',
    errorCode,
    message,
    ...(details?.length ? { details } : {}),
  };
}

export function sendError(
  res: Response,
  status: number,
  errorCode: ErrorCode | string,
  message: string,
  opts: { details?: ErrorDetail[]; headers?: Record<string, string>; requestId?: string } = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  for (const [name, value] of Object.entries(opts.headers ?? {})) res.setHeader(name, value);
  const body = errorBody(status, errorCode, message, opts.details);
  res.status(status).json(status >= 500 && opts.requestId ? { ...body, requestId: opts.requestId } : body);
}
