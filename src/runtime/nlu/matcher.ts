import { type EntitySpec, extractEntity } from './entities';

/**
 * Intent matching by similarity to sample utterances, with no model to download: each utterance
 * and the user's words become TF-IDF vectors over light-stemmed word tokens, compared by cosine,
 * blended with character-trigram overlap so that typos still score. A `{entity}` placeholder in
 * an utterance matches any value of that entity in the user's words, and a word no utterance has
 * is read as the nearest one that does (one or two typing errors). The confidence of an intent is
 * its best utterance's score, between 0 and 1.
 */

export interface IntentDefinition {
  name: string;
  utterances: string[];
  /** Names of the entities the intent's utterances use as placeholders. */
  entities?: string[];
}

export interface MatchedEntity {
  name: string;
  value: string | number;
}

export interface IntentMatch {
  name: string;
  confidence: number;
  entities: MatchedEntity[];
}

export interface IntentMatcher {
  /** Every intent with a score above zero, best first. */
  rank(text: string, now?: Date): IntentMatch[];
}

const stopWords = new Set([
  'a',
  'an',
  'the',
  'is',
  'are',
  'am',
  'be',
  'to',
  'of',
  'i',
  'me',
  'my',
  'you',
  'your',
  'it',
  'its',
  'please',
  'can',
  'could',
  'would',
  'do',
  'does',
  'for',
  'on',
  'in',
  'at',
  'and',
  'or',
  's',
  'just',
  'hi',
  'hey',
]);

/** Word weight in the blend; the rest goes to character trigrams. */
const wordWeight = 0.75;

function normalize(text: string): string {
  return text.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().replace(/['’]/g, ' ');
}

function stem(token: string): string {
  if (token.length <= 4 || token.startsWith('__')) return token;
  if (token.endsWith('ies')) return `${token.slice(0, -3)}y`;
  if (token.endsWith('ing') && token.length > 5) return token.slice(0, -3);
  if (token.endsWith('ed') && token.length > 5) return token.slice(0, -2);
  if (token.endsWith('es') && token.length > 5) return token.slice(0, -2);
  if (token.endsWith('s') && !token.endsWith('ss')) return token.slice(0, -1);
  return token;
}

function tokenize(normalized: string): string[] {
  return (normalized.match(/__ent_[a-z0-9_]+__|[\p{L}\p{N}]+/gu) ?? []).filter((t) => !stopWords.has(t)).map(stem);
}

function trigrams(tokens: string[]): Set<string> {
  const text = ` ${tokens.join(' ')} `;
  const grams = new Set<string>();
  for (let i = 0; i + 3 <= text.length; i++) grams.add(text.slice(i, i + 3));
  return grams;
}

function dice(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  let shared = 0;
  for (const g of a) if (b.has(g)) shared++;
  return (2 * shared) / (a.size + b.size);
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps), stopping past `max`. */
function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let previous2: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_v, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, previous2[j - 2]! + 1);
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin > max) return max + 1;
    previous2 = previous;
    previous = current;
  }
  return previous[b.length]!;
}

type Vector = Map<string, number>;

function norm(v: Vector): number {
  let sum = 0;
  for (const w of v.values()) sum += w * w;
  return Math.sqrt(sum);
}

function cosine(a: Vector, b: Vector): number {
  const na = norm(a);
  const nb = norm(b);
  if (na === 0 || nb === 0) return 0;
  let dot = 0;
  for (const [t, w] of a) {
    const other = b.get(t);
    if (other !== undefined) dot += w * other;
  }
  return dot / (na * nb);
}

interface PreparedUtterance {
  tokens: string[];
  vector: Vector;
  grams: Set<string>;
}

interface PreparedIntent {
  name: string;
  entities: { name: string; spec: EntitySpec }[];
  utterances: PreparedUtterance[];
}

function placeholderToken(entity: string): string {
  return `__ent_${entity.toLowerCase().replace(/[^a-z0-9_]/g, '_')}__`;
}

export function createIntentMatcher(
  intents: readonly IntentDefinition[],
  entitySpecs: ReadonlyMap<string, EntitySpec>,
): IntentMatcher {
  // Utterance tokens, with placeholders turned into one token per entity.
  const tokenized = intents.map((intent) =>
    intent.utterances.map((u) =>
      tokenize(
        normalize(u.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => ` ${placeholderToken(name)} `)),
      ),
    ),
  );
  const documentFrequency = new Map<string, number>();
  let documents = 0;
  for (const utterances of tokenized) {
    for (const tokens of utterances) {
      documents++;
      for (const t of new Set(tokens)) documentFrequency.set(t, (documentFrequency.get(t) ?? 0) + 1);
    }
  }
  // Words no utterance has weigh the most: they make the user's words less like any intent.
  const unseenIdf = Math.log(1 + Math.max(1, documents));
  const idf = (token: string) => {
    const df = documentFrequency.get(token);
    return df ? Math.log(1 + documents / df) : unseenIdf;
  };
  // Typos: a word no utterance has becomes the closest word that one has, within 1 edit (2 for long words).
  const vocabulary = [...documentFrequency.keys()].filter((t) => !t.startsWith('__'));
  const corrections = new Map<string, string>();
  const correct = (token: string): string => {
    if (documentFrequency.has(token) || token.length < 4 || token.startsWith('__')) return token;
    const cached = corrections.get(token);
    if (cached !== undefined) return cached;
    const max = token.length >= 8 ? 2 : 1;
    let best = token;
    let bestDistance = max + 1;
    for (const word of vocabulary) {
      const d = editDistance(token, word, max);
      if (d < bestDistance) {
        best = word;
        bestDistance = d;
      }
    }
    if (corrections.size > 10_000) corrections.clear();
    corrections.set(token, best);
    return best;
  };
  const vectorize = (tokens: string[]): Vector => {
    const counts = new Map<string, number>();
    for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
    const v: Vector = new Map();
    for (const [t, c] of counts) v.set(t, (1 + Math.log(c)) * idf(t));
    return v;
  };
  const prepared: PreparedIntent[] = intents.map((intent, i) => ({
    name: intent.name,
    entities: (intent.entities ?? []).flatMap((name) => {
      const spec = entitySpecs.get(name);
      return spec ? [{ name, spec }] : [];
    }),
    utterances: tokenized[i]!.map((tokens) => ({ tokens, vector: vectorize(tokens), grams: trigrams(tokens) })),
  }));

  return {
    rank(text, now = new Date()) {
      const results: IntentMatch[] = [];
      const plainTokens = tokenize(normalize(text)).map(correct);
      for (const intent of prepared) {
        // The user's words with this intent's entities replaced by their placeholder tokens.
        let substituted = text;
        const entities: MatchedEntity[] = [];
        for (const { name, spec } of intent.entities) {
          const found = extractEntity(substituted, spec, now);
          if (!found) continue;
          entities.push({ name, value: found.value });
          substituted = `${substituted.slice(0, found.start)} ${placeholderToken(name)} ${substituted.slice(found.end)}`;
        }
        const tokens = entities.length ? tokenize(normalize(substituted)).map(correct) : plainTokens;
        const vector = vectorize(tokens);
        const grams = trigrams(tokens);
        let best = 0;
        for (const u of intent.utterances) {
          const score =
            tokens.length > 0 && tokens.join(' ') === u.tokens.join(' ')
              ? 1
              : wordWeight * cosine(vector, u.vector) + (1 - wordWeight) * dice(grams, u.grams);
          if (score > best) best = score;
        }
        if (best > 0) results.push({ name: intent.name, confidence: Math.round(best * 10_000) / 10_000, entities });
      }
      return results.sort((a, b) => b.confidence - a.confidence || a.name.localeCompare(b.name));
    },
  };
}
