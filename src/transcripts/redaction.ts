import {
  type CountryCode,
  findPhoneNumbersInText,
  isSupportedCountry,
  type NumberFound,
  type PhoneNumber,
} from 'libphonenumber-js/max';
import { RE2JS } from 're2js';
import { validationError } from '../lib/errors';

/**
 * Redaction of transcript logs (DECISIONS.md §5, docs/transcripts.md "Redaction and retention").
 * Every string inside a log's data is scanned for e-mail addresses, payment card numbers, phone
 * numbers and the project's own patterns; matches are replaced by a placeholder. Keys and
 * non-string values are left alone.
 *
 * The originals are purged after the retention period, so a false positive destroys data: each
 * detector confirms what it finds instead of taking any run of digits.
 * - Phone numbers are found and validated by libphonenumber-js (full metadata: number plans per
 *   region, not only lengths). A number in international form (`+44 20 7946 0958`, `0044 …`) is
 *   redacted when it is valid for its country. A number in national form is read in each of the
 *   configured regions and redacted when it is valid there *and* is written the way that region
 *   writes phone numbers: with the region's trunk prefix (`020 7946 0958`, `0151 23456789`), or in
 *   exactly the region's national grouping (`(415) 555-2671`), or right after a word that announces a
 *   phone number (`call me on 4155552671`). Dates, IP addresses and amounts are never phone numbers.
 * - Payment cards: a known issuer's prefix, one of that issuer's lengths and the Luhn checksum.
 * - E-mail addresses: RFC 5322 dot-atom local part, domain of labels and a letter TLD.
 *
 * Safety against catastrophic backtracking:
 * - the built-in patterns run on V8's engine but have bounded repetitions only, so the work per
 *   start position is bounded and a scan is linear in the text (libphonenumber-js bounds its
 *   candidates the same way);
 * - project patterns run on RE2JS, a port of RE2 whose matching time is linear in the input for
 *   every pattern (it has no backreferences or lookaround, which is what makes that possible), and
 *   are capped at 500 characters, 20 per project.
 */

export const EMAIL_PLACEHOLDER = '[email]';
export const PHONE_PLACEHOLDER = '[phone]';
export const CARD_PLACEHOLDER = '[card]';
export const PATTERN_PLACEHOLDER = '[redacted]';

/** The regions whose national phone formats are recognised unless TRANSCRIPT_PHONE_REGIONS says otherwise. */
export const DEFAULT_PHONE_REGIONS: readonly CountryCode[] = [
  'US',
  'GB',
  'DE',
  'FR',
  'ES',
  'IT',
  'NL',
  'IN',
  'BR',
  'AU',
];

/** Parses a comma-separated list of ISO 3166-1 alpha-2 regions, or says which entry is unknown. */
export function parsePhoneRegions(
  value: string,
): { ok: true; regions: CountryCode[] } | { ok: false; message: string } {
  const regions: CountryCode[] = [];
  for (const raw of value.split(',')) {
    const code = raw.trim().toUpperCase();
    if (!code) continue;
    if (!isSupportedCountry(code))
      return { ok: false, message: `${raw.trim()} is not a region with a phone numbering plan` };
    if (!regions.includes(code)) regions.push(code);
  }
  return { ok: true, regions };
}

// RFC 5322 dot-atom local part and domain labels, all with bounded lengths (RFC 5321 limits), so no
// unbounded backtracking; not inside a longer run of address characters.
const emailPattern =
  /(?<![A-Za-z0-9!#$%&'*+/=?^_`{|}~.-])[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,64}(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,64}){0,8}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}(?:[A-Za-z]{2,24}|xn--[A-Za-z0-9-]{1,59})(?![A-Za-z0-9-])/g;

// 12 to 19 digits, optionally grouped by single spaces or dashes, not inside a longer number.
const cardCandidate = /(?<![\d.,-])\d(?:[ -]?\d){11,18}(?![\d]|[.,]\d)/g;

interface CardIssuer {
  name: string;
  /** Inclusive prefix ranges, compared on the first `from.length` digits. */
  prefixes: readonly (readonly [from: string, to: string])[];
  lengths: readonly number[];
}

/** Issuer identification numbers and lengths of the card networks (ISO/IEC 7812 registrations). */
const cardIssuers: readonly CardIssuer[] = [
  { name: 'visa', prefixes: [['4', '4']], lengths: [13, 16, 19] },
  {
    name: 'mastercard',
    prefixes: [
      ['51', '55'],
      ['2221', '2720'],
    ],
    lengths: [16],
  },
  {
    name: 'amex',
    prefixes: [
      ['34', '34'],
      ['37', '37'],
    ],
    lengths: [15],
  },
  {
    name: 'discover',
    prefixes: [
      ['6011', '6011'],
      ['644', '649'],
      ['65', '65'],
      ['622126', '622925'],
    ],
    lengths: [16, 17, 18, 19],
  },
  { name: 'jcb', prefixes: [['3528', '3589']], lengths: [16, 17, 18, 19] },
  {
    name: 'diners',
    prefixes: [
      ['300', '305'],
      ['3095', '3095'],
      ['36', '36'],
      ['38', '39'],
    ],
    lengths: [14, 15, 16, 17, 18, 19],
  },
  {
    name: 'unionpay',
    prefixes: [
      ['62', '62'],
      ['81', '81'],
    ],
    lengths: [16, 17, 18, 19],
  },
  {
    name: 'maestro',
    prefixes: [
      ['50', '50'],
      ['56', '59'],
      ['6304', '6304'],
      ['6759', '6759'],
      ['6761', '6763'],
    ],
    lengths: [12, 13, 14, 15, 16, 17, 18, 19],
  },
  { name: 'mir', prefixes: [['2200', '2204']], lengths: [16, 17, 18, 19] },
];

/** The card network whose prefix and length the digits have, if any. */
export function cardIssuerOf(digits: string): string | undefined {
  for (const issuer of cardIssuers) {
    if (!issuer.lengths.includes(digits.length)) continue;
    for (const [from, to] of issuer.prefixes) {
      const head = digits.slice(0, from.length);
      if (head >= from && head <= to) return issuer.name;
    }
  }
  return undefined;
}

/** The Luhn checksum that every payment card number satisfies (and most random digit runs do not). */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** A payment card number: a known issuer's prefix and length, and a valid Luhn checksum. */
export function isCardNumber(candidate: string): boolean {
  const digits = candidate.replace(/[ -]/g, '');
  return cardIssuerOf(digits) !== undefined && luhnValid(digits);
}

// Shapes that are never phone numbers, whatever a numbering plan allows.
const notPhoneShapes = [
  /^\d{4}[-./]\d{1,2}[-./]\d{1,2}$/, // 2026-01-02, 2026.01.02
  /^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$/, // 02/01/2026, 02.01.26
  /^\d{1,3}(?:\.\d{1,3}){3}$/, // an IPv4 address
  /^\d+[.,]\d{1,2}$/, // an amount: 1234567.89
  /^\d{1,3}(?:[,.\u00a0 ]\d{3})+(?:[.,]\d{1,2})?$/, // an amount with thousands separators: 1,234,567.89
];
// Right before the number: a currency sign, or part of a dotted or dashed run (versions, UUIDs, IPs).
const notPhoneBefore = /(?:[$€£¥₹]\s?|[\d\p{L}][.:/-]|[.:/-]\d)$/u;
const notPhoneAfter = /^(?:[.:/-][\d\p{L}]|\s?%)/u;
// Words that announce a phone number, in a few languages, shortly before it.
const phoneCue =
  /(?:phone|tel(?:ephone|efon|éfono|efone)?|call|ring|mobile|cell|whats\s?app|sms|text\s+me|fax|contact|reach\s+me|handy|anrufen|rufnummer|portable|appel(?:er|ez)?|celular|móvil|cellulare|numéro)\b[^\d\n]{0,24}$/iu;

/** An ISBN written with its hyphens (the last group is the one check character) and a valid checksum. */
function isHyphenatedIsbn(raw: string): boolean {
  if (!/^\d{1,5}-\d{1,7}-\d{1,7}-[\dX]$|^97[89]-\d{1,5}-\d{1,7}-\d{1,7}-\d$/.test(raw)) return false;
  const chars = raw.replace(/-/g, '');
  if (chars.length === 10) {
    let sum = 0;
    for (let i = 0; i < 10; i++) sum += (10 - i) * (chars[i] === 'X' ? 10 : Number(chars[i]));
    return sum % 11 === 0;
  }
  if (chars.length === 13) {
    let sum = 0;
    for (let i = 0; i < 13; i++) sum += (i % 2 ? 3 : 1) * Number(chars[i]);
    return sum % 10 === 0;
  }
  return false;
}

function digitsOf(text: string): string {
  return text.replace(/\D/g, '');
}

interface Span {
  start: number;
  end: number;
}

/** The spans of `text` that are phone numbers, per the rules in the header. */
export function findPhoneNumbers(text: string, regions: readonly CountryCode[]): Span[] {
  const spans: Span[] = [];
  const seen = new Set<string>();
  const consider = (found: NumberFound, region: CountryCode | undefined) => {
    const key = `${found.startsAt}:${found.endsAt}`;
    if (seen.has(key)) return;
    const raw = text.slice(found.startsAt, found.endsAt);
    const number = found.number;
    if (!number.isValid()) return;
    const before = text.slice(Math.max(0, found.startsAt - 40), found.startsAt);
    const after = text.slice(found.endsAt, found.endsAt + 3);
    // Written with an international prefix: the country is explicit, validity alone decides.
    const international = raw.startsWith('+') || /^(?:00|011)/.test(digitsOf(raw));
    if (!international) {
      if (notPhoneShapes.some((shape) => shape.test(raw)) || isHyphenatedIsbn(raw)) return;
      if (/\bISBN(?:-1[03])?:?\s*$/i.test(before)) return;
      if (notPhoneBefore.test(before) || notPhoneAfter.test(after)) return;
      if (!writtenAsPhoneNumber(raw, number, region) && !phoneCue.test(before)) return;
    }
    seen.add(key);
    spans.push({ start: found.startsAt, end: found.endsAt });
  };
  for (const found of findPhoneNumbersInText(text)) consider(found, undefined);
  for (const region of regions) {
    for (const found of findPhoneNumbersInText(text, { defaultCountry: region })) {
      consider(found, region);
    }
  }
  return spans;
}

/**
 * Whether a national-form number is written the way its region writes phone numbers: with the
 * trunk prefix that national dialling needs (the digits written are more than the national number),
 * or grouped exactly as the region's national format groups it.
 */
function writtenAsPhoneNumber(raw: string, number: PhoneNumber, region: CountryCode | undefined): boolean {
  const written = digitsOf(raw);
  if (region !== 'US' && number.countryCallingCode !== '1' && written.length > number.nationalNumber.length)
    return true;
  const groups = raw.split(/[^\d]+/).filter(Boolean);
  if (groups.length < 2) return false;
  const formatted = number
    .formatNational()
    .split(/[^\d]+/)
    .filter(Boolean);
  return groups.length === formatted.length && groups.every((g, i) => g === formatted[i]);
}

function replaceSpans(text: string, spans: Span[], placeholder: string): string {
  if (spans.length === 0) return text;
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  let out = '';
  let at = 0;
  for (const span of spans) {
    if (span.start < at) continue; // inside a span already replaced
    out += text.slice(at, span.start) + placeholder;
    at = span.end;
  }
  return out + text.slice(at);
}

/**
 * Strings with 7 digits or more in which the card and phone detectors found nothing, per list of
 * phone regions: the same string gives the same answer, so it is not scanned again. The runtime's
 * logs repeat such strings on every turn (a path ID like `path-6f76239f84` holds 8 digits, so each
 * turn handed it to libphonenumber's matcher, ten regions over). Only strings left unchanged are
 * kept, so no text holding a card or phone number stays in memory; short strings only, and a
 * bounded number of them (a megabyte or two per list of regions at most).
 */
const scannedClean = new WeakMap<readonly CountryCode[], Set<string>>();
const scannedCleanMaxLength = 128;
const scannedCleanMaxEntries = 4096;

/** Arabic-Indic (U+0660–0669), Eastern Arabic-Indic (U+06F0–06F9) and fullwidth (U+FF10–FF19) digits. */
const isWideDigit = (c: number) =>
  (c >= 0x660 && c <= 0x669) || (c >= 0x6f0 && c <= 0x6f9) || (c >= 0xff10 && c <= 0xff19);

/** `text` with every digit of isWideDigit's scripts as its ASCII digit (the same length). */
function asciiDigits(text: string): string {
  return text.replace(/[\u0660-\u0669\u06f0-\u06f9\uff10-\uff19]/g, (d) => {
    const c = d.charCodeAt(0);
    return String.fromCharCode(48 + (c <= 0x669 ? c - 0x660 : c <= 0x6f9 ? c - 0x6f0 : c - 0xff10));
  });
}

function redactBuiltIns(text: string, regions: readonly CountryCode[]): string {
  let out = text.includes('@') ? text.replace(emailPattern, EMAIL_PLACEHOLDER) : text;
  // Most strings hold fewer than 7 digits: nothing below can match them. Digits as the phone
  // detector reads them: ASCII, and the Arabic-Indic, Eastern Arabic-Indic and fullwidth digits
  // that libphonenumber takes for them (a number written ０９０－１２３４－５６７８ is a phone number too).
  let digits = 0;
  let wide = false;
  for (let i = 0; i < out.length && digits < 7; i++) {
    const c = out.charCodeAt(i);
    if (c >= 48 && c <= 57) digits++;
    else if (c >= 0x660 && isWideDigit(c)) {
      digits++;
      wide = true;
    }
  }
  if (digits < 7) return out;
  const memo = out.length <= scannedCleanMaxLength ? scannedClean.get(regions) : undefined;
  if (memo?.has(out)) return out;
  const scanned = out;
  if (wide) {
    // Card numbers in those digits too: found in a copy with ASCII digits (one UTF-16 unit for
    // one, so the positions are the same) and replaced in the text.
    const spans: Span[] = [];
    for (const m of asciiDigits(out).matchAll(cardCandidate)) {
      if (isCardNumber(m[0])) spans.push({ start: m.index, end: m.index + m[0].length });
    }
    out = replaceSpans(out, spans, CARD_PLACEHOLDER);
  } else out = out.replace(cardCandidate, (match) => (isCardNumber(match) ? CARD_PLACEHOLDER : match));
  out = replaceSpans(out, findPhoneNumbers(out, regions), PHONE_PLACEHOLDER);
  if (out === scanned && scanned.length <= scannedCleanMaxLength) {
    let set = memo ?? scannedClean.get(regions);
    if (!set) {
      set = new Set();
      scannedClean.set(regions, set);
    }
    if (set.size >= scannedCleanMaxEntries) set.clear();
    set.add(scanned);
  }
  return out;
}

export interface CompiledPattern {
  source: string;
  regex: RE2JS;
}

const compiledCache = new Map<string, RE2JS>();

/** Compiles a project pattern with RE2 syntax, or says why it cannot be used. */
export function compileRedactionPattern(
  source: string,
): { ok: true; pattern: CompiledPattern } | { ok: false; message: string } {
  const cached = compiledCache.get(source);
  if (cached) return { ok: true, pattern: { source, regex: cached } };
  try {
    const regex = RE2JS.compile(source);
    if (regex.matches('')) return { ok: false, message: 'must not match the empty string' };
    if (compiledCache.size > 1000) compiledCache.clear();
    compiledCache.set(source, regex);
    return { ok: true, pattern: { source, regex } };
  } catch (err) {
    return { ok: false, message: `is not a valid RE2 pattern (${(err as Error).message})` };
  }
}

/** Compiles every pattern, or throws a 400 naming each one that is not usable. */
export function compileRedactionPatterns(sources: readonly string[]): CompiledPattern[] {
  const compiled: CompiledPattern[] = [];
  const problems: { path: string; message: string }[] = [];
  sources.forEach((source, index) => {
    const result = compileRedactionPattern(source);
    if (result.ok) compiled.push(result.pattern);
    else problems.push({ path: `patterns.${index}`, message: result.message });
  });
  if (problems.length)
    throw validationError(`patterns.${problems[0]!.path.split('.')[1]}: ${problems[0]!.message}`, problems);
  return compiled;
}

export interface Redactor {
  /** Redacts a string. */
  text(value: string): string;
  /** Redacts every string inside a JSON value; `changed` tells whether anything was replaced. */
  json(value: unknown): { value: unknown; changed: boolean };
}

export function createRedactor(
  patterns: readonly CompiledPattern[] = [],
  phoneRegions: readonly CountryCode[] = DEFAULT_PHONE_REGIONS,
): Redactor {
  const text = (value: string): string => {
    let out = redactBuiltIns(value, phoneRegions);
    for (const p of patterns) {
      if (p.regex.matcher(out).find()) out = p.regex.matcher(out).replaceAll(() => PATTERN_PLACEHOLDER);
    }
    return out;
  };
  // Copy on write: an array or object is copied only when something inside it was redacted, so a
  // log with nothing to redact (most of them) is answered as it is, with no copy to collect.
  const walk = (value: unknown, state: { changed: boolean }): unknown => {
    if (typeof value === 'string') {
      const redacted = text(value);
      if (redacted !== value) state.changed = true;
      return redacted;
    }
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const v = value[i];
        const w = walk(v, state);
        if (w !== v && !out) out = value.slice(0, i);
        if (out) out.push(w);
      }
      return out ?? value;
    }
    if (value && typeof value === 'object') {
      // Anything but a plain object (a Date, a class instance) becomes a plain copy of its own
      // entries, as it always did.
      const proto = Object.getPrototypeOf(value);
      let out: Record<string, unknown> | undefined = proto === Object.prototype || proto === null ? undefined : {};
      const entries = Object.entries(value);
      for (let i = 0; i < entries.length; i++) {
        const [k, v] = entries[i]!;
        const w = walk(v, state);
        if (w !== v && !out) {
          out = {};
          for (let j = 0; j < i; j++) out[entries[j]![0]] = entries[j]![1];
        }
        if (out) out[k] = w;
      }
      return out ?? value;
    }
    return value;
  };
  return {
    text,
    json(value) {
      const state = { changed: false };
      const redacted = walk(value, state);
      return { value: redacted, changed: state.changed };
    },
  };
}
