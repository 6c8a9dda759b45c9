import { describe, expect, it } from 'vitest';
import { constantTimeEqual, generateApiKey, hashSecret, parseApiKey } from '../../src/auth/keys';
import { newId } from '../../src/lib/ids';

describe('API keys', () => {
  it('have the form ak.<24-hex keyID>.<secret of 32 random bytes> and store only a hash', () => {
    const key = generateApiKey();
    expect(key.apiKey).toMatch(/^ak\.[0-9a-f]{24}\.[A-Za-z0-9_-]{43}$/);
    const parsed = parseApiKey(key.apiKey)!;
    expect(parsed.keyId).toBe(key.keyId);
    expect(hashSecret(parsed.secret)).toBe(key.secretHash);
    expect(key.secretHash).not.toContain(parsed.secret);
    expect(generateApiKey().apiKey).not.toBe(key.apiKey);
  });

  it('refuses malformed keys', () => {
    for (const bad of [
      '',
      'ak.',
      'ak.123.abc',
      `ak.${'g'.repeat(24)}.${'a'.repeat(43)}`,
      `xx.${'a'.repeat(24)}.${'a'.repeat(43)}`,
    ]) {
      expect(parseApiKey(bad)).toBeNull();
    }
  });

  it('compares secrets without short-circuiting on length or prefix', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
  });
});

describe('IDs', () => {
  it('are 24 lowercase hex characters that sort by creation time', () => {
    const a = newId(Date.UTC(2026, 0, 1));
    const b = newId(Date.UTC(2026, 0, 2));
    expect(a).toMatch(/^[0-9a-f]{24}$/);
    expect(a < b).toBe(true);
    const many = new Set(Array.from({ length: 1000 }, () => newId()));
    expect(many.size).toBe(1000);
  });
});
