import { countTokens, encodeWithOffsets } from '../llm/tokens';

/**
 * Splits extracted text into chunks of at most `maxTokens` o200k_base tokens for indexing.
 *
 * - The text is cut into units: sentences, within lines, within paragraphs (blank-line
 *   separated). Each unit is tokenized once, so the whole text is tokenized in O(n), plus one
 *   exact count per chunk.
 * - A sentence longer than `maxTokens` is cut at token boundaries (never inside a character,
 *   preferably before a space).
 * - Units are packed greedily; when a chunk is full it ends at the strongest boundary in its
 *   second half: a paragraph end before a line end before a sentence end (latest of the
 *   strongest). A short heading-like paragraph stays with the text after it.
 * - The next chunk starts with an overlap of about `overlapTokens` (default 10 % of maxTokens)
 *   taken from the end of the previous one: whole sentences where they fit, else the tail of
 *   the last sentence cut at a token boundary.
 * - A chunk is a verbatim slice of the text (start and end on non-whitespace), never empty, and
 *   its exact token count is checked against `maxTokens`.
 */

export interface ChunkOptions {
  /** Upper bound of each chunk's tokens (the API allows 500..1500, default 1000). At least 8. */
  maxTokens: number;
  /** Tokens repeated from the end of the previous chunk; default maxTokens / 10, below maxTokens. */
  overlapTokens?: number;
}

export interface Chunk {
  content: string;
  tokens: number;
}

/** A chunk as offsets into the text: `text.slice(start, end)` is its content. */
export interface ChunkSpan {
  start: number;
  end: number;
  tokens: number;
}

/** What separates a unit from the one before it; higher is a better place to end a chunk. */
enum Boundary {
  /** Inside a sentence that was too long and was cut at token boundaries. */
  Token = 0,
  Sentence = 1,
  Line = 2,
  Paragraph = 3,
}

interface Unit {
  start: number;
  end: number;
  tokens: number;
  before: Boundary;
}

// A sentence ends after terminal punctuation (and closing quotes or brackets) followed by
// whitespace; CJK full stops end one even with no space after them. "e.g. this" is cut too,
// which costs nothing here: cuts only mark where a chunk may end.
const SENTENCE_END = /[.!?…‼⁇।؟]+["'’”)\]»]*(?=\s)|[。！？｡]+["'’”)\]」』）】〉》]*/gu;

/** Whether a UTF-16 code unit is whitespace, as JavaScript's `\s` defines it. */
const isSpace = (code: number) =>
  code === 32 ||
  (code >= 9 && code <= 13) ||
  code === 0xa0 ||
  code === 0x1680 ||
  (code >= 0x2000 && code <= 0x200a) ||
  code === 0x2028 ||
  code === 0x2029 ||
  code === 0x202f ||
  code === 0x205f ||
  code === 0x3000 ||
  code === 0xfeff;

/** [start, end) without surrounding whitespace, or null when only whitespace. */
function trimRange(text: string, start: number, end: number): [number, number] | null {
  while (start < end && isSpace(text.charCodeAt(start))) start++;
  while (end > start && isSpace(text.charCodeAt(end - 1))) end--;
  return start < end ? [start, end] : null;
}

/** Sentences of the text, each with the boundary before it (tokens are counted later). */
function segment(text: string): Omit<Unit, 'tokens'>[] {
  const units: Omit<Unit, 'tokens'>[] = [];
  let before = Boundary.Paragraph;
  let lineStart = 0;
  for (;;) {
    const newline = text.indexOf('\n', lineStart);
    const lineEnd = newline < 0 ? text.length : newline;
    const line = text.slice(lineStart, lineEnd);
    if (trimRange(line, 0, line.length) === null) {
      before = Boundary.Paragraph;
    } else {
      let from = 0;
      const cuts = Array.from(line.matchAll(SENTENCE_END), (m) => m.index + m[0].length);
      cuts.push(line.length);
      for (const cut of cuts) {
        const range = trimRange(text, lineStart + from, lineStart + cut);
        from = cut;
        if (!range) continue;
        units.push({ start: range[0], end: range[1], before });
        before = Boundary.Sentence;
      }
      before = Boundary.Line;
    }
    if (newline < 0) break;
    lineStart = newline + 1;
  }
  return units;
}

/**
 * The largest end offset in (start, limit] such that text[start, end) has at most `max` tokens,
 * by bisection over characters: the fallback when token ends do not fall on characters.
 */
function fitByCharacters(text: string, start: number, limit: number, max: number): number {
  let lo = start + 1; // one code point always fits: max >= 8 and a code point is at most 4 tokens
  if (text.charCodeAt(start) >= 0xd800 && text.charCodeAt(start) <= 0xdbff) lo++;
  let hi = limit;
  while (lo < hi) {
    let mid = Math.ceil((lo + hi) / 2);
    const code = text.charCodeAt(mid - 1);
    if (code >= 0xd800 && code <= 0xdbff) mid++; // never end between a surrogate pair
    if (mid > hi) mid = hi;
    if (countTokens(text.slice(start, mid)) <= max) lo = mid;
    else hi = mid - 1 > lo ? mid - 1 : lo;
  }
  return lo;
}

/** A unit over `max` tokens cut into parts of at most `max` tokens at token boundaries. */
function splitLongUnit(text: string, unit: Unit, max: number): Unit[] {
  const parts: Unit[] = [];
  const pushPart = (from: number, to: number) => {
    const range = trimRange(text, from, to);
    if (!range) return;
    const tokens = countTokens(text.slice(range[0], range[1]));
    const part: Unit = { start: range[0], end: range[1], tokens, before: parts.length ? Boundary.Token : unit.before };
    if (tokens <= max) {
      parts.push(part);
      return;
    }
    // Re-encoding a cut piece can merge its edge bytes differently; in the rare case that
    // costs a token or two over the budget, cut the piece again with a tighter one.
    const again = splitLongUnit(text, part, Math.max(4, 2 * max - tokens - 1));
    for (const p of again) parts.push({ ...p, before: parts.length ? Boundary.Token : unit.before });
  };
  let base = unit.start; // offsets from encodeWithOffsets are relative to this
  let { tokens, ends } = encodeWithOffsets(text.slice(base, unit.end));
  let first = 0; // first token not yet in a part
  while (first < tokens.length) {
    const from = first === 0 ? base : base + (ends[first - 1] as number);
    if (tokens.length - first <= max) {
      pushPart(from, unit.end);
      break;
    }
    // The last token end within the budget that falls between characters; in the last fifth
    // of the window, one followed by whitespace (a word boundary) wins.
    const last = first + max - 1;
    let cut = -1;
    let aligned = -1;
    for (let k = last; k >= first; k--) {
      const end = ends[k] as number;
      if (end < 0) continue;
      const inZone = k >= last - max / 5;
      if (inZone && isSpace(text.charCodeAt(base + end))) {
        cut = k;
        break;
      }
      if (aligned < 0) aligned = k;
      if (!inZone) break;
    }
    if (cut < 0) cut = aligned;
    if (cut >= 0) {
      pushPart(from, base + (ends[cut] as number));
      first = cut + 1;
      continue;
    }
    // No token in the window ends between characters (tokens that straddle characters all the
    // way): cut by characters and tokenize the rest afresh. The search is bounded so that it
    // encodes little; a part cut shorter than it could be is still correct.
    const to = fitByCharacters(text, from, Math.min(unit.end, from + max * 64), max);
    pushPart(from, to);
    base = to;
    ({ tokens, ends } = encodeWithOffsets(text.slice(base, unit.end)));
    first = 0;
  }
  return parts;
}

/**
 * The overlap to start the next chunk with: trailing whole units of `units[first..last]` within
 * `budget` tokens, else the tail of the last unit cut at a token boundary. Never the chunk's
 * first unit, so that the next chunk does not contain this one whole.
 */
function overlapFrom(text: string, units: readonly Unit[], first: number, last: number, budget: number): Unit[] {
  if (budget <= 0) return [];
  const whole: Unit[] = [];
  let used = 0;
  for (let k = last; k > first; k--) {
    const unit = units[k] as Unit;
    const cost = unit.tokens + (whole.length ? 1 : 0);
    if (used + cost > budget) break;
    used += cost;
    whole.unshift(unit);
  }
  if (whole.length) return whole;
  const unit = units[last] as Unit;
  if (unit.tokens <= budget) return []; // a lone short unit: nothing sensible to cut from it
  const slice = text.slice(unit.start, unit.end);
  const { tokens, ends } = encodeWithOffsets(slice);
  // The earliest token end from which the rest fits the budget, moved to a word start if the
  // first half of the tail has one.
  const firstAllowed = tokens.length - budget - 1;
  let cut = -1;
  for (let k = Math.max(0, firstAllowed); k < tokens.length - 1; k++) {
    const end = ends[k] as number;
    if (end < 0) continue;
    if (cut < 0) cut = end;
    if (isSpace(slice.charCodeAt(end))) {
      if (k - firstAllowed <= budget / 2) cut = end;
      break;
    }
  }
  if (cut < 0) return [];
  for (;;) {
    const range = trimRange(text, unit.start + cut, unit.end);
    if (!range) return [];
    const count = countTokens(text.slice(range[0], range[1]));
    if (count <= budget) return [{ start: range[0], end: range[1], tokens: count, before: Boundary.Token }];
    // Re-encoding the tail cost more than its share: start one aligned token later.
    const next = ends.findIndex((end) => end > cut);
    if (next < 0 || (ends[next] as number) >= slice.length) return [];
    cut = ends[next] as number;
  }
}

function validate(opts: ChunkOptions): { max: number; overlap: number } {
  const max = opts.maxTokens;
  if (!Number.isInteger(max) || max < 8) throw new RangeError(`maxTokens must be an integer of at least 8, got ${max}`);
  const overlap = opts.overlapTokens ?? Math.floor(max / 10);
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= max)
    throw new RangeError(`overlapTokens must be an integer from 0 to maxTokens - 1, got ${overlap}`);
  return { max, overlap };
}

/** Chunks as offsets into `text` (see chunkText). */
export function chunkSpans(text: string, opts: ChunkOptions): ChunkSpan[] {
  return Array.from(iterateChunkSpans(text, opts));
}

/**
 * The spans of chunkSpans, computed as they are taken: the units (and their token counts, most
 * of the work) are made only as far as the next chunk needs, so a caller can store the chunks
 * already made while the rest are cut (src/kb/ingest.ts). The options are checked at the call.
 */
export function iterateChunkSpans(text: string, opts: ChunkOptions): Iterator<ChunkSpan> & Iterable<ChunkSpan> {
  const { max, overlap } = validate(opts);
  return spansOf(text, max, overlap);
}

function* spansOf(text: string, max: number, overlap: number): Generator<ChunkSpan, void, undefined> {
  const segments = segment(text);
  let segmented = 0; // segments already turned into units
  const units: Unit[] = [];
  /** Whether unit k exists, making units up to it if needed. */
  const has = (k: number): boolean => {
    while (k >= units.length && segmented < segments.length) {
      const u = segments[segmented++] as Omit<Unit, 'tokens'>;
      const unit = { ...u, tokens: countTokens(text.slice(u.start, u.end)) };
      // Parts of a long sentence leave room for the overlap that the next chunk starts with (and
      // the token the estimate allows for the join).
      if (unit.tokens > max) units.push(...splitLongUnit(text, unit, Math.max(4, max - overlap - 2)));
      else units.push(unit);
    }
    return k < units.length;
  };
  // Whitespace between units costs a token or none once merged into the next word; counting
  // one (or the gap's own tokens when it is longer) keeps the estimate at or above the exact
  // count, so the exact check below rarely sends a unit back.
  const gapCosts = new Map<string, number>();
  const gapCost = (k: number): number => {
    const gap = text.slice((units[k - 1] as Unit).end, (units[k] as Unit).start);
    if (gap.length <= 2) return 1;
    let cost = gapCosts.get(gap);
    if (cost === undefined) {
      cost = Math.max(1, countTokens(gap));
      gapCosts.set(gap, cost);
    }
    return cost;
  };
  // A short paragraph without terminal punctuation (a heading) belongs with what follows it.
  const boundaryAfter = (k: number): Boundary => {
    if (!has(k + 1)) return Boundary.Paragraph;
    const next = units[k + 1] as Unit;
    const unit = units[k] as Unit;
    if (
      next.before === Boundary.Paragraph &&
      unit.before === Boundary.Paragraph &&
      unit.tokens <= 20 &&
      !/[.!?:;。！？…]["'’”)\]]*$/u.test(text.slice(Math.max(unit.start, unit.end - 4), unit.end))
    )
      return Boundary.Sentence;
    return next.before;
  };

  let head: Unit[] = []; // overlap carried from the previous chunk
  let i = 0;
  while (has(i)) {
    const firstNew = units[i] as Unit;
    // Overlap plus the first new unit must fit; drop overlap from its start until they do.
    const headCost = () => head.reduce((sum, u, k) => sum + u.tokens + (k ? 1 : 0), 0) + (head.length ? gapCost(i) : 0);
    while (head.length && headCost() + firstNew.tokens > max) head.shift();
    let estimate = headCost() + firstNew.tokens;
    const estimates = [estimate]; // estimates[k - i]: chunk ending at unit k
    let j = i;
    while (has(j + 1)) {
      const next = estimate + gapCost(j + 1) + (units[j + 1] as Unit).tokens;
      if (next > max) break;
      estimate = next;
      j++;
      estimates.push(estimate);
    }
    if (has(j + 1)) {
      // Full: end at the strongest boundary in the chunk's second half (latest on a tie).
      let best = j;
      let bestLevel = boundaryAfter(j);
      for (let k = j - 1; k >= i && bestLevel < Boundary.Paragraph && (estimates[k - i] as number) >= max / 2; k--) {
        const level = boundaryAfter(k);
        if (level > bestLevel) {
          best = k;
          bestLevel = level;
        }
      }
      j = best;
    }
    // The exact count; the estimate is almost always above it, but BPE merges across the
    // joins are not strictly additive.
    let start = head.length ? (head[0] as Unit).start : firstNew.start;
    let tokens = countTokens(text.slice(start, (units[j] as Unit).end));
    while (tokens > max) {
      if (j > i) j--;
      else head.shift(); // a lone unit is within max, so this ends with the unit alone
      start = head.length ? (head[0] as Unit).start : firstNew.start;
      tokens = countTokens(text.slice(start, (units[j] as Unit).end));
    }
    yield { start, end: (units[j] as Unit).end, tokens };
    head = has(j + 1) ? overlapFrom(text, units, i, j, overlap) : [];
    i = j + 1;
  }
}

/**
 * Chunks of at most `opts.maxTokens` o200k_base tokens, deterministic for a given text and
 * options; no chunk is empty or whitespace-only. See the top of this file for the rules.
 */
export function chunkText(text: string, opts: ChunkOptions): Chunk[] {
  return chunkSpans(text, opts).map((span) => ({ content: text.slice(span.start, span.end), tokens: span.tokens }));
}
