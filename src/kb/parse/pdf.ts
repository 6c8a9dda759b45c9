import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { abortedError, KbIngestError } from '../errors';
import { normalizeText } from './normalize';

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');
type TextItem = import('pdfjs-dist/types/src/display/api').TextItem;

let pdfjs: Promise<PdfJs> | undefined;
// pdf.js is large and patches a few globals for Node when loaded: load it on the first PDF.
const loadPdfJs = () => {
  pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs');
  return pdfjs;
};

// pdf.js reads the standard fonts, CMaps (CJK encodings), ICC profiles and its WebAssembly
// decoders from these folders of the installed package, through the file system under Node;
// with no URLs given it would warn and, for CJK encodings, lose text. Nothing is fetched.
const assetDir = (() => {
  const root = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
  return (name: string) => join(root, name) + '/';
})();

interface Line {
  text: string;
  y: number;
  height: number;
}

/** Lines of one page in content order, each with its baseline and text height. */
function pageLines(items: readonly TextItem[]): Line[] {
  const lines: Line[] = [];
  let current: Line | null = null;
  for (const item of items) {
    const y = Number(item.transform[5]) || 0;
    const height = item.height || Math.abs(Number(item.transform[3])) || 0;
    current ??= { text: '', y, height };
    current.text += item.str;
    current.height = Math.max(current.height, height);
    if (item.hasEOL) {
      lines.push(current);
      current = null;
    }
  }
  if (current) lines.push(current);
  return lines;
}

const BULLET = /^(?:[•◦▪‣·\-–*]|\d{1,3}[.)]|[a-z][.)])\s/u;

/**
 * Paragraphs from lines: a blank line, or a vertical gap well over the line height (or a jump
 * upwards, a new column), ends a paragraph. Lines wrapped inside a paragraph are joined with a
 * space, so sentences are not cut at visual line ends; a word hyphenated across lines is joined.
 */
function pageText(lines: readonly Line[]): string {
  const paragraphs: string[] = [];
  let paragraph = '';
  let previous: Line | null = null;
  for (const line of lines) {
    const text = line.text.replace(/\s+/g, ' ').trim();
    if (!text) {
      if (paragraph) paragraphs.push(paragraph);
      paragraph = '';
      previous = null;
      continue;
    }
    if (previous && paragraph) {
      const gap = previous.y - line.y;
      const lineHeight = Math.max(previous.height, line.height, 1);
      if (gap > 1.8 * lineHeight || gap < -lineHeight) {
        paragraphs.push(paragraph);
        paragraph = text;
      } else if (BULLET.test(text)) paragraph += `\n${text}`;
      else if (/\p{L}-$/u.test(paragraph) && /^\p{Ll}/u.test(text)) paragraph = paragraph.slice(0, -1) + text;
      else paragraph += ` ${text}`;
    } else paragraph = paragraph ? `${paragraph} ${text}` : text;
    previous = line;
  }
  if (paragraph) paragraphs.push(paragraph);
  return paragraphs.join('\n\n');
}

/** Text of a PDF's text layer, page by page, with pdf.js (Mozilla's PDF reader). */
export async function extractPdf(
  bytes: Uint8Array,
  signal?: AbortSignal,
): Promise<{ text: string; title: string | null }> {
  const { getDocument } = await loadPdfJs();
  if (signal?.aborted) throw abortedError(signal);
  const task = getDocument({
    // pdf.js transfers the buffer it is given to its worker, detaching it: give it a copy.
    data: bytes.slice(),
    // No code generated from the document (font programs), no fonts handed to the system.
    isEvalSupported: false,
    useSystemFonts: false,
    disableFontFace: true,
    useWorkerFetch: false,
    enableXfa: false,
    standardFontDataUrl: assetDir('standard_fonts'),
    cMapUrl: assetDir('cmaps'),
    cMapPacked: true,
    iccUrl: assetDir('iccs'),
    wasmUrl: assetDir('wasm'),
    verbosity: 0, // errors only: warnings about odd fonts are noise in the server log
  });
  const onAbort = () => void task.destroy();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    let doc: Awaited<typeof task.promise>;
    try {
      doc = await task.promise;
    } catch (err) {
      if (signal?.aborted) throw abortedError(signal);
      const name = (err as Error | undefined)?.name;
      if (name === 'PasswordException')
        throw new KbIngestError('ENCRYPTED', 'The PDF is password-protected: upload a copy saved without a password.', {
          cause: err,
        });
      throw new KbIngestError(
        'MALFORMED',
        'The PDF file is damaged or not a PDF: open it in a PDF reader, save it again and upload the copy.',
        {
          cause: err,
        },
      );
    }
    const pages: string[] = [];
    for (let n = 1; n <= doc.numPages; n++) {
      if (signal?.aborted) throw abortedError(signal);
      const page = await doc.getPage(n);
      const content = await page.getTextContent();
      pages.push(pageText(pageLines(content.items.filter((item): item is TextItem => 'str' in item))));
      page.cleanup();
    }
    const text = normalizeText(pages.join('\n\n'));
    if (!text)
      throw new KbIngestError('NO_TEXT', 'The PDF has no text layer (scanned pages?): run it through OCR first.');
    let title: string | null = null;
    try {
      const { info } = await doc.getMetadata();
      const raw = (info as { Title?: unknown } | undefined)?.Title;
      if (typeof raw === 'string') title = normalizeText(raw) || null;
    } catch {
      // Broken metadata does not make the text less usable.
    }
    return { text, title };
  } catch (err) {
    if (signal?.aborted && !(err instanceof KbIngestError)) throw abortedError(signal);
    if (err instanceof KbIngestError) throw err;
    throw new KbIngestError(
      'MALFORMED',
      'The PDF file is damaged and its text could not be read: open it in a PDF reader, save it again and upload the copy.',
      { cause: err },
    );
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await task.destroy();
  }
}
