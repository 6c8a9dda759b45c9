import { describe, expect, it } from 'vitest';
import { storedTimestamps } from '../../src/analytics/usage-event-writer';
import { storedTimestamp } from '../../src/db/client';

/**
 * The writer's per-batch timestamp texts (one toISOString per minute, the seconds and milliseconds
 * appended) must be storedTimestamp's text for every time, on both engines: the column is compared
 * and read back by Prisma as that text.
 */
describe('storedTimestamps', () => {
  const times = (): number[] => {
    const out: number[] = [];
    // Every millisecond of a second, around minute, hour, day, month and year edges.
    for (const edge of [
      Date.UTC(2026, 0, 1),
      Date.UTC(2024, 1, 29, 23, 59, 59),
      Date.UTC(1970, 0, 1),
      Date.UTC(2199, 11, 31, 23, 59),
      Date.UTC(9999, 11, 31, 23, 59, 59),
      Date.UTC(1969, 11, 31, 23, 59, 59),
      Date.UTC(-1, 5, 6, 7, 8, 9),
      Date.UTC(10_000, 0, 1),
    ]) {
      for (let ms = -1500; ms <= 1500; ms++) out.push(edge + ms);
    }
    // A batch-like spread: random times within a few minutes, and within thirty days, out of order.
    let s = 7;
    const rnd = () => {
      s = (s * 16807) % 2147483647;
      return s / 2147483647;
    };
    const base = Date.UTC(2026, 10, 25, 11, 58, 30, 17);
    for (let i = 0; i < 5000; i++) out.push(base + Math.floor(rnd() * 240_000) - 120_000);
    for (let i = 0; i < 5000; i++) out.push(base - Math.floor(rnd() * 30 * 86_400_000));
    return out;
  };

  for (const provider of ['sqlite', 'postgresql'] as const) {
    it(`gives storedTimestamp's text for every time (${provider})`, () => {
      const timestampOf = storedTimestamps(provider);
      for (const ms of times()) {
        const date = new Date(ms);
        expect(timestampOf(date), String(ms)).toBe(storedTimestamp(provider, date));
      }
    });
  }

  it('refuses an invalid date as storedTimestamp does', () => {
    const timestampOf = storedTimestamps('sqlite');
    timestampOf(new Date(Date.UTC(2026, 0, 1)));
    expect(() => timestampOf(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => storedTimestamp('sqlite', new Date(Number.NaN))).toThrow(RangeError);
  });
});
