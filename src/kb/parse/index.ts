import { KbIngestError, throwIfAborted } from '../errors';
import { extractCsv } from './csv';
import { extractDocx } from './docx';
import { extractHtml } from './html';
import { extractJson } from './json';
import { extractMarkdown } from './markdown';
import { extractPdf } from './pdf';
import { extractPlainText } from './text';

export { normalizeText } from './normalize';

/** The file types the knowledge base reads. */
export const kbFileTypeNames = ['text', 'markdown', 'html', 'pdf', 'docx', 'csv', 'json'] as const;
export type KbFileType = (typeof kbFileTypeNames)[number];

/** The supported types with their main extension, in the order DECISIONS.md §7 lists them. */
export const kbFileTypes: readonly { type: KbFileType; extension: string }[] = [
  { type: 'text', extension: 'txt' },
  { type: 'markdown', extension: 'md' },
  { type: 'html', extension: 'html' },
  { type: 'pdf', extension: 'pdf' },
  { type: 'docx', extension: 'docx' },
  { type: 'csv', extension: 'csv' },
  { type: 'json', extension: 'json' },
];

/** Extensions accepted for upload (DECISIONS.md §7), plus the common spellings .htm and .markdown. */
const BY_EXTENSION: Record<string, KbFileType> = {
  txt: 'text',
  md: 'markdown',
  markdown: 'markdown',
  html: 'html',
  htm: 'html',
  pdf: 'pdf',
  docx: 'docx',
  csv: 'csv',
  json: 'json',
};

const BY_CONTENT_TYPE: Record<string, KbFileType> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/pdf': 'pdf',
  'application/x-pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'text/csv': 'csv',
  'application/csv': 'csv',
  'text/x-csv': 'csv',
  'application/json': 'json',
  'text/json': 'json',
};

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaTypeOf(contentType: string | null | undefined): string {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/** The type an extension names (`Report.PDF` → pdf), or null. */
export function kbFileTypeOfExtension(filename: string): KbFileType | null {
  const match = /\.([A-Za-z0-9]+)$/.exec(filename.trim());
  return match ? (BY_EXTENSION[(match[1] as string).toLowerCase()] ?? null) : null;
}

/** The type a Content-Type names (`application/ld+json` → json), or null. */
export function kbFileTypeOfContentType(contentType: string | null | undefined): KbFileType | null {
  const media = mediaTypeOf(contentType);
  return BY_CONTENT_TYPE[media] ?? (/^application\/[\w.-]+\+json$/.test(media) ? 'json' : null);
}

/**
 * The type of an uploaded file or fetched document: by the file name's extension
 * (case-insensitive), else by the content type (a URL such as `/wiki/Page` has no extension).
 * Null means unsupported: the caller answers 415.
 */
export function kbFileTypeOf(filename: string, contentType?: string | null): KbFileType | null {
  return kbFileTypeOfExtension(filename) ?? kbFileTypeOfContentType(contentType);
}

export interface ExtractTextInput {
  bytes: Uint8Array;
  type: KbFileType;
  filename?: string;
  /** The page's address, for HTML (messages name it). */
  url?: string;
  /** The Content-Type a web server sent: its `charset` decides how HTML and text are decoded. */
  contentType?: string | null;
  signal?: AbortSignal;
}

const LABEL: Record<KbFileType, string> = {
  text: 'text file',
  markdown: 'Markdown file',
  html: 'HTML page',
  pdf: 'PDF',
  docx: 'DOCX file',
  csv: 'CSV file',
  json: 'JSON file',
};

/**
 * Text of a document, normalised (see normalizeText): NFC, no control characters, whitespace
 * collapsed inside lines, paragraphs separated by blank lines. Throws KbIngestError with a
 * message for the uploader; empty text is a permanent error.
 */
export async function extractText(input: ExtractTextInput): Promise<{ text: string; title: string | null }> {
  throwIfAborted(input.signal);
  const { bytes, contentType } = input;
  let result: { text: string; title: string | null };
  switch (input.type) {
    case 'text':
      result = extractPlainText(bytes, contentType);
      break;
    case 'markdown':
      result = extractMarkdown(bytes, contentType);
      break;
    case 'html':
      result = extractHtml(bytes, { url: input.url, contentType });
      break;
    case 'pdf':
      result = await extractPdf(bytes, input.signal);
      break;
    case 'docx':
      result = await extractDocx(bytes);
      break;
    case 'csv':
      result = extractCsv(bytes, contentType);
      break;
    case 'json':
      result = extractJson(bytes, contentType);
      break;
    default:
      throw new KbIngestError('UNSUPPORTED_TYPE', `Unsupported document type ${String(input.type satisfies never)}.`);
  }
  throwIfAborted(input.signal);
  if (!result.text) {
    const message =
      input.type === 'html' && input.url
        ? `The page at ${input.url} has no readable text.`
        : `The ${LABEL[input.type]}${input.filename ? ` "${input.filename}"` : ''} has no text.`;
    throw new KbIngestError('NO_TEXT', message);
  }
  return result;
}
