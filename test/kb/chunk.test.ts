import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ChunkSpan, chunkSpans, chunkText } from '../../src/kb/chunk';
import { countTokens } from '../../src/llm/tokens';

const sentence = (i: number) => `Sentence number ${i} says something about widgets and their screws.`;
const paragraph = (from: number, n: number) => Array.from({ length: n }, (_, k) => sentence(from + k)).join(' ');

/** The properties every chunking must have, whatever the text. */
function checkSpans(text: string, spans: ChunkSpan[], maxTokens: number) {
  let previousStart = -1;
  let previousEnd = -1;
  const covered = new Uint8Array(text.length);
  for (const span of spans) {
    const content = text.slice(span.start, span.end);
    expect(content.trim()).toBe(content); // starts and ends on non-whitespace, so never blank
    expect(content.length).toBeGreaterThan(0);
    expect(span.tokens).toBe(countTokens(content));
    expect(span.tokens).toBeLessThanOrEqual(maxTokens);
    expect(span.start).toBeGreaterThan(previousStart);
    expect(span.end).toBeGreaterThan(previousEnd);
    previousStart = span.start;
    previousEnd = span.end;
    covered.fill(1, span.start, span.end);
  }
  for (let i = 0; i < text.length; i++) if (!/\s/.test(text[i] as string)) expect(covered[i], `offset ${i}`).toBe(1);
}

describe('chunkText', () => {
  it('returns nothing for empty or blank text', () => {
    expect(chunkText('', { maxTokens: 500 })).toEqual([]);
    expect(chunkText(' \n\n \t\n', { maxTokens: 500 })).toEqual([]);
  });

  it('keeps a short text in one chunk, verbatim', () => {
    const text = 'Widgets.\n\nThey are small.';
    expect(chunkText(text, { maxTokens: 500 })).toEqual([{ content: text, tokens: countTokens(text) }]);
  });

  it('rejects sizes it cannot honour', () => {
    expect(() => chunkText('x', { maxTokens: 4 })).toThrow(RangeError);
    expect(() => chunkText('x', { maxTokens: 100.5 })).toThrow(RangeError);
    expect(() => chunkText('x', { maxTokens: 100, overlapTokens: 100 })).toThrow(RangeError);
    expect(() => chunkText('x', { maxTokens: 100, overlapTokens: -1 })).toThrow(RangeError);
  });

  it('stays within maxTokens with the default and API sizes', () => {
    const text = Array.from({ length: 120 }, (_, p) => paragraph(p * 10, 1 + (p % 9))).join('\n\n');
    for (const maxTokens of [500, 1000, 1500]) checkSpans(text, chunkSpans(text, { maxTokens }), maxTokens);
  });

  it('ends chunks at paragraph ends when paragraphs fit', () => {
    // Paragraphs of about 70 tokens; chunks of 200 hold two of them, never a part of one.
    const paragraphs = Array.from({ length: 12 }, (_, p) => paragraph(p * 5, 5));
    const text = paragraphs.join('\n\n');
    const chunks = chunkText(text, { maxTokens: 200, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThan(3);
    for (const chunk of chunks) {
      for (const part of chunk.content.split('\n\n')) expect(paragraphs).toContain(part);
    }
    expect(chunks.map((c) => c.content).join('\n\n')).toBe(text);
  });

  it('ends chunks at sentence ends inside a long paragraph', () => {
    const text = paragraph(0, 60);
    const chunks = chunkText(text, { maxTokens: 120, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThan(4);
    for (const chunk of chunks) {
      expect(chunk.content).toMatch(/^Sentence number \d+/);
      expect(chunk.content).toMatch(/screws\.$/);
    }
    expect(chunks.map((c) => c.content).join(' ')).toBe(text);
  });

  it('keeps a heading with the paragraph after it', () => {
    const text = [paragraph(0, 4), 'Installation', paragraph(10, 4), 'Maintenance', paragraph(20, 4)].join('\n\n');
    const chunks = chunkText(text, { maxTokens: 130, overlapTokens: 0 });
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.content).not.toMatch(/(Installation|Maintenance)$/);
    const all = chunks.map((c) => c.content).join('\n');
    expect(all).toContain('Installation\n\nSentence number 10');
    expect(all).toContain('Maintenance\n\nSentence number 20');
  });

  it('starts each chunk with whole sentences from the end of the previous one', () => {
    const text = paragraph(0, 40);
    const chunks = chunkText(text, { maxTokens: 150, overlapTokens: 30 });
    expect(chunks.length).toBeGreaterThan(3);
    for (let k = 1; k < chunks.length; k++) {
      const previous = (chunks[k - 1] as { content: string }).content;
      const current = (chunks[k] as { content: string }).content;
      // The longest run of whole sentences that starts this chunk and ends the previous one.
      const sentences = current.split(/(?<=screws\.) /);
      let shared = '';
      for (let n = 1; n <= sentences.length; n++) {
        const prefix = sentences.slice(0, n).join(' ');
        if (previous.endsWith(prefix)) shared = prefix;
      }
      expect(shared).not.toBe('');
      expect(countTokens(shared)).toBeLessThanOrEqual(30);
      expect(countTokens(shared)).toBeGreaterThan(12); // two sentences of 12 tokens fit in 30
    }
  });

  it('defaults the overlap to about 10 % of maxTokens', () => {
    const text = paragraph(0, 200);
    const withDefault = chunkText(text, { maxTokens: 300 });
    expect(withDefault).toEqual(chunkText(text, { maxTokens: 300, overlapTokens: 30 }));
    expect(withDefault).not.toEqual(chunkText(text, { maxTokens: 300, overlapTokens: 0 }));
  });

  it('is deterministic', () => {
    const text = Array.from({ length: 50 }, (_, p) => paragraph(p, 1 + (p % 7))).join('\n\n');
    expect(chunkText(text, { maxTokens: 100 })).toEqual(chunkText(text, { maxTokens: 100 }));
  });

  it('cuts a single over-long sentence at token boundaries, with overlap', () => {
    const text = `Start ${Array.from({ length: 400 }, (_, i) => `item${i}`).join(', ')} end`;
    const spans = chunkSpans(text, { maxTokens: 100, overlapTokens: 10 });
    expect(spans.length).toBeGreaterThan(5);
    checkSpans(text, spans, 100);
    // Consecutive parts share text: the next one starts before the previous one ends.
    for (let k = 1; k < spans.length; k++)
      expect((spans[k] as ChunkSpan).start).toBeLessThan((spans[k - 1] as ChunkSpan).end);
  });

  it('cuts CJK text without spaces or punctuation between characters', () => {
    // 2,000 distinct ideographs: many take two or three tokens, so token ends fall inside characters.
    const text = Array.from({ length: 2000 }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20000))).join('');
    const spans = chunkSpans(text, { maxTokens: 64, overlapTokens: 8 });
    checkSpans(text, spans, 64);
    for (const span of spans) expect(text.slice(span.start, span.end)).not.toContain('\ufffd');
  });

  it('splits CJK sentences at full stops', () => {
    const text = '知识库把文档切成小块。每一块都不超过上限！检索时只返回相关的块？'.repeat(20);
    const chunks = chunkText(text, { maxTokens: 60, overlapTokens: 0 });
    for (const chunk of chunks) expect(chunk.content).toMatch(/[。！？]$/);
  });

  it('never yields empty chunks from whitespace-heavy text', () => {
    const text = `\n\n   ${paragraph(0, 3)}\n\n\n\n\t \n${'  \n'.repeat(50)}${paragraph(3, 3)}   \n\n`;
    const spans = chunkSpans(text, { maxTokens: 30, overlapTokens: 5 });
    checkSpans(text, spans, 30);
  });

  it('bounds, coverage and exact counts hold for arbitrary text (property)', () => {
    const word = fc.constantFrom(
      'widget',
      'a',
      'screws',
      'naïve',
      'Straße',
      '中文',
      '検索',
      'สวัสดี',
      '🎉',
      '👨‍👩‍👧',
      '12345',
      'x'.repeat(40),
      'e.g.',
      '—',
      'ok!',
      'end.',
      '知识。',
    );
    const separator = fc.constantFrom(' ', ' ', ' ', '', '\n', '\n\n', '. ', '? ', '\n\n\n', '  \t');
    const text = fc
      .array(fc.tuple(word, separator), { maxLength: 400 })
      .map((parts) => parts.map(([w, s]) => w + s).join(''));
    fc.assert(
      fc.property(
        text,
        fc.integer({ min: 8, max: 80 }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        (t, maxTokens, share) => {
          const overlapTokens = Math.floor(maxTokens * share);
          checkSpans(t, chunkSpans(t, { maxTokens, overlapTokens }), maxTokens);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('chunks about 2 MB of text (tokenized once, not per sentence)', () => {
    const text = Array.from({ length: 3400 }, (_, p) => paragraph(p * 3, 2 + (p % 15))).join('\n\n');
    expect(text.length).toBeGreaterThan(2_000_000);
    const chunks = chunkText(text, { maxTokens: 1000 });
    expect(chunks.length).toBeGreaterThan(400);
    for (const chunk of chunks) expect(chunk.tokens).toBeLessThanOrEqual(1000);
  });
});
