import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/env';
import { AppError } from '../../src/lib/errors';
import { LlmError, llmErrorToAppError } from '../../src/llm/errors';
import { createCostCalculator, DEFAULT_PRICES, parsePriceTable } from '../../src/llm/prices';
import { backoffDelayMs, retryAfterMsFromHeaders, sleep } from '../../src/llm/retry';

/** A real pino logger whose JSON lines land in an array. */
function recordingLogger() {
  const lines: { level: number; msg: string; model?: string }[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

describe('price computation', () => {
  it('prices input and output tokens per million', () => {
    const costs = createCostCalculator({ prices: { m: { input: 3, output: 15 } } });
    expect(costs.costOf('m', 1_000_000, 0)).toBe(3);
    expect(costs.costOf('m', 0, 1_000_000)).toBe(15);
    expect(costs.costOf('m', 1200, 300)).toBe(0.0081);
    expect(costs.costOf('m', 0, 0)).toBe(0);
  });

  it('has no float noise in small costs', () => {
    const costs = createCostCalculator({ prices: { m: { input: 0.1, output: 0.2 } } });
    // 0.1 + 0.2 per million: naive float arithmetic gives 3.0000000000000004e-7.
    expect(costs.costOf('m', 1, 1)).toBe(0.0000003);
  });

  it('prices dated snapshots like their model, and unknown models with `*` when the table has it', () => {
    const costs = createCostCalculator({
      prices: { 'gpt-4o-mini': { input: 0.15, output: 0.6 }, '*': { input: 1, output: 1 } },
    });
    expect(costs.costOf('gpt-4o-mini-2024-07-18', 1_000_000, 0)).toBe(0.15);
    expect(costs.costOf('llama3.2:3b', 1_000_000, 1_000_000)).toBe(2);
  });

  it('costs unknown models 0 and warns once per model', () => {
    const { logger, lines } = recordingLogger();
    const costs = createCostCalculator({ prices: {}, logger });
    expect(costs.costOf('mystery', 500, 500)).toBe(0);
    expect(costs.costOf('mystery', 10, 10)).toBe(0);
    expect(costs.costOf('other', 10, 10)).toBe(0);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings.map((w) => w.model)).toEqual(['mystery', 'other']);
    expect(warnings[0]?.msg).toContain('LLM_PRICES');
  });

  it('knows the built-in provider is free without warning', () => {
    const { logger, lines } = recordingLogger();
    expect(createCostCalculator({ prices: {}, logger }).costOf('builtin', 100, 100)).toBe(0);
    expect(lines).toEqual([]);
  });

  it('parses a price table and says what is wrong with a bad one', () => {
    expect(parsePriceTable('{"m": {"input": 1, "output": 2}}', 'X')).toEqual({ m: { input: 1, output: 2 } });
    expect(parsePriceTable('{"m": {"input": 1}}', 'X')).toEqual({ m: { input: 1, output: 0 } });
    expect(() => parsePriceTable('{nope', 'LLM_PRICES')).toThrow('LLM_PRICES is not valid JSON');
    expect(() => parsePriceTable('{"m": {"input": -1}}', 'LLM_PRICES')).toThrow(/at "m.input"/);
    expect(() => parsePriceTable('{"m": {"input": 1, "cached": 2}}', 'LLM_PRICES')).toThrow(/not a price table/);
  });
});

describe('model settings (src/env.ts)', () => {
  const base = { DATABASE_URL: 'file:./x.db' };

  it('defaults to the built-in provider, with the default prices and documented limits', () => {
    const config = loadConfig(base);
    expect(config.LLM_BASE_URL).toBeUndefined();
    expect(config.LLM_TIMEOUT_MS).toBe(60_000);
    expect(config.LLM_MAX_RETRIES).toBe(2);
    expect(config.LLM_MAX_RETRY_WAIT_MS).toBe(30_000);
    expect(config.LLM_MAX_TOKENS_FIELD).toBe('max_tokens');
    expect(config.llmPrices).toEqual(DEFAULT_PRICES);
  });

  it('merges prices: defaults, then the file, then LLM_PRICES', () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-prices-'));
    const file = join(dir, 'prices.json');
    writeFileSync(file, JSON.stringify({ 'gpt-4o': { input: 1, output: 2 }, local: { input: 0, output: 0 } }));
    const config = loadConfig({ ...base, LLM_PRICES_FILE: file, LLM_PRICES: '{"local": {"input": 5, "output": 6}}' });
    expect(config.llmPrices['gpt-4o']).toEqual({ input: 1, output: 2 });
    expect(config.llmPrices.local).toEqual({ input: 5, output: 6 });
    expect(config.llmPrices['gpt-4o-mini']).toEqual(DEFAULT_PRICES['gpt-4o-mini']);
  });

  it('refuses settings that cannot work, saying which', () => {
    expect(() => loadConfig({ ...base, LLM_BASE_URL: 'http://127.0.0.1:11434/v1' })).toThrow(
      /LLM_DEFAULT_MODEL: is required when LLM_BASE_URL is set/,
    );
    expect(() => loadConfig({ ...base, EMBEDDING_MODEL: 'nomic-embed-text' })).toThrow(/EMBEDDING_MODEL: needs/);
    expect(() => loadConfig({ ...base, LLM_BASE_URL: 'ftp://x', LLM_DEFAULT_MODEL: 'm' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, LLM_PRICES: '[1' })).toThrow(/LLM_PRICES is not valid JSON/);
    expect(() => loadConfig({ ...base, LLM_PRICES_FILE: '/nonexistent/prices.json' })).toThrow(
      /LLM_PRICES_FILE: no file at/,
    );
    expect(() => loadConfig({ ...base, LLM_MAX_TOKENS_FIELD: 'tokens' })).toThrow(ConfigError);
  });

  it('accepts a complete OpenAI-compatible configuration', () => {
    const config = loadConfig({
      ...base,
      LLM_BASE_URL: 'http://127.0.0.1:11434/v1',
      LLM_DEFAULT_MODEL: 'llama3.2',
      EMBEDDING_MODEL: 'nomic-embed-text',
      LLM_TIMEOUT_MS: '120000',
      LLM_MAX_RETRIES: '0',
    });
    expect(config).toMatchObject({
      LLM_BASE_URL: 'http://127.0.0.1:11434/v1',
      LLM_DEFAULT_MODEL: 'llama3.2',
      EMBEDDING_MODEL: 'nomic-embed-text',
      LLM_TIMEOUT_MS: 120_000,
      LLM_MAX_RETRIES: 0,
    });
  });
});

describe('retry timing', () => {
  it('reads Retry-After as seconds, as an HTTP-date, and retry-after-ms', () => {
    const now = Date.parse('2026-01-02T03:04:05Z');
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after': '7' }), now)).toBe(7000);
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after': '0.5' }), now)).toBe(500);
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after': 'Fri, 02 Jan 2026 03:04:15 GMT' }), now)).toBe(10_000);
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after': 'Fri, 02 Jan 2026 03:00:00 GMT' }), now)).toBe(0);
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }), now)).toBe(250);
    expect(retryAfterMsFromHeaders(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMsFromHeaders(new Headers(), now)).toBeUndefined();
  });

  it('backs off exponentially with at most a quarter of jitter, capped at 8 s', () => {
    expect(backoffDelayMs(0, 500, () => 0)).toBe(500);
    expect(backoffDelayMs(1, 500, () => 0)).toBe(1000);
    expect(backoffDelayMs(2, 500, () => 0.999)).toBe(Math.round(2000 * (1 - 0.999 * 0.25)));
    expect(backoffDelayMs(10, 500, () => 0)).toBe(8000);
  });

  it('wakes up from a wait when the signal aborts', async () => {
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
  });
});

describe('LlmError for API endpoints', () => {
  it('answers 429 with Retry-After for rate limits and 503 for the rest', () => {
    const limited = llmErrorToAppError(
      new LlmError('rate_limit', 'slow down', { provider: 'openai-compatible', retryAfterMs: 2500 }),
    );
    expect(limited).toBeInstanceOf(AppError);
    expect(limited.status).toBe(429);
    expect(limited.headers).toEqual({ 'Retry-After': '3' });
    const down = llmErrorToAppError(new LlmError('provider_down', 'down', { provider: 'openai-compatible' }));
    expect(down.status).toBe(503);
    expect(down.code).toBe('SERVICE_UNAVAILABLE');
  });
});
