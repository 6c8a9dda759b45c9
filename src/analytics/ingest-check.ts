import { AppError, issuesToDetails, summarizeDetails } from '../lib/errors';
import { idPattern } from '../lib/ids';
import { isStorableText } from '../lib/storable-text';
import { parseTimestamp } from '../lib/time';
import { usageLimits } from './events';
import { creditTypes, type UsageEventKind, usageEventKinds } from './usage-metrics';
import { type IngestedUsageEvent, maxFutureSkewMs, usageEventBatchBodySchema } from './validation';

/**
 * The ingestion batch's check (POST /v1/usage/events, GraphQL recordUsageEvents), once per batch.
 *
 * The zod schema `ingestedUsageEventSchema` (./validation.ts) is the rule; these hand-written
 * checks say the same thing for the common case, at a fraction of its cost (a batch of 1,000 cost
 * more to check with zod than to write). A batch passes when every event passes them; when any
 * does not, the zod schema checks the whole batch again and its issues are the error, so an error
 * body is exactly the one the schema gives (DECISIONS.md, `details` such as `events.3.timestamp`).
 * test/analytics/ingest-check.test.ts holds both to the same answers on a corpus of good and bad
 * events.
 */

type Check = (value: unknown) => boolean;

const storable = (max: number, min: number): Check => {
  return (v) => typeof v === 'string' && v.length >= min && v.length <= max && isStorableText(v);
};
const text = (max: number) => storable(max, 1);
const optionalText = (max: number) => storable(max, 0);
const boolean: Check = (v) => typeof v === 'boolean';
const tokens: Check = (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= usageLimits.tokens;
const creditType: Check = (v) => v === creditTypes[0] || v === creditTypes[1];

interface Field {
  check: Check;
  required: boolean;
}
const required = (check: Check): Field => ({ check, required: true });
const optional = (check: Check): Field => ({ check, required: false });

/** The members of each kind: as `ingestedKinds` in ./validation.ts. */
const kindFields: Record<UsageEventKind, Record<string, Field>> = {
  interaction: { type: required(text(usageLimits.actionType)) },
  credit: {
    type: required(creditType),
    model: required(text(usageLimits.id)),
    tokens: required(tokens),
    diagramID: optional(optionalText(usageLimits.id)),
    nodeID: optional(optionalText(usageLimits.id)),
  },
  function_call: {
    functionID: required(text(usageLimits.id)),
    name: optional(optionalText(usageLimits.name)),
    success: required(boolean),
  },
  api_call: {
    apiToolID: required(text(usageLimits.id)),
    name: optional(optionalText(usageLimits.name)),
    success: required(boolean),
  },
  integration_call: { integrationToolName: required(text(usageLimits.name)), success: required(boolean) },
  kb_document: { documentID: required(text(usageLimits.id)) },
  transcript: { transcriptID: optional(text(usageLimits.id)) },
  agent_invocation: {
    agentID: required(text(usageLimits.id)),
    name: optional(optionalText(usageLimits.name)),
    success: required(boolean),
  },
  intent: { name: required(text(usageLimits.name)) },
};

/** Per kind: every member it may have (a Map, so that `toString` or `__proto__` is no member), and the required ones. */
const kinds = new Map<string, { fields: Map<string, Field>; required: string[] }>(
  usageEventKinds.map((kind) => {
    const own = Object.entries(kindFields[kind]);
    return [
      kind,
      {
        fields: new Map<string, Field>(own),
        required: own.filter(([, f]) => f.required).map(([name]) => name),
      },
    ] as const;
  }),
);

/** The value of the two ASCII digits at `at`, or -1 when either is not a digit. */
function twoDigits(text: string, at: number): number {
  const a = text.charCodeAt(at) - 48;
  const b = text.charCodeAt(at + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

const monthDays = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The time (ms) of a UTC timestamp in its usual shapes, `2026-01-02T03:04:05Z` and
 * `2026-01-02T03:04:05.678Z` (T or t, Z or z), read digit by digit: no regular expression, no
 * match array, no substrings. Undefined when `text` has another shape (an offset, no seconds, another
 * number of fraction digits, or no timestamp at all): then `parseTimestamp` (src/lib/time.ts),
 * the rule, reads it. For the shapes read here both give the same time and refuse the same
 * calendar errors (test/analytics/ingest-check.test.ts holds them to it); NaN when the date or
 * time does not exist.
 */
export function utcTimestampMs(text: string): number | undefined {
  const length = text.length;
  if (length !== 20 && length !== 24) return undefined;
  const last = text.charCodeAt(length - 1);
  if (last !== 90 && last !== 122) return undefined; // Z z
  const t = text.charCodeAt(10);
  if (t !== 84 && t !== 116) return undefined; // T t
  if (
    text.charCodeAt(4) !== 45 || // -
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(13) !== 58 || // :
    text.charCodeAt(16) !== 58
  ) {
    return undefined;
  }
  const century = twoDigits(text, 0);
  const yy = twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  if ((century | yy | month | day | hour | minute | second) < 0) return undefined;
  let ms = 0;
  if (length === 24) {
    if (text.charCodeAt(19) !== 46) return undefined; // .
    const tens = twoDigits(text, 20);
    const units = text.charCodeAt(22) - 48;
    if (tens < 0 || units < 0 || units > 9) return undefined;
    ms = tens * 10 + units;
  }
  const year = century * 100 + yy;
  if (month < 1 || month > 12 || day < 1) return Number.NaN;
  if (day > (month === 2 && isLeapYear(year) ? 29 : monthDays[month]!)) return Number.NaN;
  if (hour > 23 || minute > 59 || second > 59) return Number.NaN;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms);
}

const commonMembers = new Set(['kind', 'projectID', 'environment', 'timestamp', 'userID', 'eventID']);
const environmentText = text(64);
const userIdText = text(usageLimits.userId);
const eventIdText = text(usageLimits.idempotencyKey);

/** The project IDs and environments already found good in a batch (the sent text, no prefixed copy per event). */
interface SeenInBatch {
  projects: Set<string>;
  environments: Set<string>;
}

/**
 * One event checked by hand, or undefined when it breaks a rule (or may: anything unusual is left
 * to the schema). `latest` is the latest timestamp allowed (ms); `seen` remembers the project IDs
 * and environments already found good in this batch. Exported for the test that holds it to the schema.
 */
export function checkIngestedEvent(
  value: unknown,
  latest: number,
  seen: SeenInBatch = { projects: new Set(), environments: new Set() },
): IngestedUsageEvent | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const source = value as Record<string, unknown>;
  const kind = kinds.get(source.kind as string);
  if (!kind || !Object.hasOwn(source, 'kind')) return undefined;
  const out: Record<string, unknown> = { kind: source.kind };
  let hasProject = false;
  let hasEnvironment = false;
  let kindMembers = 0;
  for (const key of Object.keys(source)) {
    const v = source[key];
    // A member sent as null counts as absent (the schema's dropNulls).
    if (v === null) continue;
    // Undefined (never in JSON) is absent too, if the member is one the event may have.
    if (v === undefined) {
      if (!commonMembers.has(key) && !kind.fields.has(key)) return undefined;
      continue;
    }
    switch (key) {
      case 'kind':
        continue;
      case 'projectID':
        if (typeof v !== 'string') return undefined;
        if (!seen.projects.has(v)) {
          if (!idPattern.test(v)) return undefined;
          seen.projects.add(v);
        }
        hasProject = true;
        break;
      case 'environment':
        if (typeof v !== 'string') return undefined;
        if (!seen.environments.has(v)) {
          if (!environmentText(v)) return undefined;
          seen.environments.add(v);
        }
        hasEnvironment = true;
        break;
      case 'timestamp': {
        if (typeof v !== 'string') return undefined;
        let ms = utcTimestampMs(v);
        if (ms === undefined) {
          const parsed = parseTimestamp(v);
          if (!parsed.ok) return undefined;
          ms = parsed.date.getTime();
        }
        // NaN (no such date or time) fails here too.
        if (!(ms >= 0 && ms <= latest)) return undefined;
        out.timestamp = new Date(ms);
        continue;
      }
      case 'userID':
        if (!userIdText(v)) return undefined;
        break;
      case 'eventID':
        if (!eventIdText(v)) return undefined;
        break;
      default: {
        const field = kind.fields.get(key);
        if (!field?.check(v)) return undefined;
        if (field.required) kindMembers++;
      }
    }
    out[key] = v;
  }
  if (!hasProject || !hasEnvironment || kindMembers !== kind.required.length) return undefined;
  return out as unknown as IngestedUsageEvent;
}

/**
 * The events of a batch (the `events` member of POST /v1/usage/events, or of the GraphQL field),
 * checked; throws VALIDATION_FAILED with the schema's details (paths `events.N.member`) otherwise.
 */
export function parseIngestedBatch(events: unknown, now: number = Date.now()): IngestedUsageEvent[] {
  if (Array.isArray(events) && events.length >= 1 && events.length <= usageLimits.batch) {
    const latest = now + maxFutureSkewMs;
    const seen: SeenInBatch = { projects: new Set(), environments: new Set() };
    const out: IngestedUsageEvent[] = new Array(events.length);
    let i = 0;
    for (; i < events.length; i++) {
      const event = checkIngestedEvent(events[i], latest, seen);
      if (!event) break;
      out[i] = event;
    }
    if (i === events.length) return out;
  }
  // Something is wrong (or unusual): the schema decides and words the error.
  const parsed = usageEventBatchBodySchema.safeParse({ events });
  if (parsed.success) return parsed.data.events;
  const details = issuesToDetails(parsed.error.issues);
  throw new AppError('VALIDATION_FAILED', summarizeDetails(details), { details });
}
