/**
 * Entity extraction: finds a typed value (number, e-mail address, date, a pattern, or one of a
 * list of values) in a user's words. Used by capture steps and by intent matching, which treats
 * an extracted entity as matching a `{entity}` placeholder of a sample utterance.
 */

export type EntityType = 'number' | 'email' | 'date' | 'regex' | 'list';

export interface EntitySpec {
  type: EntityType;
  /** regex: the pattern; group 1, when there is one, is the value. */
  pattern?: string;
  /** regex: flags, among i, m, s, u. */
  flags?: string;
  /** list: the canonical values and their synonyms. */
  values?: { value: string; synonyms?: string[] }[];
}

export interface ExtractedEntity {
  value: string | number;
  /** Where the entity was found, so matching can replace it. */
  start: number;
  end: number;
}

/** Regular expressions from programs run on at most this many characters of user input. */
const maxRegexInput = 1000;

const numberWords: Record<string, number> = {
  zero: 0,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  thirteen: 13,
  fourteen: 14,
  fifteen: 15,
  sixteen: 16,
  seventeen: 17,
  eighteen: 18,
  nineteen: 19,
  twenty: 20,
  thirty: 30,
  forty: 40,
  fifty: 50,
  sixty: 60,
  seventy: 70,
  eighty: 80,
  ninety: 90,
  hundred: 100,
};

const months = [
  'january',
  'february',
  'march',
  'april',
  'may',
  'june',
  'july',
  'august',
  'september',
  'october',
  'november',
  'december',
];

function isoDate(year: number, month: number, day: number): string | null {
  const date = new Date(Date.UTC(year, month - 1, day));
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return null;
  return date.toISOString().slice(0, 10);
}

function extractNumber(text: string): ExtractedEntity | null {
  const digits = /(?<![\p{L}\d.])-?\d+(?:[.,]\d+)?(?![\p{L}\d])/u.exec(text);
  if (digits) {
    return { value: Number(digits[0].replace(',', '.')), start: digits.index, end: digits.index + digits[0].length };
  }
  const words = new RegExp(`\\b(${Object.keys(numberWords).join('|')})\\b`, 'i').exec(text);
  if (words)
    return { value: numberWords[words[1]!.toLowerCase()]!, start: words.index, end: words.index + words[0].length };
  return null;
}

function extractEmail(text: string): ExtractedEntity | null {
  const m = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/.exec(text);
  return m ? { value: m[0], start: m.index, end: m.index + m[0].length } : null;
}

function extractDate(text: string, now: Date): ExtractedEntity | null {
  const iso = /\b(\d{4})-(\d{2})-(\d{2})\b/.exec(text);
  if (iso) {
    const value = isoDate(Number(iso[1]), Number(iso[2]), Number(iso[3]));
    if (value) return { value, start: iso.index, end: iso.index + iso[0].length };
  }
  const relative = /\b(today|tomorrow|yesterday)\b/i.exec(text);
  if (relative) {
    const offset = { today: 0, tomorrow: 1, yesterday: -1 }[relative[1]!.toLowerCase() as 'today'];
    const date = new Date(now.getTime() + offset * 86_400_000);
    return { value: date.toISOString().slice(0, 10), start: relative.index, end: relative.index + relative[0].length };
  }
  const monthNames = months.join('|');
  // "March 3", "March 3rd, 2027", "3 March 2027"
  const monthFirst = new RegExp(`\\b(${monthNames})\\s+(\\d{1,2})(?:st|nd|rd|th)?(?:,?\\s+(\\d{4}))?\\b`, 'i').exec(
    text,
  );
  const dayFirst = new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+(${monthNames})(?:,?\\s+(\\d{4}))?\\b`, 'i').exec(text);
  const m = monthFirst ?? dayFirst;
  if (m) {
    const [monthName, day] = monthFirst ? [m[1]!, m[2]!] : [m[2]!, m[1]!];
    const year = m[3] ? Number(m[3]) : now.getUTCFullYear();
    const value = isoDate(year, months.indexOf(monthName.toLowerCase()) + 1, Number(day));
    if (value) return { value, start: m.index, end: m.index + m[0].length };
  }
  return null;
}

function extractRegex(text: string, spec: EntitySpec): ExtractedEntity | null {
  if (!spec.pattern) return null;
  const input = text.slice(0, maxRegexInput);
  const m = new RegExp(spec.pattern, (spec.flags ?? '').replace(/[gy]/g, '')).exec(input);
  if (!m) return null;
  return { value: m[1] ?? m[0], start: m.index, end: m.index + m[0].length };
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function extractListValue(text: string, spec: EntitySpec): ExtractedEntity | null {
  let best: ExtractedEntity | null = null;
  for (const entry of spec.values ?? []) {
    for (const phrase of [entry.value, ...(entry.synonyms ?? [])]) {
      const m = new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegex(phrase)}(?![\\p{L}\\p{N}])`, 'iu').exec(text);
      // The longest phrase wins ("new york city" over "york").
      if (m && (!best || m[0].length > best.end - best.start)) {
        best = { value: entry.value, start: m.index, end: m.index + m[0].length };
      }
    }
  }
  return best;
}

/** Finds the first value of `spec` in `text`, or null. */
export function extractEntity(text: string, spec: EntitySpec, now: Date = new Date()): ExtractedEntity | null {
  switch (spec.type) {
    case 'number':
      return extractNumber(text);
    case 'email':
      return extractEmail(text);
    case 'date':
      return extractDate(text, now);
    case 'regex':
      return extractRegex(text, spec);
    case 'list':
      return extractListValue(text, spec);
  }
}

/** A problem with an entity definition (a regular expression that does not compile), or null. */
export function checkEntitySpec(spec: EntitySpec): string | null {
  if (spec.type === 'regex') {
    try {
      new RegExp(spec.pattern ?? '', spec.flags ?? '');
    } catch (err) {
      return `invalid regular expression: ${(err as Error).message}`;
    }
  }
  return null;
}
