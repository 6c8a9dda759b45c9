import { CsvError, parse } from 'csv-parse/sync';
import { KbIngestError } from '../errors';
import { decodeText } from './decode';
import { normalizeText } from './normalize';

/**
 * The field separator, from the header line: the most frequent of comma, semicolon (what Excel
 * writes where the decimal separator is a comma), tab and pipe outside quotes; comma on a tie.
 */
function sniffDelimiter(text: string): string {
  const counts = new Map<string, number>([
    [',', 0],
    [';', 0],
    ['\t', 0],
    ['|', 0],
  ]);
  let quoted = false;
  for (let i = 0; i < text.length && i < 64 * 1024; i++) {
    const c = text[i] as string;
    if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '\n' || c === '\r')) break;
    else if (!quoted && counts.has(c)) counts.set(c, (counts.get(c) as number) + 1);
  }
  let best = ',';
  for (const [c, n] of counts) if (n > (counts.get(best) as number)) best = c;
  return best;
}

/** What csv-parse's error codes mean for the person who made the file. */
function describe(err: CsvError): string {
  const e = err as CsvError & { record?: unknown[]; column?: unknown };
  switch (err.code) {
    case 'CSV_RECORD_INCONSISTENT_FIELDS_LENGTH':
      return `the row has ${e.record?.length ?? 'more'} fields but the header has fewer (an unquoted separator inside a value?)`;
    case 'CSV_QUOTE_NOT_CLOSED':
      return 'a quoted value is never closed';
    case 'CSV_INVALID_CLOSING_QUOTE':
    case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
      return 'a quote inside a quoted value is not doubled ("")';
    case 'CSV_MAX_RECORD_SIZE':
      return 'a row is longer than 1,000,000 characters';
    default:
      return err.message;
  }
}

/**
 * One paragraph per row, one `column: value` line per non-empty value, so a row's facts stay
 * together in a chunk and keep their column names for search. The header row names the columns.
 */
export function extractCsv(bytes: Uint8Array, contentType?: string | null): { text: string; title: string | null } {
  const source = decodeText(bytes, 'CSV file', contentType);
  let records: string[][];
  try {
    records = parse(source, {
      delimiter: sniffDelimiter(source),
      bom: true,
      skip_empty_lines: true,
      relax_column_count_less: true, // trailing empty cells are often left out
      max_record_size: 1_000_000,
    });
  } catch (err) {
    if (err instanceof CsvError) {
      const line = (err as CsvError & { lines?: number }).lines;
      throw new KbIngestError(
        'MALFORMED',
        `The CSV is malformed at line ${line ?? '?'}: ${describe(err)}. Fix the file and upload it again.`,
        { cause: err },
      );
    }
    throw err;
  }
  const [header, ...rows] = records;
  if (!header) throw new KbIngestError('NO_TEXT', 'The CSV file is empty.');
  const names = header.map((name, i) => normalizeText(name) || `column ${i + 1}`);
  const paragraphs: string[] = [];
  for (const row of rows) {
    const lines: string[] = [];
    row.forEach((value, i) => {
      const v = normalizeText(value).replace(/\n+/g, ' ');
      if (v) lines.push(`${names[i]}: ${v}`);
    });
    if (lines.length) paragraphs.push(lines.join('\n'));
  }
  if (!paragraphs.length)
    throw new KbIngestError('NO_TEXT', 'The CSV file has a header row but no values: add rows and upload it again.');
  return { text: paragraphs.join('\n\n'), title: null };
}
