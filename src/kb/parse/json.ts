import { KbIngestError } from '../errors';
import { decodeText } from './decode';
import { normalizeText } from './normalize';

/** Nesting below this is kept as JSON text on one line rather than walked (bounded recursion). */
const MAX_DEPTH = 64;

const isContainer = (v: unknown): v is object => typeof v === 'object' && v !== null;

/**
 * `path: value` lines of a JSON value, paths in dot and bracket notation (`items[2].name`). An
 * array of objects or arrays yields one paragraph per element, so each record stays together in
 * a chunk (elements of a top-level array are records of their own: `name`, not `[2].name`). An
 * array of scalars is one line, its values comma-separated. Nulls and empty strings are left
 * out: they say nothing a search could find.
 */
function flatten(value: unknown): string {
  const paragraphs: string[][] = [[]];
  const line = (path: string, text: string) => {
    const v = normalizeText(text).replace(/\n+/g, ' ');
    if (v) (paragraphs.at(-1) as string[]).push(path ? `${path}: ${v}` : v);
  };
  const newParagraph = () => {
    if ((paragraphs.at(-1) as string[]).length) paragraphs.push([]);
  };
  const scalar = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
  const key = (path: string, name: string) => {
    const safe = /^[\p{L}\p{N}_$-]+$/u.test(name) ? name : JSON.stringify(name);
    return path ? `${path}.${safe}` : safe;
  };
  const walk = (v: unknown, path: string, depth: number) => {
    if (v === null || v === '') return;
    if (!isContainer(v)) return line(path, scalar(v));
    if (depth >= MAX_DEPTH) return line(path, JSON.stringify(v));
    if (Array.isArray(v)) {
      if (v.some(isContainer)) {
        newParagraph();
        v.forEach((element, i) => {
          // Elements of a top-level array are records on their own: their paths start afresh.
          walk(element, depth === 0 ? '' : `${path}[${i}]`, depth + 1);
          newParagraph();
        });
      } else {
        const items = v.filter((x) => x !== null && x !== '').map(scalar);
        if (items.length) line(path, items.join(', '));
      }
      return;
    }
    for (const [name, member] of Object.entries(v)) walk(member, key(path, name), depth + 1);
  };
  walk(value, '', 0);
  return paragraphs
    .filter((p) => p.length)
    .map((p) => p.join('\n'))
    .join('\n\n');
}

export function extractJson(bytes: Uint8Array, contentType?: string | null): { text: string; title: string | null } {
  const source = decodeText(bytes, 'JSON file', contentType);
  let value: unknown;
  try {
    value = JSON.parse(source.replace(/^\uFEFF/, ''));
  } catch (err) {
    throw new KbIngestError(
      'MALFORMED',
      `The JSON is malformed: ${(err as Error).message}. Fix the file and upload it again.`,
      {
        cause: err,
      },
    );
  }
  return { text: normalizeText(flatten(value)), title: null };
}
