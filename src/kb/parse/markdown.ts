import { decodeText } from './decode';
import { normalizeText } from './normalize';

/**
 * Markdown stays as written: its markup is light, reads well in an answer's sources, and
 * headings and list markers help search more than they hurt. The title is the front matter's
 * `title:` or the first level-1 heading.
 */
export function extractMarkdown(
  bytes: Uint8Array,
  contentType?: string | null,
): { text: string; title: string | null } {
  const text = normalizeText(decodeText(bytes, 'Markdown file', contentType));
  return { text, title: markdownTitle(text) };
}

function markdownTitle(text: string): string | null {
  const frontMatter = /^---\n([\s\S]*?)\n---(?:\n|$)/.exec(text);
  const fromFrontMatter = frontMatter && /^title: *["']?(.+?)["']? *$/m.exec(frontMatter[1] as string);
  if (fromFrontMatter) return fromFrontMatter[1] as string;
  const atx = /^# +(.+?)(?: +#+)? *$/m.exec(text);
  if (atx) return atx[1] as string;
  const setext = /^(\S.*)\n=+ *$/m.exec(text);
  return setext ? (setext[1] as string) : null;
}
