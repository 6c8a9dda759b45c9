/**
 * The one shape of extracted text that chunking and indexing rely on: Unicode NFC, no control
 * characters (PostgreSQL cannot store NUL, and the others are noise to search), whitespace runs
 * inside a line collapsed to one space, lines trimmed, paragraphs separated by one blank line.
 */
export function normalizeText(raw: string): string {
  return (
    raw
      // Lone surrogates (possible in JSON strings) are not valid UTF-8 in a database.
      .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD')
      .normalize('NFC')
      // Form feed is a page break in plain text: a paragraph boundary.
      .replace(/\f/g, '\n\n')
      .replace(/\r\n?|[\v\u0085\u2028\u2029]/g, '\n')
      // C0 and C1 controls except tab and newline; soft hyphen, zero-width space, word joiner and
      // BOM are invisible and split words for search. Zero-width (non-)joiners stay: emoji and
      // several scripts need them.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
      .replace(/[\u0000-\u0008\u000E-\u001F\u007F-\u009F\u00AD\u200B\u2060\uFEFF\uFFFE\uFFFF]/g, '')
      .replace(/[\t\p{Zs}]+/gu, ' ')
      .replace(/ ?\n ?/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim()
  );
}
