import { describe, expect, it } from 'vitest';
import { checkIngestedEvent, parseIngestedBatch, utcTimestampMs } from '../../src/analytics/ingest-check';
import { maxFutureSkewMs, usageEventBatchBodySchema } from '../../src/analytics/validation';
import { AppError, issuesToDetails } from '../../src/lib/errors';
import { parseTimestamp } from '../../src/lib/time';

/**
 * The hand-written check of ingested events (src/analytics/ingest-check.ts) against the rule it
 * stands for, the zod schema: on a corpus of good events and of each good event with one member
 * made wrong (or odd) in every way we could think of, both accept the same events with the same
 * output and refuse the same ones, and a refused batch gets exactly the schema's details.
 */

const projectID = '0123456789abcdef01234567';
const now = Date.parse('2026-03-01T12:00:00Z');
const common = { projectID, environment: 'production' };

const good: Record<string, unknown>[] = [
  { ...common, kind: 'interaction', type: 'launch' },
  { ...common, kind: 'interaction', type: 'text', userID: 'u-1', eventID: 'e-1', timestamp: '2026-02-01T09:15:00Z' },
  { ...common, kind: 'credit', type: 'llm-input', model: 'gpt-4o', tokens: 0 },
  { ...common, kind: 'credit', type: 'llm-output', model: 'm', tokens: 1_000_000_000, diagramID: '', nodeID: 'n' },
  { ...common, kind: 'function_call', functionID: 'fn', success: false },
  { ...common, kind: 'function_call', functionID: 'fn', name: '', success: true },
  { ...common, kind: 'api_call', apiToolID: 'a', name: 'x', success: true },
  { ...common, kind: 'integration_call', integrationToolName: 'zendesk', success: true },
  { ...common, kind: 'kb_document', documentID: 'doc' },
  { ...common, kind: 'transcript' },
  { ...common, kind: 'transcript', transcriptID: 't' },
  { ...common, kind: 'agent_invocation', agentID: 'ag', name: 'Support', success: true },
  { ...common, kind: 'intent', name: 'buy 🍕' },
  { ...common, kind: 'intent', name: 'x', userID: null, eventID: null, timestamp: null },
  { ...common, kind: 'intent', name: 'x', timestamp: '2026-03-01T13:04:59+01:00' },
  { ...common, kind: 'intent', name: 'x', timestamp: '1970-01-01T00:00:00.000Z' },
  { ...common, kind: 'intent', name: 'x', timestamp: '2026-03-01T12:04:59.999Z' },
];

/** Values that break (or test the edges of) some rule somewhere. */
const odd: unknown[] = [
  null,
  undefined,
  '',
  'x',
  'a'.repeat(64),
  'a'.repeat(65),
  'a'.repeat(128),
  'a'.repeat(129),
  'a'.repeat(256),
  'a'.repeat(257),
  'nul\u0000byte',
  'lone \ud800 surrogate',
  'pair \ud83c\udf55 ok',
  0,
  -0,
  -1,
  1.5,
  1_000_000_000,
  1_000_000_001,
  Number.MAX_SAFE_INTEGER + 1,
  true,
  false,
  [],
  ['production'],
  {},
  'llm-input',
  'llm-middle',
  'interaction',
  projectID,
  projectID.toUpperCase(),
  `${projectID}0`,
  '2026-02-30T00:00:00Z',
  '2026-01-01T00:00:00',
  '2999-01-01T00:00:00Z',
  '1969-12-31T23:59:59Z',
  '2026-03-01T12:05:00.001Z',
  '2026-03-01T12:05:00.000Z',
  '2026-03-01T12:00:00+25:00',
  'not a time',
  '2026-02-28t23:59:59.999z',
  '2024-02-29T00:00:00Z',
  '2026-02-29T00:00:00.000Z',
  '2026-03-01T12:00:00.5Z',
  '2026-03-01T12:00:00.1234Z',
  '2026-03-01T24:00:00Z',
  '2026-03-01T12:60:00.000Z',
  '2026-13-01T00:00:00Z',
  '0050-01-01T00:00:00Z',
  '2026-03-01T12:00:0aZ',
  '2026-03-01 12:00:00Z',
];

const members = [
  'kind',
  'projectID',
  'environment',
  'timestamp',
  'userID',
  'eventID',
  'type',
  'model',
  'tokens',
  'diagramID',
  'nodeID',
  'functionID',
  'apiToolID',
  'integrationToolName',
  'documentID',
  'transcriptID',
  'agentID',
  'name',
  'success',
  'unknownMember',
  'toString',
  '__proto__',
  'constructor',
];

function variants(): unknown[] {
  const out: unknown[] = [...good, null, 'event', 3, [], [good[0]], {}];
  for (const event of good) {
    for (const member of members) {
      const without = { ...event };
      delete without[member];
      out.push(without);
      for (const value of odd) {
        const changed: Record<string, unknown> = { ...event };
        // defineProperty, so that __proto__ becomes an own member as JSON.parse makes it.
        Object.defineProperty(changed, member, { value, enumerable: true, writable: true, configurable: true });
        out.push(changed);
      }
    }
  }
  // A GraphQL-coerced input object has no prototype.
  out.push(Object.assign(Object.create(null), good[0]));
  return out;
}

/** What the schema answers for one event, with the clock at `now`. */
function bySchema(event: unknown) {
  const real = Date.now;
  Date.now = () => now;
  try {
    return usageEventBatchBodySchema.safeParse({ events: [event] });
  } finally {
    Date.now = real;
  }
}

describe('the ingestion check by hand agrees with the zod schema', () => {
  const corpus = variants();

  it('accepts and refuses the same events, with the same output', () => {
    let accepted = 0;
    let refused = 0;
    for (const event of corpus) {
      const schema = bySchema(event);
      const fast = checkIngestedEvent(event, now + maxFutureSkewMs);
      const label = JSON.stringify(event, (_k, v) => (v === undefined ? '(undefined)' : v)) ?? String(event);
      if (schema.success) {
        expect(fast, `accepted by the schema: ${label}`).toEqual(schema.data.events[0]);
        accepted++;
      } else {
        expect(fast, `refused by the schema: ${label}`).toBeUndefined();
        refused++;
      }
    }
    // The corpus exercises both answers in bulk.
    expect(accepted).toBeGreaterThan(200);
    expect(refused).toBeGreaterThan(2000);
  });

  it("refuses a batch with exactly the schema's details", () => {
    const batch = [good[0], { ...common, kind: 'credit', type: 'llm-middle', model: 'm', tokens: -5 }, { kind: 'x' }];
    let thrown: unknown;
    try {
      parseIngestedBatch(batch, now);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(AppError);
    const parsed = usageEventBatchBodySchema.safeParse({ events: batch });
    expect(parsed.success).toBe(false);
    const details = issuesToDetails(parsed.error!.issues);
    expect((thrown as AppError).details).toEqual(details);
    expect((thrown as AppError).message).toContain('events.1.type');
  });

  it('checks the size of the batch as the schema does', () => {
    expect(() => parseIngestedBatch([], now)).toThrow(/events: must have at least 1 item/);
    expect(() =>
      parseIngestedBatch(
        Array.from({ length: 1001 }, () => good[0]),
        now,
      ),
    ).toThrow(/events: must have at most 1000 items/);
    expect(() => parseIngestedBatch({ 0: good[0] }, now)).toThrow(AppError);
    expect(
      parseIngestedBatch(
        Array.from({ length: 1000 }, () => good[1]),
        now,
      ),
    ).toHaveLength(1000);
  });
});

describe('the timestamp read digit by digit agrees with parseTimestamp', () => {
  /** What parseTimestamp says, as utcTimestampMs says it for the shapes it reads: a time, or NaN. */
  const rule = (text: string) => {
    const parsed = parseTimestamp(text);
    return parsed.ok ? parsed.date.getTime() : Number.NaN;
  };

  it('gives the same time, or the same refusal, for every shape it reads', () => {
    const texts: string[] = [];
    for (const year of [
      '0000',
      '0050',
      '0099',
      '0100',
      '1900',
      '1969',
      '1970',
      '2000',
      '2024',
      '2026',
      '2100',
      '9999',
    ]) {
      for (let month = 0; month <= 13; month++) {
        for (const day of [0, 1, 28, 29, 30, 31, 32]) {
          const date = `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
          texts.push(`${date}T00:00:00Z`, `${date}t23:59:59.999z`);
        }
      }
    }
    for (const time of ['23:59:59', '24:00:00', '23:60:00', '23:59:60', '99:99:99', '00:00:00']) {
      texts.push(`2026-03-01T${time}Z`, `2026-03-01T${time}.000Z`);
    }
    for (let ms = 0; ms < 1000; ms++) texts.push(`2026-03-01T12:00:00.${String(ms).padStart(3, '0')}Z`);
    let read = 0;
    for (const text of texts) {
      const ms = utcTimestampMs(text);
      expect(ms, text).not.toBeUndefined();
      expect(ms, text).toEqual(rule(text));
      read++;
    }
    expect(read).toBe(texts.length);
  });

  it('leaves every other shape to parseTimestamp', () => {
    for (const text of [
      '2026-03-01T12:00Z',
      '2026-03-01T12:00:00+01:00',
      '2026-03-01T12:00:00.5Z',
      '2026-03-01T12:00:00.12345Z',
      '2026-03-01T12:00:00',
      '2026-03-01 12:00:00Z',
      '2026-03-01T12:00:00.12aZ',
      '2026/03/01T12:00:00Z',
      '2026-03-01T12-00-00Z',
      '2026-03-01T12:00:00.000+00:00',
      '+2026-3-01T12:00:00Z',
      '２０２６-03-01T12:00:00Z',
      '',
    ]) {
      expect(utcTimestampMs(text), text).toBeUndefined();
    }
  });
});
