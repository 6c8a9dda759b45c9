import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parsePropertyValue } from '../../src/transcripts/properties';
import { type HttpResponse, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { ingestTranscript } from './helpers';

/**
 * Retyping a property while a value of it is being set (audit finding 4). On PostgreSQL (READ
 * COMMITTED) a value set between the retype's check and its commit used to be checked against the
 * old type. Each test forces one interleaving: a third connection holds a row lock that one side
 * needs after it has read the type, the test waits (in pg_stat_activity) until the other side is
 * waiting too, then lets go. SQLite runs one writer at a time, and both sides take the write lock
 * before reading the type, so it has no such interleaving to force.
 */
describeEachDatabase('retyping a property while values are set', (provider) => {
  if (provider !== 'postgresql') {
    it.skip('needs row locks of PostgreSQL to force the interleaving', () => {});
    return;
  }
  const t = useTestApp(provider);
  let blocker: pg.Client;
  let watcher: pg.Client;

  beforeAll(async () => {
    blocker = new pg.Client({ connectionString: t.app.database.url });
    watcher = new pg.Client({ connectionString: t.app.database.url });
    await blocker.connect();
    await watcher.connect();
  });
  afterAll(async () => {
    await blocker?.end();
    await watcher?.end();
  });

  /**
   * Resolves true once `n` sessions of this database wait on a lock, false if one of `requests`
   * finishes first (it did not wait: the interleaving this test forces cannot happen).
   */
  async function untilWaiting(n: number, requests: Promise<unknown>[]): Promise<boolean> {
    let finished = false;
    for (const r of requests)
      r.then(
        () => (finished = true),
        () => (finished = true),
      );
    for (;;) {
      const { rows } = await watcher.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (rows[0]!.n >= n) return true;
      if (finished) return false;
      await sleep(10);
    }
  }

  async function values(propertyId: string) {
    const db = t.app.services.db.prisma;
    const property = await db.transcriptProperty.findUniqueOrThrow({ where: { id: propertyId } });
    const rows = await db.transcriptPropertyValue.findMany({
      where: { propertyId },
      orderBy: { transcriptId: 'asc' },
      select: { transcriptId: true, value: true, numberValue: true },
    });
    // Whatever the interleaving, every stored value is canonical under the committed type.
    for (const row of rows) {
      const parsed = parsePropertyValue(property.type, row.value);
      expect(parsed, `${row.value} as ${property.type}`).toMatchObject({ ok: true, value: row.value });
    }
    return { type: property.type, rows };
  }

  async function setup(values: string[]) {
    const p = await t.app.createProject();
    const property = (
      await t.app.http('POST', '/v1/transcript-property', {
        key: p.apiKey,
        body: { projectID: p.projectID, name: 'level', type: 'string' },
      })
    ).body.property.id as string;
    const transcripts = [await ingestTranscript(t.app, p), await ingestTranscript(t.app, p)].sort();
    for (const [i, value] of values.entries()) {
      const res = await t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { propertyID: property, transcriptID: transcripts[i], value },
      });
      expect(res.status).toBe(201);
    }
    const retype = () =>
      t.app.http('PATCH', `/v1/transcript-property/${property}`, { key: p.apiKey, body: { type: 'number' } });
    const set = (transcriptID: string, value: string) =>
      t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { propertyID: property, transcriptID, value },
      });
    return { property, transcripts, retype, set };
  }

  it('checks a value set during a retype against the type the retype commits', async () => {
    const { property, transcripts, retype, set } = await setup(['5']);
    // The retype checks the values ("5" parses), then waits on this row lock to rewrite "5".
    await blocker.query('BEGIN');
    await blocker.query(
      `SELECT 1 FROM "TranscriptPropertyValue" WHERE "transcriptId" = $1 AND "propertyId" = $2 FOR UPDATE`,
      [transcripts[0], property],
    );
    let retyped: Promise<HttpResponse>;
    let setting: Promise<HttpResponse>;
    try {
      retyped = retype();
      expect(await untilWaiting(1, [retyped])).toBe(true);
      // A value that is a string but no number, set while the retype is between check and commit.
      setting = set(transcripts[1]!, 'abc');
      expect(await untilWaiting(2, [retyped, setting])).toBe(true);
    } finally {
      await blocker.query('COMMIT');
    }
    const [r, s] = await Promise.all([retyped, setting]);
    expect(r.status).toBe(204);
    expect(s.status).toBe(400);
    expect(s.body.message).toMatch(/the property is of type number/);
    expect(await values(property)).toEqual({
      type: 'number',
      rows: [{ transcriptId: transcripts[0], value: '5', numberValue: 5 }],
    });
  });

  it('refuses a retype that starts while a value that would not parse is being set', async () => {
    const { property, transcripts, retype, set } = await setup([]);
    // The value's transaction reads the type (string: "abc" is fine), then waits on this lock.
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM "Transcript" WHERE "id" = $1 FOR UPDATE`, [transcripts[0]]);
    let setting: Promise<HttpResponse>;
    let retyped: Promise<HttpResponse>;
    try {
      setting = set(transcripts[0]!, 'abc');
      expect(await untilWaiting(1, [setting])).toBe(true);
      retyped = retype();
      expect(await untilWaiting(2, [setting, retyped])).toBe(true);
    } finally {
      await blocker.query('COMMIT');
    }
    const [s, r] = await Promise.all([setting, retyped]);
    expect(s.status).toBe(201);
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/1 stored value would not parse as number/);
    expect(await values(property)).toEqual({
      type: 'string',
      rows: [{ transcriptId: transcripts[0], value: 'abc', numberValue: null }],
    });
  });
});
