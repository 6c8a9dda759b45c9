import { STOP_WORDS } from '../llm/extractive-answer';

/** Most terms a question contributes to the full-text query. */
export const MAX_QUERY_TERMS = 16;
const MAX_TERM_LENGTH = 64;

/**
 * The words of a natural-language question as search terms: Unicode letters and digits only,
 * lower-cased, stop words dropped, each once, at most 16. Nothing else survives, so no character
 * of the user's text can act as FTS5 or tsquery syntax. Stemming is left to the index (FTS5's
 * porter tokenizer, PostgreSQL's english configuration), which stems the query the same way.
 */
export function questionTerms(question: string): string[] {
  const words =
    question
      .normalize('NFKC')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? [];
  const terms: string[] = [];
  const seen = new Set<string>();
  for (const word of words) {
    if (word.length > MAX_TERM_LENGTH || STOP_WORDS.has(word) || seen.has(word)) continue;
    seen.add(word);
    terms.push(word);
    if (terms.length === MAX_QUERY_TERMS) break;
  }
  return terms;
}

/** An FTS5 query matching any of the terms: `"refund" OR "policy"`. */
export function fts5OrQuery(terms: readonly string[]): string {
  // Terms hold letters and digits only; quoting makes each a plain phrase whatever FTS5 keyword
  // it may spell (OR, NOT, NEAR).
  return terms.map((t) => `"${t}"`).join(' OR ');
}

/** A tsquery source matching any of the terms: `refund | policy`. */
export function tsqueryOr(terms: readonly string[]): string {
  return terms.join(' | ');
}

/** An FTS5 query matching the chunks that hold every term: `"refund" AND "policy"`. */
export function fts5AndQuery(terms: readonly string[]): string {
  return terms.map((t) => `"${t}"`).join(' AND ');
}

/** A tsquery source matching the chunks that hold every term: `refund & policy`. */
export function tsqueryAnd(terms: readonly string[]): string {
  return terms.join(' & ');
}

/**
 * A term is common when at least this share of the chunks hold it (and at least
 * MIN_COMMON_CHUNKS of them): like a stop word, it says little about which chunk answers.
 */
export const COMMON_TERM_SHARE = 0.05;
/** Below this many chunks holding it, no term counts as common: small knowledge bases keep plain OR matching. */
export const MIN_COMMON_CHUNKS = 500;

/** How many chunks must hold a term before it counts as common, in a knowledge base of `totalChunks`. */
export function commonTermThreshold(totalChunks: number): number {
  return Math.max(MIN_COMMON_CHUNKS, Math.ceil(totalChunks * COMMON_TERM_SHARE));
}

/** One full-text query: the chunks that hold any (`any`) or every (`all`) of the terms. */
export interface TermTier {
  terms: string[];
  mode: 'any' | 'all';
}

/**
 * The full-text queries to try, in order, given how many chunks hold each term (counted up to the
 * common threshold, see `commonTermThreshold`). Retrieval stops at the first tier that finds a chunk.
 *
 * This is inverse-document-frequency weighting applied to matching: a term held by
 * COMMON_TERM_SHARE of the chunks or more would otherwise make most of the corpus a match, all of which
 * must be ranked, and it adds little to a chunk's score anyway (BM25's IDF of a term in 5 % of
 * the chunks is about a third of that of a term in 0.01 %).
 * - Distinctive terms (held by a few chunks, never by none) match on their own, any of them.
 * - Failing those, common terms: first the chunks that hold all of them (the question's words
 *   together), then, if no chunk holds them all, any of them.
 * Terms no chunk holds are left out (they can match nothing).
 */
export function planTermTiers(counts: readonly { term: string; chunks: number }[], threshold: number): TermTier[] {
  const distinctive = counts.filter((c) => c.chunks > 0 && c.chunks < threshold).map((c) => c.term);
  const common = counts.filter((c) => c.chunks >= threshold).map((c) => c.term);
  const tiers: TermTier[] = [];
  if (distinctive.length) tiers.push({ terms: distinctive, mode: 'any' });
  if (common.length > 1) tiers.push({ terms: common, mode: 'all' });
  if (common.length) tiers.push({ terms: common, mode: 'any' });
  return tiers;
}
