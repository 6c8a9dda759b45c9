import { hourMs } from './usage-metrics';

/**
 * Calendar buckets of a time series in an IANA time zone: local days, ISO weeks (Monday) and
 * months, whose lengths follow the zone's daylight-saving changes (a 23- or 25-hour day). Hour
 * buckets are UTC hours, the resolution of the counters.
 */

export const granularities = ['hour', 'day', 'week', 'month'] as const;
export type Granularity = (typeof granularities)[number];

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Whether `name` is a time zone this runtime knows (IANA names such as Europe/Berlin, or UTC). */
export function isTimeZone(name: string): boolean {
  try {
    formatterFor(name);
    return true;
  } catch {
    return false;
  }
}

interface LocalTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function localTime(timeZone: string, instant: number): LocalTime {
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(instant))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  return {
    year: parts.year!,
    month: parts.month!,
    day: parts.day!,
    hour: parts.hour!,
    minute: parts.minute!,
    second: parts.second!,
  };
}

/** The zone's offset from UTC at `instant`, in milliseconds (local = UTC + offset). */
function offsetAt(timeZone: string, instant: number): number {
  const t = localTime(timeZone, instant);
  const asUtc = Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute, t.second);
  return asUtc - Math.floor(instant / 1000) * 1000;
}

/** A local calendar date as a sortable number of days (the day count of that date read as UTC). */
function dayNumber(year: number, month: number, day: number): number {
  return Math.floor(Date.UTC(year, month - 1, day) / 86_400_000);
}

/**
 * The first instant at which the local date is `year-month-day` or later: local midnight, or the
 * end of the gap when the clocks skip midnight (a daylight-saving change at 00:00).
 */
export function startOfLocalDay(timeZone: string, year: number, month: number, day: number): number {
  const naive = Date.UTC(year, month - 1, day);
  const target = dayNumber(year, month, day);
  const onOrAfter = (instant: number) => {
    const t = localTime(timeZone, instant);
    return dayNumber(t.year, t.month, t.day) >= target;
  };
  // Midnight under the offset in force a day before and a day after: one of them is it, unless
  // midnight does not exist locally.
  const candidates = [
    ...new Set([naive - offsetAt(timeZone, naive - 86_400_000), naive - offsetAt(timeZone, naive + 86_400_000)]),
  ]
    .filter((c) => {
      const t = localTime(timeZone, c);
      return dayNumber(t.year, t.month, t.day) === target && t.hour === 0 && t.minute === 0 && t.second === 0;
    })
    .sort((a, b) => a - b);
  if (candidates.length) return candidates[0]!;
  // Midnight was skipped: search the first minute of the day between the two guesses.
  let lo = naive - 26 * hourMs; // surely before (no zone is more than 14 h ahead of UTC, plus a gap)
  let hi = naive + 26 * hourMs; // surely on or after
  while (hi - lo > 60_000) {
    const mid = lo + Math.floor((hi - lo) / 2 / 60_000) * 60_000;
    if (onOrAfter(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

function addDays(year: number, month: number, day: number, days: number): [number, number, number] {
  const d = new Date(Date.UTC(year, month - 1, day + days));
  return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate()];
}

/** The local calendar start of the bucket holding `instant`, as [year, month, day]. */
function bucketDate(timeZone: string, granularity: Exclude<Granularity, 'hour'>, instant: number) {
  const t = localTime(timeZone, instant);
  if (granularity === 'day') return [t.year, t.month, t.day] as [number, number, number];
  if (granularity === 'month') return [t.year, t.month, 1] as [number, number, number];
  const weekday = new Date(Date.UTC(t.year, t.month - 1, t.day)).getUTCDay(); // 0 = Sunday
  return addDays(t.year, t.month, t.day, -((weekday + 6) % 7)); // back to Monday
}

function nextBucketDate(granularity: Exclude<Granularity, 'hour'>, [y, m, d]: [number, number, number]) {
  if (granularity === 'day') return addDays(y, m, d, 1);
  if (granularity === 'week') return addDays(y, m, d, 7);
  return m === 12 ? ([y + 1, 1, 1] as [number, number, number]) : ([y, m + 1, 1] as [number, number, number]);
}

/**
 * The boundaries of the buckets that cover [start, end): the start of the bucket holding `start`,
 * each following bucket start, and last the end of the bucket holding the last instant before
 * `end`. Returns null when there would be more than `maxBuckets`.
 */
export function bucketBoundaries(
  start: Date,
  end: Date,
  granularity: Granularity,
  timeZone: string,
  maxBuckets: number,
): number[] | null {
  const from = start.getTime();
  const to = end.getTime();
  if (to <= from) return [];
  if (granularity === 'hour') {
    const first = Math.floor(from / hourMs);
    const last = Math.ceil(to / hourMs);
    if (last - first > maxBuckets) return null;
    const out: number[] = [];
    for (let h = first; h <= last; h++) out.push(h * hourMs);
    return out;
  }
  let date = bucketDate(timeZone, granularity, from);
  const out = [startOfLocalDay(timeZone, ...date)];
  while (out[out.length - 1]! < to) {
    if (out.length > maxBuckets) return null;
    date = nextBucketDate(granularity, date);
    const next = startOfLocalDay(timeZone, ...date);
    // A local date that the zone skipped altogether (Samoa, 30 December 2011) is no bucket.
    if (next > out[out.length - 1]!) out.push(next);
  }
  return out;
}
