import { KbIngestError } from '../errors';

/** The `charset` parameter of a Content-Type header, lower-cased, if any. */
export function charsetOf(contentType: string | null | undefined): string | null {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '');
  return match ? (match[1] as string).toLowerCase() : null;
}

const UTF8_LABELS = new Set(['utf-8', 'utf8', 'unicode-1-1-utf-8']);

/** Offset of the first byte that breaks UTF-8 (only called once decoding has failed). */
function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i] as number;
    const need =
      b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    for (let k = 1; k <= need; k++) if (((bytes[i + k] ?? 0) & 0xc0) !== 0x80) return i;
    // Overlong 3-byte forms, UTF-16 surrogates and code points past U+10FFFF.
    const b1 = bytes[i + 1] ?? 0;
    if (
      (b === 0xe0 && b1 < 0xa0) ||
      (b === 0xed && b1 > 0x9f) ||
      (b === 0xf0 && b1 < 0x90) ||
      (b === 0xf4 && b1 > 0x8f)
    )
      return i;
    i += need + 1;
  }
  return bytes.length;
}

/**
 * Text of a file that must be Unicode: UTF-8 (a byte-order mark is dropped), or UTF-16 when it
 * starts with a UTF-16 byte-order mark (what some Windows editors save). Anything else is an
 * error rather than mojibake in the knowledge base. A `charset` other than UTF-8 declared by a
 * web server is honoured.
 */
/**
 * The text when a declared non-UTF-8 charset or a UTF-16 byte-order mark says how to read the
 * bytes; null when they should be read as UTF-8 (an unknown label counts as no label).
 */
function decodeDeclared(bytes: Uint8Array, charset: string | null): string | null {
  if (charset && !UTF8_LABELS.has(charset)) {
    try {
      return new TextDecoder(charset).decode(bytes);
    } catch {
      // An unknown label: read the bytes as the BOM or UTF-8 say.
    }
  }
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  return null;
}

export function decodeText(bytes: Uint8Array, what: string, contentType?: string | null): string {
  const declared = decodeDeclared(bytes, charsetOf(contentType));
  if (declared !== null) return declared;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    throw new KbIngestError(
      'MALFORMED',
      `The ${what} is not valid UTF-8 text (first bad byte at offset ${firstInvalidUtf8(bytes)}): save it with UTF-8 encoding and upload it again.`,
      { cause: err },
    );
  }
}

/**
 * Text of an HTML page: the HTTP charset, else a BOM, else a `<meta charset>` in the first
 * kilobytes, else UTF-8; a page that is not valid UTF-8 after all is read as windows-1252, as
 * browsers do, since old pages often omit their encoding.
 */
export function decodeHtml(bytes: Uint8Array, contentType?: string | null): string {
  let charset = charsetOf(contentType);
  if (!charset && !(bytes[0] === 0xef && bytes[1] === 0xbb) && !(bytes[0] === 0xff || bytes[0] === 0xfe)) {
    const head = new TextDecoder('latin1').decode(bytes.subarray(0, 4096));
    const meta = /<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head);
    if (meta) charset = (meta[1] as string).toLowerCase();
  }
  const declared = decodeDeclared(bytes, charset);
  if (declared !== null) return declared;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}
