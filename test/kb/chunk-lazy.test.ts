import { afterAll, expect, it, vi } from 'vitest';

/** How many texts the chunker tokenizes: the measure of the work done so far. */
const tokenized = { calls: 0 };
// The test files of a fork share one module graph (vitest.config.ts): load the chunker afresh
// over a counting tokenizer.
vi.resetModules();
vi.doMock('../../src/llm/tokens', async (importOriginal) => {
  const tokens = await importOriginal<typeof import('../../src/llm/tokens')>();
  return {
    ...tokens,
    countTokens: (text: string) => {
      tokenized.calls++;
      return tokens.countTokens(text);
    },
  };
});

const { chunkSpans, iterateChunkSpans } = await import('../../src/kb/chunk');
afterAll(() => {
  vi.doUnmock('../../src/llm/tokens');
  vi.resetModules();
});

const sentence = (i: number) => `Sentence number ${i} says something about widgets and their screws.`;
const text = Array.from({ length: 2000 }, (_, p) =>
  Array.from({ length: 4 }, (_, k) => sentence(p * 4 + k)).join(' '),
).join('\n\n');

it('cuts chunks only as far as they are taken, and the same ones as chunkSpans', () => {
  const opts = { maxTokens: 500, overlapTokens: 50 };
  tokenized.calls = 0;
  const all = chunkSpans(text, opts);
  const whole = tokenized.calls;
  expect(all.length).toBeGreaterThan(100);

  tokenized.calls = 0;
  const spans = iterateChunkSpans(text, opts);
  const first = spans.next();
  expect(first).toEqual({ done: false, value: all[0] });
  // The first chunk tokenized its own sentences and a few more, not the whole text.
  expect(tokenized.calls).toBeGreaterThan(0);
  expect(tokenized.calls).toBeLessThan(whole / 20);
  const rest = [...spans];
  expect([first.value, ...rest]).toEqual(all);
});

it('checks its options when called, before any chunk is taken', () => {
  expect(() => iterateChunkSpans(text, { maxTokens: 4 })).toThrow(RangeError);
  expect(() => iterateChunkSpans(text, { maxTokens: 500, overlapTokens: 500 })).toThrow(RangeError);
});
