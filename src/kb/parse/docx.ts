import mammoth from 'mammoth';
import { KbIngestError } from '../errors';
import { normalizeText } from './normalize';

/** Unpacked XML a DOCX may hold before it is refused (mammoth builds a DOM of all of it). */
export const MAX_DOCX_XML_BYTES = 100 * 1024 * 1024;

const damaged = (cause?: unknown) =>
  new KbIngestError(
    'MALFORMED',
    'The DOCX file is damaged or not a Word document: open it in Word or LibreOffice, save it as .docx and upload it again.',
    { cause },
  );

/**
 * Sum of the uncompressed sizes the ZIP's central directory declares for its XML parts, or null
 * when there is no readable central directory. A 10 MB DOCX can unpack to gigabytes of XML (a
 * "zip bomb"); checking the declared sizes first refuses those before anything is inflated.
 */
function declaredXmlBytes(bytes: Uint8Array): number | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // The end-of-central-directory record sits in the last 22 + 65,535 (comment) bytes.
  const stop = Math.max(0, bytes.length - 22 - 65_535);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= stop; i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return null;
  const entries = view.getUint16(eocd + 10, true);
  let at = view.getUint32(eocd + 16, true);
  let total = 0;
  for (let n = 0; n < entries; n++) {
    if (at + 46 > bytes.length || view.getUint32(at, true) !== 0x02014b50) return null;
    const size = view.getUint32(at + 24, true);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 46, at + 46 + nameLength));
    // 0xFFFFFFFF means the size is in a ZIP64 field: more than 4 GB, refuse it as too large.
    if (/\.(xml|rels)$/i.test(name)) total += size === 0xffffffff ? Number.POSITIVE_INFINITY : size;
    at += 46 + nameLength + extraLength + commentLength;
  }
  return total;
}

/** Text of a Word document's paragraphs with mammoth (no formatting, tables cell by cell). */
export async function extractDocx(bytes: Uint8Array): Promise<{ text: string; title: string | null }> {
  // An encrypted DOCX, and the old binary .doc, are OLE compound files, not ZIP archives.
  if (bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0)
    throw new KbIngestError(
      'ENCRYPTED',
      'The file is a password-protected DOCX or an old-format .doc: save it as .docx without a password and upload it again.',
    );
  const xmlBytes = declaredXmlBytes(bytes);
  if (xmlBytes === null) throw damaged();
  if (xmlBytes > MAX_DOCX_XML_BYTES)
    throw new KbIngestError(
      'TOO_LARGE',
      `The DOCX file unpacks to more than ${MAX_DOCX_XML_BYTES / 1024 / 1024} MB of document XML: split it into smaller documents.`,
    );
  let value: string;
  try {
    ({ value } = await mammoth.extractRawText({
      buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    }));
  } catch (err) {
    throw damaged(err);
  }
  const text = normalizeText(value);
  if (!text) throw new KbIngestError('NO_TEXT', 'The DOCX file has no text (only images or empty pages?).');
  return { text, title: null };
}
