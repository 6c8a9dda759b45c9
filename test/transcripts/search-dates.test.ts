import { describe, expect, it } from 'vitest';
import { toDate } from '../../src/transcripts/search-page';

/** toDate as it was before SQLite's stored text got its own reader: the reference. */
function viaDateParse(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  if (typeof value === 'number' || typeof value === 'bigint') return new Date(Number(value));
  const text = String(value);
  const zoned = /(?:[zZ]|[+-]\d\d:?\d\d)$/.test(text);
  return new Date(zoned ? text : `${text.replace(' ', 'T')}Z`);
}

const pad = (n: number, width: number) => String(n).padStart(width, '0');
const same = (value: unknown) => {
  const got = toDate(value);
  const want = viaDateParse(value);
  return got === null || want === null ? got === want : Object.is(got.getTime(), want.getTime());
};

describe('toDate (the search page reading stored date-times)', () => {
  it('answers as Date parsing does for SQLite text on every field range and past it', () => {
    const failures: string[] = [];
    const check = (text: string) => {
      if (!same(text)) failures.push(text);
    };
    for (const year of [0, 1, 50, 99, 100, 999, 1000, 1969, 1970, 2000, 2024, 2026, 9999])
      for (let month = 0; month <= 13; month++)
        for (let day = 0; day <= 32; day++) check(`${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T12:34:56.789+00:00`);
    for (let hour = 0; hour <= 25; hour++)
      for (const minute of [0, 1, 30, 59, 60, 99])
        for (const second of [0, 1, 59, 60, 61, 99])
          for (const ms of [0, 1, 500, 999])
            check(`2026-11-25T${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}.${pad(ms, 3)}+00:00`);
    expect(failures).toEqual([]);
  });

  it('answers as Date parsing does for other and malformed text, numbers and Dates', () => {
    const base = '2026-11-25T13:45:07.123+00:00';
    const values: unknown[] = [
      base,
      '2026-11-25T13:45:07.123Z',
      '2026-11-25T13:45:07.123+01:00',
      '2026-11-25T13:45:07.123-00:00',
      '2026-11-25T13:45:07.123+0000',
      '2026-11-25T13:45:07.123',
      '2026-11-25 13:45:07.123',
      '2026-11-25 13:45:07',
      '2026-11-25T13:45:07+00:00',
      '2026-11-25',
      '+002026-11-25T13:45:07.123Z',
      '2026-11-25T24:00:00.000+00:00',
      '2026-02-29T00:00:00.000+00:00',
      '2024-02-30T00:00:00.000+00:00',
      '2026-04-31T23:59:59.999+00:00',
      'not a date at all, 29 chars!!',
      '',
      0,
      1_795_614_026_773,
      -1,
      10n,
      new Date(1_795_614_026_773),
      null,
      undefined,
    ];
    // Every position of the stored shape replaced by each character of interest.
    for (let i = 0; i < base.length; i++)
      for (const c of ['0', '9', '-', ':', '.', 'T', ' ', '+', 'Z', 'a', '/', '٣'])
        values.push(base.slice(0, i) + c + base.slice(i + 1));
    values.push(`${base} `, base.slice(1), `0${base}`);
    expect(values.filter((v) => !same(v))).toEqual([]);
  });

  it('reads the stored shape as UTC, to the millisecond', () => {
    expect(toDate('2026-11-25T13:45:07.123+00:00')?.toISOString()).toBe('2026-11-25T13:45:07.123Z');
    expect(toDate('0100-01-01T00:00:00.000+00:00')?.toISOString()).toBe('0100-01-01T00:00:00.000Z');
    expect(toDate('2026-02-30T00:00:00.000+00:00')?.toISOString()).toBe('2026-03-02T00:00:00.000Z');
  });
});
