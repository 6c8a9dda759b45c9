/**
 * ISO 8601 date-times as SPEC.md "Timestamps" requires them: a zone designator is mandatory (Z or
 * ±hh:mm), seconds and fractions are optional, and the date must exist (no 2026-02-30).
 */
const timestampPattern =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

export type TimestampProblem = 'format' | 'zone' | 'calendar';

/** Parses a timestamp, or says what is wrong with it. */
export function parseTimestamp(value: string): { ok: true; date: Date } | { ok: false; problem: TimestampProblem } {
  const m = timestampPattern.exec(value);
  if (!m) {
    const noZone = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value);
    return { ok: false, problem: noZone ? 'zone' : 'format' };
  }
  const [, y, mo, d, h, mi, s, frac, , sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = s === undefined ? 0 : Number(s);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return { ok: false, problem: 'calendar' };
  if (hour > 23 || minute > 59 || second > 59) return { ok: false, problem: 'calendar' };
  let offsetMinutes = 0;
  if (sign) {
    const ohn = Number(oh);
    const omn = Number(om);
    if (ohn > 23 || omn > 59) return { ok: false, problem: 'calendar' };
    offsetMinutes = (sign === '-' ? -1 : 1) * (ohn * 60 + omn);
  }
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMinutes * 60_000;
  return { ok: true, date: new Date(utc) };
}

export const timestampProblemMessage: Record<TimestampProblem, string> = {
  format: 'must be an ISO 8601 date-time such as 2026-01-02T03:04:05Z',
  zone: 'must carry a zone designator (Z or an offset such as +02:00)',
  calendar: 'is not a real date or time',
};

/** Responses carry UTC with milliseconds: 2026-01-02T03:04:05.678Z. */
export function formatTimestamp(date: Date): string {
  return date.toISOString();
}
