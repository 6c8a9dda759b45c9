import { describe, expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema';
import { isoString } from '../../src/graphql/schema/scalars';

describe('the DateTime scalar', () => {
  it('prints what toISOString prints, for every year from 0000 to 9999 and beyond', () => {
    const samples = [
      0,
      -1,
      1,
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
      Date.UTC(2000, 0, 1),
      Date.UTC(1999, 11, 31, 23, 59, 59, 999),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(10000, 0, 1),
      Date.UTC(0, 0, 1) - 1,
      Date.UTC(0, 0, 1),
      -62198755200000, // -000001-01-01
      8.64e15,
      -8.64e15,
    ].map((t) => new Date(t));
    const year0 = -62167219200000;
    const year10000 = 253402300800000;
    for (let i = 0; i < 20000; i++) {
      // Spread over 0000-9999 with a margin on both sides, and over every millisecond digit.
      const span = year10000 - year0;
      samples.push(new Date(Math.floor(year0 - span * 0.05 + Math.random() * span * 1.1)));
    }
    for (const date of samples) expect(isoString(date)).toBe(date.toISOString());
  });

  it('throws for an invalid date, as toISOString does', () => {
    expect(() => isoString(new Date(Number.NaN))).toThrow(RangeError);
  });

  it('is the scalar the schema serialises dates with', () => {
    const scalar = schema.getType('DateTime') as { serialize(value: unknown): unknown };
    const date = new Date(Date.UTC(2026, 10, 25, 9, 4, 5, 6));
    expect(scalar.serialize(date)).toBe('2026-11-25T09:04:05.006Z');
    expect(scalar.serialize('2026-11-25T09:04:05.006+00:00')).toBe('2026-11-25T09:04:05.006Z');
  });
});
