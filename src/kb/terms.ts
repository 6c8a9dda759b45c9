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
