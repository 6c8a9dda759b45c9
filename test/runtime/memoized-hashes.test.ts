import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buttonRequestType } from '../../src/runtime/steps/shared';
import { userPrefix } from '../../src/runtime/turn-outbox';

/**
 * The button types and outbox prefixes are kept once computed (docs/performance.md, fourth 25
 * November session): the kept value must be the hash the stored data and clients already hold,
 * whatever was asked in between, and past the memo's bound.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('memoized hashes of the turn path', () => {
  it('names a button as sha256 of step and position, the same on every call', () => {
    const expected = (step: string, i: number) => `path-${sha256(`${step}:${i}`).slice(0, 10)}`;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5; i++) expect(buttonRequestType('step-a', i)).toBe(expected('step-a', i));
      expect(buttonRequestType('step-a:1', 0)).toBe(expected('step-a:1', 0));
      expect(buttonRequestType('step-a', 10)).not.toBe(buttonRequestType('step-a1', 0));
    }
    // Past the bound (the memo is cleared and filled again), still the same values.
    for (let i = 0; i < 12_000; i++) buttonRequestType(`filler-${i}`, i % 7);
    expect(buttonRequestType('step-a', 3)).toBe(expected('step-a', 3));
  });

  it("keys a user's outbox entries by sha256 of environment and user, the same on every call", () => {
    const expected = (environmentId: string, userId: string) =>
      `turn-record:${sha256(`${environmentId}\u0000${userId}`).slice(0, 32)}:`;
    const users = [
      { environmentId: 'env-1', userId: 'u1' },
      { environmentId: 'env-1', userId: 'u2' },
      { environmentId: 'env-2', userId: 'u1' },
      { environmentId: 'env-1u', userId: '1' },
    ];
    for (let round = 0; round < 3; round++) {
      for (const u of users) expect(userPrefix(u)).toBe(expected(u.environmentId, u.userId));
    }
    for (let i = 0; i < 3000; i++) userPrefix({ environmentId: 'env-x', userId: `filler-${i}` });
    for (const u of users) expect(userPrefix(u)).toBe(expected(u.environmentId, u.userId));
    expect(new Set(users.map(userPrefix)).size).toBe(users.length);
  });
});
