import { afterAll, beforeAll, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/analytics/events';
import { startTestApp, type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { createTestDatabase, describeEachDatabase, describeWithRedis } from '../helpers/lanes';
import { recordSubscription } from '../helpers/subscriptions';
import { environmentIds, recordEvents } from '../helpers/usage';

const seriesQuery = `query($name: UsageQueryName!, $filter: UsageRangeInput!, $granularity: UsageGranularity, $timeZone: String) {
  usageTimeSeries(name: $name, filter: $filter, granularity: $granularity, timeZone: $timeZone) {
    name granularity timeZone points { start end count successCount }
  }
}`;
const totalsQuery = `query($filter: UsageRangeInput!) {
  usageTotals(filter: $filter) {
    interactions uniqueUsers creditUsage kbDocuments transcripts intents
    functionUsage { count successCount } apiCalls { count successCount }
    integrations { count successCount } agentUsage { count successCount }
  }
}`;

describeEachDatabase('usage totals and time series (GraphQL)', (provider) => {
  const t = useTestApp(provider);
  let p: TestProject;

  // Around the start of daylight-saving time in New York (2026-03-08, 02:00 → 03:00).
  const range = { startTime: '2026-03-07T05:00:00Z', endTime: '2026-03-10T04:00:00Z' };

  beforeAll(async () => {
    p = await t.app.createProject();
    const { dev, prod } = environmentIds(p);
    const ev = (iso: string, environmentId: string, userId: string, extra: Partial<UsageEvent> = {}): UsageEvent =>
      ({
        projectId: p.projectID,
        environmentId,
        kind: 'interaction',
        type: 'text',
        userId,
        occurredAt: new Date(iso),
        ...extra,
      }) as UsageEvent;
    await recordEvents(t.app, [
      ev('2026-03-07T04:30:00Z', prod, 'early'), // before the range
      ev('2026-03-08T06:30:00Z', prod, 'A'), // 8 March 01:30 EST
      ev('2026-03-08T06:45:00Z', dev, 'A', { kind: 'function_call', functionId: 'f', success: true }),
      ev('2026-03-09T03:30:00Z', prod, 'A'), // 8 March 23:30 EDT
      ev('2026-03-09T04:30:00Z', prod, 'B'), // 9 March 00:30 EDT
      ev('2026-03-09T04:40:00Z', prod, 'B', { kind: 'function_call', functionId: 'f', success: false }),
    ]);
  });

  const series = async (vars: Record<string, unknown>) => {
    const res = await t.app.gql(seriesQuery, vars, p.apiKey);
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    return res.body.data.usageTimeSeries;
  };

  it('buckets by local day across a daylight-saving change, zero-filled', async () => {
    const ny = await series({
      name: 'interactions',
      filter: { projectID: p.projectID, ...range },
      granularity: 'day',
      timeZone: 'America/New_York',
    });
    expect(ny).toEqual({
      name: 'interactions',
      granularity: 'day',
      timeZone: 'America/New_York',
      points: [
        { start: '2026-03-07T05:00:00.000Z', end: '2026-03-08T05:00:00.000Z', count: 0, successCount: 0 },
        // The 23-hour day holds 06:30 and 03:30 UTC of the next day.
        { start: '2026-03-08T05:00:00.000Z', end: '2026-03-09T04:00:00.000Z', count: 2, successCount: 0 },
        { start: '2026-03-09T04:00:00.000Z', end: '2026-03-10T04:00:00.000Z', count: 1, successCount: 0 },
      ],
    });
    // The same events in UTC days fall differently.
    const utc = await series({
      name: 'interactions',
      filter: { projectID: p.projectID, ...range },
      granularity: 'day',
    });
    expect(utc.points.map((x: { start: string; count: number }) => [x.start, x.count])).toEqual([
      ['2026-03-07T00:00:00.000Z', 0],
      ['2026-03-08T00:00:00.000Z', 1],
      ['2026-03-09T00:00:00.000Z', 2],
      ['2026-03-10T00:00:00.000Z', 0],
    ]);
  });

  it('counts unique users once per bucket, across hours and environments', async () => {
    const users = await series({
      name: 'unique_users',
      filter: { projectID: p.projectID, ...range },
      granularity: 'day',
      timeZone: 'America/New_York',
    });
    // A was active in three hours and two environments on 8 March: one user.
    expect(users.points.map((x: { count: number }) => x.count)).toEqual([0, 1, 1]);
    const devOnly = await series({
      name: 'unique_users',
      filter: { projectID: p.projectID, ...range, projectEnvironmentIDOrAlias: 'development' },
      granularity: 'week',
      timeZone: 'America/New_York',
    });
    expect(devOnly.points).toEqual([
      { start: '2026-03-02T05:00:00.000Z', end: '2026-03-09T04:00:00.000Z', count: 1, successCount: 0 },
      { start: '2026-03-09T04:00:00.000Z', end: '2026-03-16T04:00:00.000Z', count: 0, successCount: 0 },
    ]);
  });

  it('gives hourly series with successes, every hour present', async () => {
    const hourly = await series({
      name: 'function_usage',
      filter: { projectID: p.projectID, startTime: '2026-03-08T05:00:00Z', endTime: '2026-03-08T08:00:00Z' },
    });
    expect(hourly.granularity).toBe('hour');
    expect(hourly.points).toEqual([
      { start: '2026-03-08T05:00:00.000Z', end: '2026-03-08T06:00:00.000Z', count: 0, successCount: 0 },
      { start: '2026-03-08T06:00:00.000Z', end: '2026-03-08T07:00:00.000Z', count: 1, successCount: 1 },
      { start: '2026-03-08T07:00:00.000Z', end: '2026-03-08T08:00:00.000Z', count: 0, successCount: 0 },
    ]);
  });

  it('totals a range, with unique users distinct over the whole range', async () => {
    const res = await t.app.gql(totalsQuery, { filter: { projectID: p.projectID, ...range } }, p.apiKey);
    expect(res.body.data.usageTotals).toEqual({
      interactions: 3,
      uniqueUsers: 2,
      creditUsage: 0,
      kbDocuments: 0,
      transcripts: 0,
      intents: 0,
      functionUsage: { count: 2, successCount: 1 },
      apiCalls: { count: 0, successCount: 0 },
      integrations: { count: 0, successCount: 0 },
      agentUsage: { count: 0, successCount: 0 },
    });
    const all = await t.app.gql(totalsQuery, { filter: { projectID: p.projectID } }, p.apiKey);
    expect(all.body.data.usageTotals).toMatchObject({ interactions: 4, uniqueUsers: 3 });
  });

  it('validates series arguments and answers 401 for a project the key does not reach', async () => {
    const check = async (vars: Record<string, unknown>, path: string) => {
      const res = await t.app.gql(seriesQuery, vars, p.apiKey);
      expect(res.body.errors[0].extensions, JSON.stringify(vars)).toMatchObject({
        code: 'VALIDATION_FAILED',
        http: { status: 400 },
      });
      expect(res.body.errors[0].extensions.details.map((d: { path: string }) => d.path)).toContain(path);
    };
    await check(
      { name: 'interactions', filter: { projectID: p.projectID, endTime: range.endTime } },
      'filter.startTime',
    );
    await check(
      { name: 'interactions', filter: { projectID: p.projectID, ...range }, timeZone: 'Mars/Base' },
      'timeZone',
    );
    await check(
      {
        name: 'interactions',
        filter: { projectID: p.projectID, startTime: '2025-01-01T00:00:00Z', endTime: '2026-01-01T00:00:00Z' },
      },
      'granularity',
    );
    await check(
      {
        name: 'interactions',
        filter: { projectID: p.projectID, startTime: '2026-02-30T00:00:00Z', endTime: range.endTime },
      },
      'filter.startTime',
    );
    const other = await t.app.createProject();
    const denied = await t.app.gql(totalsQuery, { filter: { projectID: other.projectID } }, p.apiKey);
    expect(denied.body.errors[0].extensions).toMatchObject({ code: 'FORBIDDEN', http: { status: 401 } });
  });
});

interface CountersResult {
  data?: {
    usageCounters: {
      projectID: string;
      counters: { name: string; environmentID: string; period: string; count: number; successCount: number }[];
    };
  };
  errors?: { message: string; extensions: { code: string } }[];
}

const countersSubscription =
  'subscription($p: ID!) { usageCounters(projectID: $p) { projectID counters { name environmentID period count successCount } } }';

function ingest(app: TestApp, key: string, events: unknown[]) {
  return app.http('POST', '/v1/usage/events', { key, body: { events } });
}

describeEachDatabase('usage counters subscription', (provider) => {
  const t = useTestApp(provider);

  it('pushes the new values of the hourly counters a write changed', async () => {
    const p = await t.app.createProject({ scopes: ['analytics:read', 'analytics:write'] });
    const prod = environmentIds(p).prod;
    const sub = recordSubscription<CountersResult>(t.app, {
      query: countersSubscription,
      variables: { p: p.projectID },
      key: p.apiKey,
    });
    try {
      await sub.prime(() =>
        ingest(t.app, p.apiKey, [{ projectID: p.projectID, environment: 'production', kind: 'transcript' }]),
      );
      const call = (success: boolean) => ({
        projectID: p.projectID,
        environment: 'production',
        kind: 'function_call',
        functionID: 'f',
        success,
        timestamp: '2026-05-01T10:20:00Z',
      });
      const counterOf = (e: CountersResult) =>
        e.data?.usageCounters.counters.find(
          (c) => c.name === 'function_usage' && c.period === '2026-05-01T10:00:00.000Z',
        );
      await ingest(t.app, p.apiKey, [call(true), call(false)]);
      await sub.waitFor((events) => events.some((e) => counterOf(e)?.count === 2));
      await ingest(t.app, p.apiKey, [call(false)]);
      const events = await sub.waitFor((all) => all.some((e) => counterOf(e)?.count === 3));
      expect(counterOf(events.find((e) => counterOf(e)?.count === 3)!)).toEqual({
        name: 'function_usage',
        environmentID: prod,
        period: '2026-05-01T10:00:00.000Z',
        count: 3,
        successCount: 1,
      });
      expect(events.every((e) => e.data?.usageCounters.projectID === p.projectID)).toBe(true);
    } finally {
      sub.close();
    }
  });

  it("refuses a subscription to another project's counters", async () => {
    const mine = await t.app.createProject();
    const theirs = await t.app.createProject();
    const res = await fetch(`${t.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: mine.apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: countersSubscription, variables: { p: theirs.projectID } }),
    });
    const text = await res.text();
    expect(text).toContain('FORBIDDEN');
    expect(text).not.toContain('"counters"');
  });
});

describeWithRedis('usage counters across instances', (redisUrl) => {
  const apps: TestApp[] = [];
  const databases: { drop(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const database of databases) await database.drop();
  });

  it('delivers counters recorded on one instance to a subscriber on another, through Redis', async () => {
    const database = await createTestDatabase('sqlite');
    databases.push(database);
    const a = await startTestApp('sqlite', { database, env: { REDIS_URL: redisUrl } });
    const b = await startTestApp('sqlite', { database, env: { REDIS_URL: redisUrl, ADMIN_TOKEN: a.operatorToken } });
    apps.push(a, b);
    const p = await a.createProject({ scopes: ['analytics:read', 'analytics:write'] });
    // The operator subscribes on A: a key used on both instances would make both write its
    // lastUsedAt, and two SQLite connections in one process stall each other while they wait.
    const sub = recordSubscription<CountersResult>(a, {
      query: countersSubscription,
      variables: { p: p.projectID },
      key: a.operatorToken,
      singleConnection: true,
    });
    try {
      // Every update the subscriber on A receives was recorded on B. A generous deadline: on a
      // loaded machine, establishing the SSE stream and the Redis subscription can take a while.
      await sub.prime(
        () => ingest(b, p.apiKey, [{ projectID: p.projectID, environment: 'production', kind: 'intent', name: 'hi' }]),
        30_000,
      );
      expect(sub.events[0]?.data?.usageCounters.counters).toContainEqual(
        expect.objectContaining({ name: 'top_intents', count: expect.any(Number) }),
      );
    } finally {
      sub.close();
    }
  }, 60_000);
});
