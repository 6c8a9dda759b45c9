/**
 * Text both engines store as sent. PostgreSQL refuses U+0000 in text and jsonb, and text that is
 * not well-formed Unicode (a lone surrogate, possible in JSON strings): such a write would fail
 * with a 500 instead of the request failing with a 400, so requests are checked up front.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what this looks for.
const unstorable = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const UNSTORABLE_TEXT_MESSAGE = 'must be text without NUL characters or lone surrogates';

export function isStorableText(text: string): boolean {
  return !unstorable.test(text);
}

/**
 * The path (dot-separated, from `value`) of the first string or object key in a JSON value that
 * cannot be stored, or null when every one can.
 */
export function unstorablePathOf(value: unknown, path: (string | number)[] = []): (string | number)[] | null {
  if (typeof value === 'string') return isStorableText(value) ? null : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorablePathOf(value[i], [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (value && typeof value === 'object') {
    for (const [key, member] of Object.entries(value)) {
      if (!isStorableText(key)) return [...path, key];
      const found = unstorablePathOf(member, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}
