import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import type { ChatMessage } from './types';

/** The encoding of OpenAI's current models; js-tiktoken bundles it, so counting works offline. */
export const TOKENIZER_ENCODING = 'o200k_base';

// The library's encoder (for decoding, and for encoding should the rank map below be unusable).
// Building it parses the 2 MB rank table into two maps through an intermediate object of 200k
// keys: about a second on a quiet core, and the first upload or LLM call after a start paid it.
// It is immutable and has no side effects, so one per process, built on first use, is enough.
let encoder: Tiktoken | undefined;
function getEncoder(): Tiktoken {
  encoder ??= new Tiktoken(o200kBase);
  return encoder;
}

// js-tiktoken merges byte pairs by rescanning the whole piece after every merge, and a piece is a
// whole run of letters: 3,000 Chinese or Thai characters without punctuation take seconds and
// 20,000 repeated letters half a minute, so one uploaded document could stall the process. The
// encoder below gives the same tokens (test/llm/tokens.test.ts compares them) with a heap of
// candidate pairs, O(m log m) per piece. Its rank map (the token's bytes joined with commas, as
// the library keys its own) is read straight from the rank table: one pass over its lines
// ("! <first rank> <base64 token> ..."), about five times faster than building the library's
// encoder, which encoding then never needs.
let ranks: Map<string, number> | null | undefined;

function parseRanks(table: string): Map<string, number> | null {
  const map = new Map<string, number>();
  for (const line of table.split('\n')) {
    if (!line) continue;
    const parts = line.split(' ');
    const first = Number.parseInt(parts[1] as string, 10);
    if (!Number.isInteger(first)) return null;
    for (let i = 2; i < parts.length; i++) map.set(Buffer.from(parts[i] as string, 'base64').join(','), first + i - 2);
  }
  return map;
}

function getRanks(): Map<string, number> | null {
  if (ranks === undefined) {
    const parsed = parseRanks(o200kBase.bpe_ranks);
    // A table in another layout (a js-tiktoken upgrade) falls back to the library's encoder.
    ranks = parsed && parsed.size > 199_000 && parsed.get('32') === 220 ? parsed : null;
  }
  return ranks;
}

/** Whether the fast encoder is in use (false only if a js-tiktoken upgrade moved its internals). */
export function usesFastEncoder(): boolean {
  return getRanks() !== null;
}

const pretokenizer = new RegExp(o200kBase.pat_str, 'gu');
const utf8 = new TextEncoder();

/** Byte offsets (within the piece) where its tokens end, by the ranked byte-pair merges. */
function mergeBoundaries(bytes: Uint8Array, rankMap: Map<string, number>): number[] {
  const n = bytes.length;
  if (n === 1) return [1];
  // Parts form a linked list by start offset; a pair is (start, next[start]) up to next[next[start]].
  const next = new Int32Array(n + 2);
  const prev = new Int32Array(n + 1);
  const alive = new Uint8Array(n + 1).fill(1);
  for (let i = 0; i <= n; i++) {
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  // Min-heap keyed by rank, then by start (the library merges the leftmost of equal ranks).
  // A popped entry is stale when its pair no longer exists: boundaries only ever disappear, so
  // the pair still exists exactly when its start is alive and the part after next ends at `end`.
  const keys: number[] = [];
  const ends: number[] = [];
  const SHIFT = 2 ** 32; // rank < 2^18, so keys stay exact doubles
  const push = (rank: number, start: number, end: number) => {
    let i = keys.length;
    const key = rank * SHIFT + start;
    keys.push(key);
    ends.push(end);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((keys[parent] as number) <= key) break;
      keys[i] = keys[parent] as number;
      ends[i] = ends[parent] as number;
      i = parent;
    }
    keys[i] = key;
    ends[i] = end;
  };
  const pop = (): [number, number] => {
    const top: [number, number] = [keys[0] as number, ends[0] as number];
    const lastKey = keys.pop() as number;
    const lastEnd = ends.pop() as number;
    const size = keys.length;
    if (size > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= size) break;
        const r = l + 1;
        const c = r < size && (keys[r] as number) < (keys[l] as number) ? r : l;
        if ((keys[c] as number) >= lastKey) break;
        keys[i] = keys[c] as number;
        ends[i] = ends[c] as number;
        i = c;
      }
      keys[i] = lastKey;
      ends[i] = lastEnd;
    }
    return top;
  };
  const rankOf = (start: number, end: number) => rankMap.get(bytes.subarray(start, end).join(','));
  for (let i = 0; i + 1 < n; i++) {
    const rank = rankOf(i, i + 2);
    if (rank !== undefined) push(rank, i, i + 2);
  }
  while (keys.length > 0) {
    const [key, end] = pop();
    const start = key % SHIFT;
    const mid = next[start] as number;
    if (!alive[start] || mid >= n || next[mid] !== end) continue;
    alive[mid] = 0;
    next[start] = end;
    if (end <= n) prev[end] = start;
    const before = prev[start] as number;
    if (before >= 0) {
      const rank = rankOf(before, end);
      if (rank !== undefined) push(rank, before, end);
    }
    if (end < n) {
      const after = next[end] as number;
      const rank = rankOf(start, after);
      if (rank !== undefined) push(rank, start, after);
    }
  }
  const boundaries: number[] = [];
  for (let i = next[0] as number; i <= n; i = next[i] as number) boundaries.push(i);
  return boundaries;
}

/** UTF-8 of a piece; ASCII without a call into TextEncoder (most pieces, and the cost adds up). */
function utf8Bytes(piece: string): Uint8Array {
  const bytes = new Uint8Array(piece.length);
  for (let i = 0; i < piece.length; i++) {
    const code = piece.charCodeAt(i);
    if (code >= 0x80) return utf8.encode(piece);
    bytes[i] = code;
  }
  return bytes;
}

interface PieceEncoding {
  tokens: number[];
  /** Byte offset (within the piece) where each token ends. */
  byteEnds: number[];
}

// Words repeat: caching the tokens of short pieces makes a long text about three times faster.
// The cache is dropped when full rather than managed, which keeps it simple and bounded.
const pieceCache = new Map<string, PieceEncoding>();
const PIECE_CACHE_LIMIT = 50_000;

function encodePiece(piece: string, rankMap: Map<string, number>): PieceEncoding {
  const cached = pieceCache.get(piece);
  if (cached) return cached;
  const bytes = utf8Bytes(piece);
  let encoding: PieceEncoding;
  const whole = rankMap.get(bytes.join(','));
  if (whole !== undefined) encoding = { tokens: [whole], byteEnds: [bytes.length] };
  else {
    encoding = { tokens: [], byteEnds: [] };
    let start = 0;
    for (const end of mergeBoundaries(bytes, rankMap)) {
      const token = rankMap.get(bytes.subarray(start, end).join(','));
      if (token !== undefined) {
        encoding.tokens.push(token);
        encoding.byteEnds.push(end);
      }
      start = end;
    }
  }
  if (piece.length <= 32) {
    if (pieceCache.size >= PIECE_CACHE_LIMIT) pieceCache.clear();
    pieceCache.set(piece, encoding);
  }
  return encoding;
}

/**
 * The o200k_base tokens of a text, treating special-token markers such as `<|endoftext|>` as
 * ordinary text (as `countTokens` always has).
 */
export function encodeTokens(text: string): number[] {
  if (!text) return [];
  const rankMap = getRanks();
  if (!rankMap) return getEncoder().encode(text, [], []);
  const tokens: number[] = [];
  for (const match of text.matchAll(pretokenizer)) {
    const piece = encodePiece(match[0], rankMap);
    if (piece.tokens.length === 1) tokens.push(piece.tokens[0] as number);
    else for (const token of piece.tokens) tokens.push(token);
  }
  return tokens;
}

/** The text of a token sequence (invalid UTF-8 at a cut through a character becomes U+FFFD). */
export function decodeTokens(tokens: readonly number[]): string {
  return getEncoder().decode(tokens as number[]);
}

/**
 * Tokens with the UTF-16 offset in `text` where each one ends, or -1 where a token ends inside a
 * character (a character of several UTF-8 bytes can span tokens). Cutting the text at the
 * non-negative offsets never splits a character.
 */
export function encodeWithOffsets(text: string): { tokens: number[]; ends: number[] } {
  const tokens: number[] = [];
  const ends: number[] = [];
  if (!text) return { tokens, ends };
  const rankMap = getRanks();
  for (const match of text.matchAll(pretokenizer)) {
    const piece = match[0];
    const base = match.index;
    // UTF-16 offset after the character that ends at each byte offset (-1 inside a character).
    const charEndAt = new Map<number, number>();
    let byte = 0;
    for (let i = 0; i < piece.length; ) {
      const cp = piece.codePointAt(i) as number;
      const units = cp > 0xffff ? 2 : 1;
      byte += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      i += units;
      charEndAt.set(byte, base + i);
    }
    if (rankMap) {
      const encoding = encodePiece(piece, rankMap);
      encoding.tokens.forEach((token, i) => {
        tokens.push(token);
        ends.push(charEndAt.get(encoding.byteEnds[i] as number) ?? -1);
      });
    } else {
      // Without the rank map, the library's tokens (slow, same tokens); only piece ends are
      // known to be character boundaries then.
      const pieceTokens = getEncoder().encode(piece, [], []);
      pieceTokens.forEach((token, i) => {
        tokens.push(token);
        ends.push(i === pieceTokens.length - 1 ? base + piece.length : -1);
      });
    }
  }
  return { tokens, ends };
}

/** Tokens of a text. Special-token markers such as `<|endoftext|>` count as ordinary text. */
export function countTokens(text: string): number {
  if (!text) return 0;
  return encodeTokens(text).length;
}

/**
 * Tokens of a chat prompt as OpenAI's chat format bills them (the OpenAI cookbook's rule for
 * current models): 3 per message plus its role and content, plus 3 that prime the reply.
 */
export function countChatTokens(messages: readonly ChatMessage[]): number {
  let total = 3;
  for (const m of messages) {
    total += 3 + countTokens(m.role) + countTokens(m.content);
    for (const call of m.toolCalls ?? []) total += 3 + countTokens(call.name) + countTokens(call.arguments);
  }
  return total;
}
