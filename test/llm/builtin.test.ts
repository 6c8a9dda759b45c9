import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import { createBuiltinProvider } from '../../src/llm/builtin';
import { isLlmError, type LlmError } from '../../src/llm/errors';
import {
  answerExtractively,
  NO_CONTEXT_ANSWER,
  NO_MATCH_ANSWER,
  sentencesOf,
  termsOf,
  wordPieces,
} from '../../src/llm/extractive-answer';
import type { ChatMessage, ChatStreamEvent } from '../../src/llm/types';

const handbook = [
  'Acme ships orders within two business days.',
  'Refunds are issued to the original payment method within 14 days of receiving the return.',
  'Our support team answers e-mail from Monday to Friday.',
  'Gift cards cannot be refunded or exchanged for cash.',
  'Returns must be sent back unused, in the original packaging.',
].join(' ');

const question = (q: string, context = handbook): ChatMessage[] => [
  { role: 'system', content: `Answer from these passages:\n${context}` },
  { role: 'user', content: q },
];

async function events(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const out: ChatStreamEvent[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

async function failureOf(promise: Promise<unknown>): Promise<LlmError> {
  try {
    await promise;
  } catch (err) {
    if (isLlmError(err)) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

describe('extractive answers', () => {
  it('answers with the context sentence that best matches the question', () => {
    expect(answerExtractively(question('How many days until refunds are issued?'))).toBe(
      'Refunds are issued to the original payment method within 14 days of receiving the return.',
    );
  });

  it('joins the sentences that match about as well, in the order of the context', () => {
    expect(answerExtractively(question('Which packaging for returns, and when are refunds issued?'))).toBe(
      'Refunds are issued to the original payment method within 14 days of receiving the return. ' +
        'Returns must be sent back unused, in the original packaging.',
    );
    // The second sentence matches best, the first well enough: the answer keeps the context's order.
    const context = 'Members get free returns. Shipping and returns are free for members.';
    expect(answerExtractively(question('Are shipping and returns free for members?', context))).toBe(context);
  });

  it('leaves out sentences that match far worse than the best one', () => {
    // "Gift cards cannot be refunded" shares only "refund" with the question.
    expect(answerExtractively(question('How many days until refunds are issued?'))).not.toContain('Gift');
  });

  it('prefers the sentence with the rarer shared words', () => {
    expect(answerExtractively(question('Can I get cash for a gift card?'))).toBe(
      'Gift cards cannot be refunded or exchanged for cash.',
    );
  });

  it('is deterministic: the same messages always give the same answer', () => {
    const messages = question('When does support answer e-mail?');
    const answers = new Set(Array.from({ length: 20 }, () => answerExtractively(messages)));
    expect(answers.size).toBe(1);
    expect([...answers][0]).toBe('Our support team answers e-mail from Monday to Friday.');
  });

  it('says so when nothing in the context matches, or there is no context', () => {
    expect(answerExtractively(question('What is the airspeed of a swallow?'))).toBe(NO_MATCH_ANSWER);
    expect(answerExtractively([{ role: 'user', content: 'Hello?' }])).toBe(NO_CONTEXT_ANSWER);
    expect(NO_CONTEXT_ANSWER).toContain('not a language model');
    expect(NO_MATCH_ANSWER).toContain('not a language model');
  });

  it('takes the last user message as the question and every other message as context', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Tell me about shipping.' },
      { role: 'assistant', content: 'Parcels travel by sea to the islands.' },
      { role: 'user', content: 'Which islands get parcels?' },
    ];
    expect(answerExtractively(messages)).toBe('Parcels travel by sea to the islands.');
  });

  it('uses at most maxSentences and drops repeated sentences of overlapping chunks', () => {
    const chunk = 'Cats sleep a lot. Cats purr when content. Cats chase mice.';
    const answer = answerExtractively(question('What do cats do?', `${chunk}\n\n${chunk}`), { maxSentences: 2 });
    expect(answer).toBe('Cats sleep a lot. Cats purr when content.');
  });

  it('splits sentences at line breaks too, and matches words without case, accents or plural endings', () => {
    expect(sentencesOf('# Opening hours\n- Monday: 9–17\nWe are closed on holidays. Call us!')).toEqual([
      '# Opening hours',
      '- Monday: 9–17',
      'We are closed on holidays.',
      'Call us!',
    ]);
    expect(termsOf('The Cafés are OPENING their Stories')).toEqual(['cafe', 'open', 'story']);
  });

  it('cuts text into word-sized pieces that add up to the text', () => {
    const text = 'Refunds take 14 days, sometimes  less.';
    const pieces = wordPieces(text);
    expect(pieces).toEqual(['Refunds ', 'take ', '14 ', 'days, ', 'sometimes  ', 'less.']);
    expect(pieces.join('')).toBe(text);
  });
});

describe('built-in provider', () => {
  const reference = new Tiktoken(o200kBase);
  const tokens = (text: string) => reference.encode(text).length;

  it('is named builtin, is not a language model and has no embeddings', async () => {
    const p = createBuiltinProvider();
    expect(p.info).toEqual({
      provider: 'builtin',
      isLanguageModel: false,
      defaultModel: 'builtin',
      embeddingModel: null,
      baseUrl: null,
    });
    expect(p.isLanguageModel).toBe(false);
    expect(p.supportsEmbeddings).toBe(false);
    const error = await failureOf(p.embed({ texts: ['a'] }));
    expect(error.kind).toBe('unsupported');
  });

  it('streams the extractive answer in word-sized pieces, then the accounting', async () => {
    const messages = question('Can I get cash for a gift card?');
    const all = await events(createBuiltinProvider().stream({ messages }));
    const deltas = all.flatMap((e) => (e.type === 'delta' ? [e.text] : []));
    expect(deltas).toEqual(['Gift ', 'cards ', 'cannot ', 'be ', 'refunded ', 'or ', 'exchanged ', 'for ', 'cash.']);
    const end = all.at(-1);
    if (end?.type !== 'end') throw new Error('no end event');
    expect(end.result.text).toBe(deltas.join(''));
    expect(end.result.finishReason).toBe('stop');
    expect(end.result.accounting).toMatchObject({
      provider: 'builtin',
      model: 'builtin',
      cost: 0,
      usageSource: 'tokenizer',
      attempts: 0,
    });
  });

  it('counts tokens with the o200k_base tokenizer, prompt in chat format', async () => {
    const messages = question('Which packaging for returns, and when are refunds issued?');
    const result = await createBuiltinProvider().complete({ messages });
    expect(result.usage.outputTokens).toBe(tokens(result.text));
    // 3 per message + role + content, + 3 to prime the reply (OpenAI's chat-format rule).
    const expectedInput = 3 + messages.reduce((n, m) => n + 3 + tokens(m.role) + tokens(m.content), 0);
    expect(result.usage.inputTokens).toBe(expectedInput);
    expect(result.accounting.inputTokens).toBe(expectedInput);
  });

  it('gives identical results, token counts included, on every call', async () => {
    const p = createBuiltinProvider();
    const messages = question('When are refunds issued?');
    const runs = await Promise.all([1, 2, 3].map(() => p.complete({ messages })));
    const summaries = runs.map((r) => ({ text: r.text, usage: r.usage, finish: r.finishReason }));
    expect(summaries[1]).toEqual(summaries[0]);
    expect(summaries[2]).toEqual(summaries[0]);
  });

  it('stops at maxTokens with finish reason length', async () => {
    const result = await createBuiltinProvider().complete({
      messages: question('How many days until refunds are issued?'),
      maxTokens: 5,
    });
    expect(result.finishReason).toBe('length');
    expect(result.usage.outputTokens).toBeLessThanOrEqual(5);
    expect(result.text.length).toBeGreaterThan(0);
    expect('Refunds are issued to the original payment method'.startsWith(result.text.trim())).toBe(true);
  });

  it('refuses JSON mode rather than inventing a verdict', async () => {
    const error = await failureOf(
      createBuiltinProvider().complete({ messages: question('Is this good?'), responseFormat: 'json_object' }),
    );
    expect(error.kind).toBe('unsupported');
    expect(error.message).toContain('not a language model');
  });

  it('stops between pieces when the caller aborts', async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    const error = await failureOf(
      (async () => {
        for await (const e of createBuiltinProvider().stream({
          messages: question('How long do refunds take after a return?'),
          signal: controller.signal,
        })) {
          if (e.type === 'delta') seen.push(e.text);
          if (seen.length === 2) controller.abort();
        }
      })(),
    );
    expect(error.kind).toBe('aborted');
    expect(seen).toHaveLength(2);
    expect(error.partialAccounting?.outputTokens).toBe(tokens(seen.join('')));
  });

  it('fails calls after close()', async () => {
    const p = createBuiltinProvider();
    await p.close();
    const error = await failureOf(p.complete({ messages: question('refunds?') }));
    expect(error.kind).toBe('aborted');
  });
});
