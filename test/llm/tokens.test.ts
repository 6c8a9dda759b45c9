import fc from 'fast-check';
import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import { countTokens, decodeTokens, encodeTokens, encodeWithOffsets, usesFastEncoder } from '../../src/llm/tokens';

/** The fast encoder must give exactly the library's tokens. */
const reference = new Tiktoken(o200kBase);
const libraryTokens = (text: string) => reference.encode(text, [], []);

const samples = [
  '',
  'Hello, world!',
  "It's the user's turn; they'll say: 'we've done it'.",
  'naïve café — façade, Ærøskøbing, Straße',
  'Nombre: 12345678901234, price $3.14159, 2024-05-01T12:00:00Z',
  '我们的知识库是一个非常有用的工具可以帮助用户找到他们需要的信息'.repeat(5),
  'สวัสดีครับ นี่คือข้อความภาษาไทยที่ไม่มีช่องว่างระหว่างคำ'.repeat(4),
  'مرحبا بالعالم، هذا نص عربي.',
  'emoji 🎉👍🏽👨‍👩‍👧 and flags 🇫🇷',
  'a'.repeat(500),
  'xyzq'.repeat(300),
  '<|endoftext|> special markers <|fim_prefix|> count as text',
  '   leading and trailing spaces   \n\n\n  tabs\t\tand\r\nCRLF  ',
  'function f(x) { return x?.y ?? [1, 2, 3].map((n) => n ** 2); }',
  'aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ='.repeat(20),
];

describe('o200k_base encoder', () => {
  it('uses the heap-based merge (js-tiktoken internals as expected)', () => {
    expect(usesFastEncoder()).toBe(true);
  });

  it.each(samples.map((s) => [s.slice(0, 30), s]))('gives the library tokens for %j', (_label, text) => {
    expect(encodeTokens(text)).toEqual(libraryTokens(text));
    expect(countTokens(text)).toBe(libraryTokens(text).length);
    expect(decodeTokens(encodeTokens(text))).toBe(text);
  });

  it('gives the library tokens for arbitrary Unicode text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (text) => {
        expect(encodeTokens(text)).toEqual(libraryTokens(text));
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'b', 'ab', 'é', '中', '文', ' ', '\n', '1'), maxLength: 300 }),
        (text) => {
          expect(encodeTokens(text)).toEqual(libraryTokens(text));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reports where each token ends, never inside a character', () => {
    for (const text of samples) {
      const { tokens, ends } = encodeWithOffsets(text);
      expect(tokens).toEqual(libraryTokens(text));
      expect(ends).toHaveLength(tokens.length);
      if (text) expect(ends.at(-1)).toBe(text.length);
      let previous = 0;
      ends.forEach((end, i) => {
        if (end < 0) return;
        expect(end).toBeGreaterThan(previous);
        // The tokens up to a reported end decode to exactly the text up to it.
        expect(decodeTokens(tokens.slice(0, i + 1))).toBe(text.slice(0, end));
        previous = end;
      });
    }
  });

  it('encodes a long run of letters without punctuation (a piece of 200,000 bytes)', () => {
    const text = '中文'.repeat(33_000);
    expect(countTokens(text)).toBeGreaterThan(1000);
  });
});
