import { normalizeText } from './parse/normalize';

export interface TableSchema {
  searchableFields: string[];
  metadataFields: string[];
}

/**
 * One chunk for one table row (DECISIONS.md §7: one chunk per row). The content is a
 * `field: value` line per searchable field, in schema order, so the text says what each value
 * is; strings are normalised like extracted text (one line each, no control characters) and
 * other values JSON-encoded. Missing, null and empty values are left out. The metadata holds
 * the row's metadataFields as they are, nested objects and arrays included, for filtering.
 * Null when the row has no searchable text: there is nothing to index.
 */
export function tableRowToChunk(
  item: Record<string, unknown>,
  schema: TableSchema,
): { content: string; metadata: Record<string, unknown> } | null {
  const lines: string[] = [];
  for (const field of schema.searchableFields) {
    if (!Object.hasOwn(item, field)) continue;
    const value = item[field];
    if (value === null || value === undefined) continue;
    const text = normalizeText(typeof value === 'string' ? value : JSON.stringify(value)).replace(/\n+/g, ' ');
    if (text) lines.push(`${normalizeText(field).replace(/\n+/g, ' ')}: ${text}`);
  }
  if (!lines.length) return null;
  const metadata: Record<string, unknown> = {};
  for (const field of schema.metadataFields) {
    if (Object.hasOwn(item, field) && item[field] !== undefined) metadata[field] = item[field];
  }
  return { content: lines.join('\n'), metadata };
}
