import { describe, expect, it } from 'vitest';
import { decodeUsageCursor, encodeUsageCursor } from '../../src/analytics/query';
import { bucketBoundaries, isTimeZone, startOfLocalDay } from '../../src/analytics/time-buckets';

const iso = (ms: number) => new Date(ms).toISOString();
const boundaries = (from: string, to: string, granularity: 'hour' | 'day' | 'week' | 'month', tz: string) =>
  bucketBoundaries(new Date(from), new Date(to), granularity, tz, 2000)!.map(iso);

describe('local calendar buckets', () => {
  it('finds local midnight on both sides of a daylight-saving change', () => {
    expect(iso(startOfLocalDay('America/New_York', 2026, 3, 8))).toBe('2026-03-08T05:00:00.000Z');
    expect(iso(startOfLocalDay('America/New_York', 2026, 3, 9))).toBe('2026-03-09T04:00:00.000Z');
    expect(iso(startOfLocalDay('America/New_York', 2026, 11, 1))).toBe('2026-11-01T04:00:00.000Z');
    expect(iso(startOfLocalDay('America/New_York', 2026, 11, 2))).toBe('2026-11-02T05:00:00.000Z');
    expect(iso(startOfLocalDay('Europe/Berlin', 2026, 3, 30))).toBe('2026-03-29T22:00:00.000Z');
    expect(iso(startOfLocalDay('Asia/Kolkata', 2026, 1, 10))).toBe('2026-01-09T18:30:00.000Z');
    expect(iso(startOfLocalDay('UTC', 2026, 1, 10))).toBe('2026-01-10T00:00:00.000Z');
  });

  it('starts a day whose midnight the clocks skip when the day begins (Havana, Santiago)', () => {
    // Cuba moves from 00:00 to 01:00 on 8 March 2026: the day begins at 01:00 CDT.
    expect(iso(startOfLocalDay('America/Havana', 2026, 3, 8))).toBe('2026-03-08T05:00:00.000Z');
    expect(iso(startOfLocalDay('America/Santiago', 2026, 9, 6))).toBe('2026-09-06T04:00:00.000Z');
  });

  it('makes a 23-hour and a 25-hour day around the changes', () => {
    const spring = boundaries('2026-03-07T12:00:00Z', '2026-03-09T12:00:00Z', 'day', 'America/New_York');
    expect(spring).toEqual([
      '2026-03-07T05:00:00.000Z',
      '2026-03-08T05:00:00.000Z',
      '2026-03-09T04:00:00.000Z',
      '2026-03-10T04:00:00.000Z',
    ]);
    const fall = boundaries('2026-11-01T12:00:00Z', '2026-11-02T06:00:00Z', 'day', 'America/New_York');
    expect(fall).toEqual(['2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z', '2026-11-03T05:00:00.000Z']);
    expect(new Date(fall[1]!).getTime() - new Date(fall[0]!).getTime()).toBe(25 * 3_600_000);
  });

  it('has no bucket for a date the zone skipped (Samoa, 30 December 2011)', () => {
    expect(boundaries('2011-12-29T12:00:00Z', '2011-12-31T12:00:00Z', 'day', 'Pacific/Apia')).toEqual([
      '2011-12-29T10:00:00.000Z', // 29 December, UTC−10
      '2011-12-30T10:00:00.000Z', // 31 December, UTC+14
      '2011-12-31T10:00:00.000Z', // 1 January, which holds the range's end (02:00 local)
      '2012-01-01T10:00:00.000Z',
    ]);
  });

  it('begins weeks on Monday and months on the first, at local midnight', () => {
    expect(boundaries('2026-01-07T12:00:00Z', '2026-01-11T23:00:00Z', 'week', 'Europe/Berlin')).toEqual([
      '2026-01-04T23:00:00.000Z',
      '2026-01-11T23:00:00.000Z',
    ]);
    expect(boundaries('2026-03-15T12:00:00Z', '2026-04-02T00:00:00Z', 'month', 'Europe/Berlin')).toEqual([
      '2026-02-28T23:00:00.000Z',
      '2026-03-31T22:00:00.000Z',
      '2026-04-30T22:00:00.000Z',
    ]);
  });

  it('uses UTC hours for hour buckets and refuses too many buckets', () => {
    expect(boundaries('2026-03-15T10:30:00Z', '2026-03-15T12:00:00Z', 'hour', 'Asia/Kolkata')).toEqual([
      '2026-03-15T10:00:00.000Z',
      '2026-03-15T11:00:00.000Z',
      '2026-03-15T12:00:00.000Z',
    ]);
    expect(
      bucketBoundaries(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-05T00:00:00Z'), 'hour', 'UTC', 95),
    ).toBeNull();
    expect(
      bucketBoundaries(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-05T00:00:00Z'), 'hour', 'UTC', 96),
    ).toHaveLength(97);
  });

  it('knows IANA zone names', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
  });
});

describe('the usage cursor', () => {
  it('packs an hour and a position within it into one safe integer', () => {
    const hour = Math.floor(Date.UTC(2200, 0, 1) / 3_600_000);
    for (const seen of [0, 1, 499, 2 ** 32 - 1]) {
      const cursor = encodeUsageCursor(hour, seen);
      expect(Number.isSafeInteger(cursor)).toBe(true);
      expect(decodeUsageCursor(cursor)).toEqual({ hour, seenInHour: seen });
    }
  });
});
