import { RE2JS } from 're2js';
import { validationError } from '../lib/errors';

/**
 * Redaction of transcript logs (DECISIONS.md §5). Every string inside a log's data is scanned for
 * e-mail addresses, payment card numbers (Luhn-checked), phone numbers and the project's own
 * patterns; matches are replaced by a placeholder. Keys and non-string values are left alone.
 *
 * Safety against catastrophic backtracking:
 * - the built-in patterns run on V8's engine but have bounded repetitions only, so the work per
 *   start position is bounded and a scan is linear in the text;
 * - project patterns run on RE2JS, a port of RE2 whose matching time is linear in the input for
 *   every pattern (it has no backreferences or lookaround, which is what makes that possible), and
 *   are capped at 500 characters, 20 per project.
 */

export const EMAIL_PLACEHOLDER = '[email]';
export const PHONE_PLACEHOLDER = '[phone]';
export const CARD_PLACEHOLDER = '[card]';
export const PATTERN_PLACEHOLDER = '[redacted]';

// Local part and domain labels with bounded lengths (RFC 5321 limits), so no unbounded backtracking.
const emailPattern = /[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}/g;
// 13 to 19 digits, optionally grouped by single spaces or dashes.
const cardCandidate = /(?<![\d])\d(?:[ -]?\d){12,18}(?![\d])/g;
// A phone number: optional +country, digits grouped by spaces, dots, dashes or parentheses.
const phoneCandidate = /(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4}(?![\w])/g;
const isoDateLike = /^\d{4}-\d{2}-\d{2}$|^\d{1,2}[./-]\d{1,2}[./-]\d{2,4}$|^\d{4}[./]\d{2}[./]\d{2}$/;

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

function redactBuiltIns(text: string): string {
  let out = text.replace(emailPattern, EMAIL_PLACEHOLDER);
  out = out.replace(cardCandidate, (match) => {
    const digits = match.replace(/[ -]/g, '');
    return luhnValid(digits) ? CARD_PLACEHOLDER : match;
  });
  out = out.replace(phoneCandidate, (match) => {
    const digits = match.replace(/\D/g, '');
    // 7 to 15 digits (E.164), and not a date such as 2026-01-02 or 02/01/2026.
    if (digits.length < 7 || digits.length > 15 || isoDateLike.test(match)) return match;
    return PHONE_PLACEHOLDER;
  });
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

export function createRedactor(patterns: readonly CompiledPattern[] = []): Redactor {
  const text = (value: string): string => {
    let out = redactBuiltIns(value);
    for (const p of patterns) {
      if (p.regex.matcher(out).find()) out = p.regex.matcher(out).replaceAll(() => PATTERN_PLACEHOLDER);
    }
    return out;
  };
  const walk = (value: unknown, state: { changed: boolean }): unknown => {
    if (typeof value === 'string') {
      const redacted = text(value);
      if (redacted !== value) state.changed = true;
      return redacted;
    }
    if (Array.isArray(value)) return value.map((v) => walk(v, state));
    if (value && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = walk(v, state);
      return out;
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
