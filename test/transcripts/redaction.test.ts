import { describe, expect, it } from 'vitest';
import {
  compileRedactionPattern,
  compileRedactionPatterns,
  createRedactor,
  luhnValid,
} from '../../src/transcripts/redaction';

describe('redaction', () => {
  const redact = createRedactor();

  it('replaces e-mail addresses, phone numbers and Luhn-valid card numbers', () => {
    expect(redact.text('write to Ann.Lee+tag@mail.example.co.uk today')).toBe('write to [email] today');
    expect(redact.text('call +1 (415) 555-2671 or 020 7946 0958')).toBe('call [phone] or [phone]');
    expect(redact.text('card 4111 1111 1111 1111, exp 12/28')).toBe('card [card], exp 12/28');
    expect(redact.text('card 4111-1111-1111-1111')).toBe('card [card]');
    expect(redact.text('number 5500005555555559')).toBe('number [card]');
  });

  it('leaves what only looks like those alone', () => {
    // Fails the Luhn check: an order number, not a card. (It still has too many digits for a phone.)
    expect(redact.text('order 4111 1111 1111 1112')).toBe('order 4111 1111 1111 1112');
    expect(redact.text('on 2026-01-02 at 10:30')).toBe('on 2026-01-02 at 10:30');
    expect(redact.text('ticket 12345, room 42')).toBe('ticket 12345, room 42');
    expect(redact.text('not@an address')).toBe('not@an address');
    expect(luhnValid('79927398713')).toBe(true);
    expect(luhnValid('79927398710')).toBe(false);
  });

  it('redacts every string of a JSON value, keeps keys and other values, and says whether it changed', () => {
    const trace = { type: 'text', payload: { message: 'mail a@b.io', count: 3, tags: ['x@y.org', true] }, time: 1 };
    const out = redact.json(trace);
    expect(out).toEqual({
      changed: true,
      value: { type: 'text', payload: { message: 'mail [email]', count: 3, tags: ['[email]', true] }, time: 1 },
    });
    expect(trace.payload.message).toBe('mail a@b.io');
    expect(redact.json({ type: 'text', payload: 'hello' })).toEqual({
      changed: false,
      value: { type: 'text', payload: 'hello' },
    });
  });

  it("applies the project's own RE2 patterns after the built-in ones", () => {
    const custom = createRedactor(compileRedactionPatterns(['ACC-\\d{6}', '(?i)secret\\w*']));
    expect(custom.text('account ACC-123456, SecretSauce and a@b.io')).toBe(
      'account [redacted], [redacted] and [email]',
    );
  });

  it('refuses patterns RE2 cannot run or that match the empty string, naming each', () => {
    expect(compileRedactionPattern('(?<=a)b')).toMatchObject({ ok: false, message: expect.stringContaining('RE2') });
    expect(compileRedactionPattern('(a)\\1')).toMatchObject({ ok: false });
    expect(compileRedactionPattern('a*')).toEqual({ ok: false, message: 'must not match the empty string' });
    expect(() => compileRedactionPatterns(['ok\\d', '(unclosed'])).toThrow(/patterns\.1/);
  });

  it('runs a pattern that backtracks catastrophically in V8 in linear time (no timed assertion: it returns)', () => {
    const evil = createRedactor(compileRedactionPatterns(['(a+)+$']));
    const input = `${'a'.repeat(50_000)}!`;
    // With V8's backtracking engine this input takes longer than the age of the universe.
    expect(evil.text(input)).toBe(input);
  });
});
