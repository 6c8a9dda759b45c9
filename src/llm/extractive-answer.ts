import type { ChatMessage } from './types';

/**
 * The built-in provider's whole "reasoning": pick the sentences of the context that share the
 * most distinctive words with the question. No model, no randomness: the same messages always
 * give the same answer, on every machine with the same Node version (sentence splitting uses
 * ICU through Intl.Segmenter).
 */

export const NO_CONTEXT_ANSWER =
  'The built-in provider is not a language model: it answers only with sentences from the context it is given, and it was given none.';
export const NO_MATCH_ANSWER =
  'The built-in provider is not a language model, and no sentence of the context it was given matches the question.';

export interface ExtractiveAnswerOptions {
  /** Most sentences in an answer (default 3). */
  maxSentences?: number;
}

// Function words and question words: they match everywhere and so say nothing about relevance.
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between both but by ' +
    'can could did do does doing down during each few for from further had has have having he her here hers herself him ' +
    'himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other ' +
    'our ours ourselves out over own please same she should so some such than that the their theirs them themselves then ' +
    'there these they this those through to too under until up very was we were what when where which while who whom why ' +
    'will with would you your yours yourself yourselves tell know let may might must shall also'
  ).split(' '),
);

/** Lower-cased words without accents, stop words dropped, crudely stemmed (plurals, -ing, -ed). */
export function termsOf(text: string): string[] {
  const words = text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .match(/[\p{L}\p{N}]+/gu);
  if (!words) return [];
  const terms: string[] = [];
  for (const word of words) {
    if (STOP_WORDS.has(word)) continue;
    terms.push(stem(word));
  }
  return terms;
}

function stem(word: string): string {
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`;
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ed')) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss')) return word.slice(0, -1);
  return word;
}

const sentenceSegmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** Sentences of a text; line breaks end sentences too (lists, headings, table rows). */
export function sentencesOf(text: string): string[] {
  const sentences: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    for (const { segment } of sentenceSegmenter.segment(line)) {
      const sentence = segment.replace(/\s+/g, ' ').trim();
      if (/[\p{L}\p{N}]/u.test(sentence)) sentences.push(sentence);
    }
  }
  return sentences;
}

/**
 * The question is the last user message (the last message when there is none); the context is
 * every other message, in order. Callers put retrieved passages or instructions there.
 */
export function splitQuestionAndContext(messages: readonly ChatMessage[]): { question: string; context: string[] } {
  let questionAt = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === 'user') {
      questionAt = i;
      break;
    }
  }
  if (questionAt === -1) questionAt = messages.length - 1;
  return {
    question: messages[questionAt]?.content ?? '',
    context: messages.filter((_, i) => i !== questionAt).map((m) => m.content),
  };
}

export function answerExtractively(messages: readonly ChatMessage[], opts: ExtractiveAnswerOptions = {}): string {
  const maxSentences = opts.maxSentences ?? 3;
  const { question, context } = splitQuestionAndContext(messages);

  const seen = new Set<string>();
  const sentences: { text: string; terms: Set<string> }[] = [];
  for (const block of context) {
    for (const text of sentencesOf(block)) {
      // Overlapping chunks repeat sentences; one copy is enough.
      if (seen.has(text)) continue;
      seen.add(text);
      sentences.push({ text, terms: new Set(termsOf(text)) });
    }
  }
  if (sentences.length === 0) return NO_CONTEXT_ANSWER;

  const questionTerms = new Set(termsOf(question));
  // Inverse document frequency over the context's sentences: a word found in every sentence is
  // weak evidence, a rare one strong. ln(1 + N/df) stays positive, so any shared word counts.
  const documentFrequency = new Map<string, number>();
  for (const s of sentences) {
    for (const term of s.terms) {
      if (questionTerms.has(term)) documentFrequency.set(term, (documentFrequency.get(term) ?? 0) + 1);
    }
  }
  const weight = (term: string) => Math.log(1 + sentences.length / (documentFrequency.get(term) ?? 1));

  const scored = sentences
    .map((s, position) => {
      let score = 0;
      for (const term of questionTerms) if (s.terms.has(term)) score += weight(term);
      return { text: s.text, position, score };
    })
    .filter((s) => s.score > 0)
    // Best first; equal scores keep the context's order, so the result never depends on sort stability.
    .sort((a, b) => b.score - a.score || a.position - b.position);

  const best = scored[0];
  if (!best) return NO_MATCH_ANSWER;
  // Sentences far weaker than the best one are noise, not support.
  const chosen = scored.slice(0, maxSentences).filter((s) => s.score >= best.score * 0.5);
  return chosen
    .sort((a, b) => a.position - b.position)
    .map((s) => s.text)
    .join(' ');
}

/** Word-sized pieces (a word and the space after it) whose concatenation is the text. */
export function wordPieces(text: string): string[] {
  return text.match(/\s*\S+\s*/gy) ?? [];
}
