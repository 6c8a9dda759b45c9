import busboy from 'busboy';
import type { Request } from 'express';
import { AppError } from '../lib/errors';

/** A multipart/form-data request body: its text fields and its one file. */
export interface MultipartBody {
  fields: Record<string, string>;
  file: { field: string; filename: string; contentType: string | null; bytes: Buffer } | null;
}

export interface MultipartLimits {
  /** Largest file, in bytes. */
  maxFileBytes: number;
  /** Largest text field, in bytes (default 64 KB). */
  maxFieldBytes?: number;
  /** Most text fields (default 20). */
  maxFields?: number;
}

/**
 * Reads a multipart/form-data body with a streaming parser (busboy). Limits are enforced while
 * reading: a file over the limit stops the read at that byte and answers 413, so an oversized
 * upload is never held in memory. More than one file, too many fields or a field over its limit
 * are refused too.
 */
export function readMultipart(req: Request, limits: MultipartLimits): Promise<MultipartBody> {
  const maxFieldBytes = limits.maxFieldBytes ?? 64 * 1024;
  const maxFields = limits.maxFields ?? 20;
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: {
          fileSize: limits.maxFileBytes,
          files: 1,
          fields: maxFields,
          fieldSize: maxFieldBytes,
          parts: maxFields + 1,
        },
      });
    } catch (err) {
      reject(new AppError('VALIDATION_FAILED', `The multipart body cannot be read: ${(err as Error).message}.`));
      return;
    }
    const body: MultipartBody = { fields: {}, file: null };
    let settled = false;
    const fail = (error: AppError) => {
      if (settled) return;
      settled = true;
      req.unpipe(parser);
      // Let the rest of the upload drain so the client can read the answer.
      req.resume();
      reject(error);
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) {
        fail(new AppError('PAYLOAD_TOO_LARGE', `The form field "${name}" is larger than ${maxFieldBytes} bytes.`));
        return;
      }
      body.fields[name] = value;
    });
    parser.on('file', (field, stream, info) => {
      const parts: Buffer[] = [];
      stream.on('data', (data: Buffer) => {
        if (!settled) parts.push(data);
      });
      stream.on('limit', () => {
        fail(new AppError('PAYLOAD_TOO_LARGE', `The file is larger than ${limits.maxFileBytes} bytes.`));
        stream.resume();
      });
      stream.on('end', () => {
        if (settled) return;
        body.file = {
          field,
          filename: info.filename ?? '',
          contentType: info.mimeType && info.mimeType !== 'application/octet-stream' ? info.mimeType : null,
          bytes: Buffer.concat(parts),
        };
      });
    });
    parser.on('filesLimit', () => fail(new AppError('VALIDATION_FAILED', 'Send one file per request.')));
    parser.on('fieldsLimit', () => fail(new AppError('VALIDATION_FAILED', `Send at most ${maxFields} form fields.`)));
    parser.on('partsLimit', () => fail(new AppError('VALIDATION_FAILED', 'The form has too many parts.')));
    parser.on('error', (err: Error) =>
      fail(new AppError('VALIDATION_FAILED', `The multipart body is malformed: ${err.message}.`)),
    );
    parser.on('close', () => {
      if (settled) return;
      settled = true;
      resolve(body);
    });
    req.on('aborted', () => fail(new AppError('VALIDATION_FAILED', 'The upload was interrupted.')));
    req.pipe(parser);
  });
}
