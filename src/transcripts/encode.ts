/**
 * `encode=true` (DECISIONS.md §5): escapes `& < > " '` in every string inside a response, for
 * clients that drop transcript text into HTML. Keys are left alone; only values are text.
 */
const entities: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => entities[c]!);
}

export function encodeStrings<T>(value: T): T {
  if (typeof value === 'string') return escapeHtml(value) as T;
  if (Array.isArray(value)) return value.map((v) => encodeStrings(v)) as T;
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = encodeStrings(v);
    return out as T;
  }
  return value;
}
