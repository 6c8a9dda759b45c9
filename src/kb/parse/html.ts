import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import { decodeHtml } from './decode';
import { normalizeText } from './normalize';

// Elements whose content is never text a reader sees.
const SKIPPED = new Set([
  'SCRIPT',
  'STYLE',
  'NOSCRIPT',
  'TEMPLATE',
  'SVG',
  'MATH',
  'CANVAS',
  'IFRAME',
  'OBJECT',
  'EMBED',
  'HEAD',
  'SELECT',
  'BUTTON',
]);
// Boundaries between paragraphs: a blank line before and after.
const PARAGRAPH = new Set([
  'P',
  'DIV',
  'SECTION',
  'ARTICLE',
  'MAIN',
  'ASIDE',
  'HEADER',
  'FOOTER',
  'NAV',
  'BLOCKQUOTE',
  'PRE',
  'FIGURE',
  'FIGCAPTION',
  'TABLE',
  'UL',
  'OL',
  'DL',
  'H1',
  'H2',
  'H3',
  'H4',
  'H5',
  'H6',
  'HR',
  'ADDRESS',
  'DETAILS',
  'SUMMARY',
  'FORM',
  'FIELDSET',
]);
// Boundaries between lines of one paragraph.
const LINE = new Set(['BR', 'LI', 'DT', 'DD', 'TR', 'CAPTION', 'OPTION']);
// Separated from their neighbours by a space even where the markup has none.
const CELL = new Set(['TD', 'TH']);

/**
 * Visible text of a DOM subtree with its block structure kept: paragraphs and headings become
 * paragraphs, list items and table rows lines (Node.textContent runs "<li>a</li><li>b</li>"
 * together as "ab").
 */
function blockText(root: Node): string {
  const out: string[] = [];
  let pending = ''; // the strongest break asked for since the last text
  const brk = (s: '\n' | '\n\n') => {
    if (out.length > 0 && pending.length < s.length) pending = s;
  };
  const visit = (node: Node, pre: boolean) => {
    if (node.nodeType === 3) {
      const raw = node.nodeValue ?? '';
      const text = pre ? raw : raw.replace(/\s+/g, ' ');
      if (!text.trim() && !pre) {
        if (text && out.length > 0 && !pending) out.push(' ');
        return;
      }
      if (pending) {
        out.push(pending);
        pending = '';
      }
      out.push(text);
      return;
    }
    if (node.nodeType !== 1 && node.nodeType !== 9 && node.nodeType !== 11) return;
    const tag = node.nodeType === 1 ? (node as Element).tagName.toUpperCase() : '';
    if (SKIPPED.has(tag)) return;
    if (node.nodeType === 1 && (node as Element).getAttribute('hidden') !== null) return;
    const isParagraph = PARAGRAPH.has(tag);
    const isLine = LINE.has(tag);
    if (isParagraph) brk('\n\n');
    else if (isLine) brk('\n');
    else if (CELL.has(tag) && out.length > 0 && !pending) out.push(' ');
    if (tag === 'IMG') {
      // Alt text is the page's own description of an image; keep it only when it is prose.
      const alt = (node as Element).getAttribute('alt')?.trim();
      if (alt && /\s/.test(alt)) {
        if (pending) {
          out.push(pending);
          pending = '';
        }
        out.push(alt);
      }
    }
    for (let child = node.firstChild; child; child = child.nextSibling) visit(child, pre || tag === 'PRE');
    if (isParagraph) brk('\n\n');
    else if (isLine && tag !== 'BR') brk('\n');
  };
  visit(root, false);
  return out.join('');
}

/**
 * linkedom builds the tree as written, without the HTML parser's repairs: a fragment such as
 * `<p>Hi</p>` (or a page without `<html>`/`<body>`) ends up outside any body, where neither
 * Readability nor the body fallback sees it. Give such input the document skeleton it implies.
 */
function asDocument(html: string): string {
  const hasHtml = /<html[\s>]/i.test(html);
  const hasBody = /<body[\s>]/i.test(html);
  if (hasHtml && hasBody) return html;
  const withoutRoot = html.replace(/<!doctype[^>]*>|<\/?html(?:\s[^>]*)?>/gi, '');
  if (hasBody) return `<!doctype html><html>${withoutRoot}</html>`;
  const head = /<head[\s>][\s\S]*?<\/head\s*>/i.exec(withoutRoot);
  const title = head ? null : /<title[\s>][\s\S]*?<\/title\s*>/i.exec(withoutRoot);
  const taken = head ?? title;
  const rest = taken
    ? withoutRoot.slice(0, taken.index) + withoutRoot.slice(taken.index + taken[0].length)
    : withoutRoot;
  return `<!doctype html><html>${head ? head[0] : `<head>${title?.[0] ?? ''}</head>`}<body>${rest}</body></html>`;
}

/**
 * Main text of an HTML page: @mozilla/readability (Firefox's reader view) drops navigation,
 * footers, sidebars and ads; linkedom gives it a DOM without executing scripts or loading
 * anything. When Readability finds no article (a short page, a list of links), the body's
 * visible text is used instead.
 */
export function extractHtml(
  bytes: Uint8Array,
  opts: { url?: string; contentType?: string | null } = {},
): { text: string; title: string | null } {
  const html = asDocument(decodeHtml(bytes, opts.contentType));
  const { document } = parseHTML(html);
  const pageTitle = normalizeText(document.title ?? '') || null;
  const body = document.body as Node | null;
  const fallback = () => {
    // Readability modifies the document it reads, so the fallback reads a fresh copy.
    const fresh = parseHTML(html).document;
    const root = (fresh.body ?? fresh.documentElement) as Node | null;
    return normalizeText(root ? blockText(root) : '');
  };
  let text = '';
  let title = pageTitle;
  if (body) {
    // The types of linkedom's document are not the DOM's; at run time it is the DOM Readability
    // needs (its tests run on linkedom).
    const reader = new Readability<Node>(document as unknown as Document, { serializer: (node) => node });
    let article: ReturnType<typeof reader.parse> = null;
    try {
      article = reader.parse();
    } catch {
      article = null; // a page Readability cannot walk still has body text
    }
    if (article?.content) text = normalizeText(blockText(article.content));
    if (article?.title) title = normalizeText(article.title) || title;
  }
  if (!text) text = fallback();
  // Readability removes a heading that repeats the title; put the title back at the top so a
  // search for it finds the start of the page.
  if (text && title && !text.startsWith(title)) text = `${title}\n\n${text}`;
  return { text, title };
}
