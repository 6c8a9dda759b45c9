import { beforeAll, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/analytics/events';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { environmentIds, recordEvents, sortItems, usageGql, usageRest } from '../helpers/usage';

const at = (hhmm: string) => new Date(`2026-01-10T${hhmm}:00Z`);
const h10 = '2026-01-10T10:00:00.000Z';
const h11 = '2026-01-10T11:00:00.000Z';
const h12 = '2026-01-10T12:00:00.000Z';

/** One day of a support agent's usage, touching every query name. */
function dataset(projectId: string, dev: string, prod: string): UsageEvent[] {
  const p = { projectId };
  const interaction = (hhmm: string, environmentId: string, type: string, userId: string): UsageEvent => ({
    ...p,
    environmentId,
    kind: 'interaction',
    type,
    userId,
    occurredAt: at(hhmm),
  });
  return [
    interaction('10:05', prod, 'text', 'u1'),
    interaction('10:06', prod, 'text', 'u2'),
    interaction('10:07', prod, 'text', 'u1'),
    interaction('10:20', prod, 'launch', 'u3'),
    interaction('10:30', dev, 'text', 'u1'),
    interaction('11:10', prod, 'text', 'u1'),
    interaction('11:11', prod, 'text', 'u2'),
    ...(
      [
        ['gpt-4o', 'llm-input', 100, 'd1', 'n1', 'u4'],
        ['gpt-4o', 'llm-output', 50, 'd1', 'n1', null],
        ['gpt-4o', 'llm-input', 30, 'd1', 'n1', null],
        ['claude', 'llm-input', 7, undefined, undefined, null],
      ] as const
    ).map(
      ([model, type, tokens, diagramId, nodeId, userId]): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'credit',
        model,
        type,
        tokens,
        diagramId,
        nodeId,
        userId,
        occurredAt: at('10:40'),
      }),
    ),
    ...[true, true, false].map(
      (success): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'function_call',
        functionId: 'f1',
        name: 'lookup',
        success,
        occurredAt: at('10:50'),
      }),
    ),
    {
      ...p,
      environmentId: prod,
      kind: 'function_call',
      functionId: 'f2',
      name: 'calc',
      success: true,
      occurredAt: at('12:00'),
    },
    ...[true, false].map(
      (success): UsageEvent => ({
        ...p,
        environmentId: dev,
        kind: 'api_call',
        apiToolId: 'a1',
        name: 'weather',
        success,
        occurredAt: at('10:15'),
      }),
    ),
    ...['doc1', 'doc1', 'doc1', 'doc2'].map(
      (documentId): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'kb_document',
        documentId,
        occurredAt: at('11:30'),
      }),
    ),
    ...(
      [
        ['zendesk', true],
        ['zendesk', false],
        ['slack', true],
      ] as const
    ).map(
      ([integrationToolName, success]): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'integration_call',
        integrationToolName,
        success,
        occurredAt: at('11:45'),
      }),
    ),
    ...['t1', 't2', 't3'].map(
      (transcriptId): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'transcript',
        transcriptId,
        occurredAt: at('10:01'),
      }),
    ),
    { ...p, environmentId: dev, kind: 'transcript', transcriptId: 't4', occurredAt: at('11:02') },
    ...[true, true, false].map(
      (success): UsageEvent => ({
        ...p,
        environmentId: prod,
        kind: 'agent_invocation',
        agentId: 'ag1',
        name: 'Support',
        success,
        occurredAt: at('10:10'),
      }),
    ),
    ...(
      [
        ['order_status', prod, '10:00', 5],
        ['refund', prod, '11:00', 3],
        ['greeting', prod, '10:00', 2],
        ['greeting', dev, '10:00', 1],
        ['cancel', dev, '12:00', 1],
      ] as const
    ).flatMap(([name, environmentId, hhmm, times]) =>
      Array.from(
        { length: times },
        (): UsageEvent => ({ ...p, environmentId, kind: 'intent', name, occurredAt: at(hhmm) }),
      ),
    ),
  ];
}

describeEachDatabase('POST /v2/query/usage and the GraphQL usage query', (provider) => {
  const t = useTestApp(provider);
  let p: TestProject;
  let env: { dev: string; prod: string };

  beforeAll(async () => {
    p = await t.app.createProject({ name: 'usage' });
    env = environmentIds(p);
    const recorded = await recordEvents(t.app, dataset(p.projectID, env.dev, env.prod));
    expect(recorded.duplicates).toBe(0);
  });

  /** Asks REST and GraphQL the same question; they must agree. Returns REST's `result`. */
  async function ask(name: string, filter: Record<string, unknown> = {}) {
    const full = { projectID: p.projectID, ...filter };
    const rest = await usageRest(t.app, p.apiKey, { name, filter: full });
    expect(rest.status, JSON.stringify(rest.body)).toBe(200);
    const gql = await usageGql(t.app, p.apiKey, name, full);
    expect(gql.body.errors).toBeUndefined();
    const { __typename: _type, cursor, ...rest2 } = gql.body.data.usage;
    expect(cursor === null ? rest2 : { ...rest2, cursor }).toEqual(rest.body.result);
    return rest.body.result;
  }

  const item = (period: string, environmentID: string, count: number, extra: Record<string, unknown> = {}) => ({
    period,
    projectID: p.projectID,
    environmentID,
    count,
    ...extra,
  });

  it('interactions: count per hour, environment and action type', async () => {
    const result = await ask('interactions');
    expect(result).toEqual({
      items: sortItems(
        [
          item(h10, env.dev, 1, { type: 'text' }),
          item(h10, env.prod, 1, { type: 'launch' }),
          item(h10, env.prod, 3, { type: 'text' }),
          item(h11, env.prod, 2, { type: 'text' }),
        ],
        ['type'],
      ),
    });
  });

  it('unique_users: distinct user IDs per hour and environment, from events of every kind', async () => {
    const result = await ask('unique_users');
    expect(result.items).toEqual(
      sortItems([item(h10, env.dev, 1), item(h10, env.prod, 4), item(h11, env.prod, 2)], []),
    );
  });

  it('credit_usage: tokens per model, flow step and llm-input / llm-output', async () => {
    const result = await ask('credit_usage');
    expect(result.items).toEqual([
      item(h10, env.prod, 7, { diagramID: '', nodeID: '', model: 'claude', type: 'llm-input' }),
      item(h10, env.prod, 130, { diagramID: 'd1', nodeID: 'n1', model: 'gpt-4o', type: 'llm-input' }),
      item(h10, env.prod, 50, { diagramID: 'd1', nodeID: 'n1', model: 'gpt-4o', type: 'llm-output' }),
    ]);
  });

  it('function_usage, api_calls, integrations and agent_usage: calls with their successes', async () => {
    expect((await ask('function_usage')).items).toEqual([
      item(h10, env.prod, 3, { functionID: 'f1', name: 'lookup', successCount: 2 }),
      item(h12, env.prod, 1, { functionID: 'f2', name: 'calc', successCount: 1 }),
    ]);
    expect((await ask('api_calls')).items).toEqual([
      item(h10, env.dev, 2, { apiToolID: 'a1', name: 'weather', successCount: 1 }),
    ]);
    expect((await ask('integrations')).items).toEqual([
      item(h11, env.prod, 1, { integrationToolName: 'slack', successCount: 1 }),
      item(h11, env.prod, 2, { integrationToolName: 'zendesk', successCount: 1 }),
    ]);
    expect((await ask('agent_usage')).items).toEqual([
      item(h10, env.prod, 3, { agentID: 'ag1', name: 'Support', successCount: 2 }),
    ]);
  });

  it('kb_documents and transcripts', async () => {
    expect((await ask('kb_documents')).items).toEqual([
      item(h11, env.prod, 3, { documentID: 'doc1' }),
      item(h11, env.prod, 1, { documentID: 'doc2' }),
    ]);
    expect((await ask('transcripts')).items).toEqual(sortItems([item(h10, env.prod, 3), item(h11, env.dev, 1)], []));
  });

  it('top_intents: most used first, ties by name, cut at limit', async () => {
    expect(await ask('top_intents')).toEqual({
      intents: [
        { name: 'order_status', count: 5 },
        { name: 'greeting', count: 3 },
        { name: 'refund', count: 3 },
        { name: 'cancel', count: 1 },
      ],
    });
    expect((await ask('top_intents', { limit: 2 })).intents.map((i: { name: string }) => i.name)).toEqual([
      'order_status',
      'greeting',
    ]);
    // Filtered to one environment and a range.
    expect(
      await ask('top_intents', {
        projectEnvironmentIDOrAlias: 'development',
        startTime: '2026-01-10T09:00:00Z',
        endTime: '2026-01-10T11:00:00Z',
      }),
    ).toEqual({ intents: [{ name: 'greeting', count: 1 }] });
  });

  it('gives every listed field of every item, with period a UTC hour in Z form', async () => {
    const fields: Record<string, string[]> = {
      interactions: ['type'],
      unique_users: [],
      credit_usage: ['diagramID', 'nodeID', 'model', 'type'],
      function_usage: ['functionID', 'name', 'successCount'],
      api_calls: ['apiToolID', 'name', 'successCount'],
      kb_documents: ['documentID'],
      integrations: ['integrationToolName', 'successCount'],
      transcripts: [],
      agent_usage: ['agentID', 'name', 'successCount'],
    };
    for (const [name, extra] of Object.entries(fields)) {
      const result = await ask(name);
      expect(result.items.length, name).toBeGreaterThan(0);
      for (const it of result.items) {
        expect(Object.keys(it).sort(), name).toEqual(
          ['period', 'projectID', 'environmentID', 'count', ...extra].sort(),
        );
        expect(it.period).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:00:00\.000Z$/);
      }
    }
  });

  it('filters by environment ID or alias, as a string or a list', async () => {
    const byAlias = await ask('interactions', { projectEnvironmentIDOrAlias: 'development' });
    expect(byAlias.items).toEqual([item(h10, env.dev, 1, { type: 'text' })]);
    const byId = await ask('interactions', { projectEnvironmentIDOrAlias: [env.dev] });
    expect(byId).toEqual(byAlias);
    const both = await ask('interactions', { projectEnvironmentIDOrAlias: ['development', env.prod] });
    expect(both).toEqual(await ask('interactions'));
    const unknown = await usageRest(t.app, p.apiKey, {
      name: 'interactions',
      filter: { projectID: p.projectID, projectEnvironmentIDOrAlias: ['production', 'staging'] },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ errorCode: 'NOT_FOUND', message: expect.stringContaining('"staging"') });
  });

  it('applies startTime (inclusive) and endTime (exclusive) to the period, in any zone offset', async () => {
    const from11 = await ask('interactions', { startTime: '2026-01-10T11:00:00Z' });
    expect(from11.items.map((i: { period: string }) => i.period)).toEqual([h11]);
    // 10:30 is after the start of the 10:00 hour: that hour is not in the range.
    const from1030 = await ask('interactions', { startTime: '2026-01-10T10:30:00Z' });
    expect(from1030).toEqual(from11);
    const before11 = await ask('interactions', { endTime: '2026-01-10T13:00:00+02:00' });
    expect(before11.items.every((i: { period: string }) => i.period === h10)).toBe(true);
    expect(before11.items).toHaveLength(3);
    const empty = await ask('interactions', { startTime: '2026-01-10T11:00:00Z', endTime: '2026-01-10T11:00:00Z' });
    expect(empty).toEqual({ items: [] });
  });

  it('answers from the counters alone: the raw events can be gone', async () => {
    const q = await t.app.createProject({ name: 'counters only' });
    const e = environmentIds(q);
    await recordEvents(t.app, dataset(q.projectID, e.dev, e.prod));
    const names = ['interactions', 'top_intents', 'unique_users', 'credit_usage', 'function_usage', 'api_calls'];
    const askAll = async () => {
      const out: unknown[] = [];
      for (const name of [...names, 'kb_documents', 'integrations', 'transcripts', 'agent_usage']) {
        for (const filter of [{}, { startTime: '2026-01-10T10:30:00Z', endTime: '2026-01-12T00:00:00Z' }]) {
          const res = await usageRest(t.app, q.apiKey, { name, filter: { projectID: q.projectID, ...filter } });
          expect(res.status).toBe(200);
          out.push(res.body.result);
        }
      }
      return out;
    };
    const before = await askAll();
    const operations: string[] = [];
    // The job runner's polls are the instance's own work, not this request's.
    const listener = (ev: { model: string | undefined; operation: string; background: boolean }) => {
      if (!ev.background) operations.push(`${ev.model}.${ev.operation}`);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      await usageRest(t.app, q.apiKey, { name: 'interactions', filter: { projectID: q.projectID } });
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    // One read of the counters, whatever the number of events (the key's project is cached with the
    // key, src/auth/keys.ts, so access control reads nothing).
    expect(operations).toEqual(['UsageRollup.findMany']);
    const deleted = await t.app.services.db.prisma.usageEvent.deleteMany({ where: { projectId: q.projectID } });
    expect(deleted.count).toBeGreaterThan(40);
    expect(await askAll()).toEqual(before);
  });

  it('pages with cursor: every item exactly once, in order, and no cursor on the last page', async () => {
    const q = await t.app.createProject({ name: 'paging' });
    const e = environmentIds(q);
    // 4 hours × 2 environments × 13 action types = 104 items; 26 per hour, more than a page.
    const events: UsageEvent[] = [];
    for (let hour = 0; hour < 4; hour++) {
      for (const environmentId of [e.dev, e.prod]) {
        for (let type = 0; type < 13; type++) {
          for (let n = 0; n <= type % 3; n++) {
            events.push({
              projectId: q.projectID,
              environmentId,
              kind: 'interaction',
              type: `type-${String(type).padStart(2, '0')}`,
              occurredAt: new Date(Date.UTC(2026, 0, 5, 8 + hour, n * 7)),
            });
          }
        }
      }
    }
    await recordEvents(t.app, events);
    const all = await usageRest(t.app, q.apiKey, {
      name: 'interactions',
      filter: { projectID: q.projectID, limit: 500 },
    });
    expect(all.body.result.items).toHaveLength(104);
    expect(all.body.result.cursor).toBeUndefined();
    expect(all.body.result.items).toEqual(sortItems(all.body.result.items, ['type']));
    expect(all.body.result.items.reduce((s: number, i: { count: number }) => s + i.count, 0)).toBe(events.length);

    for (const via of ['rest', 'graphql'] as const) {
      const seen: unknown[] = [];
      let cursor: number | undefined;
      let pages = 0;
      do {
        const filter = { projectID: q.projectID, limit: 7, ...(cursor === undefined ? {} : { cursor }) };
        let result: { items: unknown[]; cursor?: number | null };
        if (via === 'rest') {
          const res = await usageRest(t.app, q.apiKey, { name: 'interactions', filter });
          expect(res.status).toBe(200);
          result = res.body.result;
        } else {
          const res = await usageGql(t.app, q.apiKey, 'interactions', filter);
          result = res.body.data.usage;
        }
        pages++;
        expect(result.items.length).toBe(result.cursor == null ? 104 - seen.length : 7);
        seen.push(...result.items);
        cursor = result.cursor ?? undefined;
        if (cursor !== undefined) expect(Number.isSafeInteger(cursor)).toBe(true);
      } while (cursor !== undefined && pages < 50);
      expect(pages, via).toBe(Math.ceil(104 / 7));
      expect(seen, via).toEqual(all.body.result.items);
    }

    // A cursor keeps working with a range and an environment filter too.
    const filtered = {
      projectID: q.projectID,
      projectEnvironmentIDOrAlias: 'production',
      startTime: '2026-01-05T09:00:00Z',
    };
    const whole = (await usageRest(t.app, q.apiKey, { name: 'interactions', filter: filtered })).body.result.items;
    expect(whole).toHaveLength(39);
    const paged: unknown[] = [];
    let cursor: number | undefined;
    do {
      const res = await usageRest(t.app, q.apiKey, {
        name: 'interactions',
        filter: { ...filtered, limit: 5, ...(cursor === undefined ? {} : { cursor }) },
      });
      paged.push(...res.body.result.items);
      cursor = res.body.result.cursor;
    } while (cursor !== undefined);
    expect(paged).toEqual(whole);
  });
});

describeEachDatabase('usage query validation and permissions', (provider) => {
  const t = useTestApp(provider);
  let p: TestProject;

  beforeAll(async () => {
    p = await t.app.createProject();
  });

  const errorBody = {
    statusCode: 400,
    statusText: 'Bad Request',
    errorCode: 'VALIDATION_FAILED',
    message: expect.any(String),
    details: expect.any(Array),
  };

  async function expect400(data: unknown, path: string, message?: RegExp) {
    const res = await usageRest(t.app, p.apiKey, data);
    expect(res.status, JSON.stringify(data)).toBe(400);
    expect(res.body).toEqual(errorBody);
    const detail = res.body.details.find((d: { path: string }) => d.path === path);
    expect(detail, `${JSON.stringify(res.body.details)} has ${path}`).toBeDefined();
    if (message) expect(detail.message).toMatch(message);
    return res.body;
  }

  const filter = (extra: Record<string, unknown>) => ({ projectID: p.projectID, ...extra });

  it('refuses impossible dates and timestamps without a zone', async () => {
    await expect400(
      { name: 'interactions', filter: filter({ startTime: '2026-02-30T00:00:00Z' }) },
      'filter.startTime',
      /real date/,
    );
    await expect400(
      { name: 'interactions', filter: filter({ endTime: '2026-02-29T12:00:00Z' }) },
      'filter.endTime',
      /real date/,
    );
    await expect400(
      { name: 'interactions', filter: filter({ startTime: '2026-01-01T00:00:00' }) },
      'filter.startTime',
      /zone/,
    );
    await expect400({ name: 'interactions', filter: filter({ startTime: '2026-01-01' }) }, 'filter.startTime');
    await expect400({ name: 'top_intents', filter: filter({ endTime: '2026-13-01T00:00:00Z' }) }, 'filter.endTime');
    await expect400(
      { name: 'interactions', filter: filter({ startTime: '2026-01-02T00:00:00Z', endTime: '2026-01-01T00:00:00Z' }) },
      'filter.endTime',
    );
    // A leap day, an offset and fractional seconds are fine.
    const ok = await usageRest(t.app, p.apiKey, {
      name: 'interactions',
      filter: filter({ startTime: '2024-02-29T23:59:59.999+05:30', endTime: '2026-01-01T00:00Z' }),
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ result: { items: [] } });
  });

  it('bounds limit to 1..500 and wants integers for limit and cursor', async () => {
    await expect400({ name: 'interactions', filter: filter({ limit: 0 }) }, 'filter.limit', /at least 1/);
    await expect400({ name: 'interactions', filter: filter({ limit: 501 }) }, 'filter.limit', /at most 500/);
    await expect400({ name: 'top_intents', filter: filter({ limit: 501 }) }, 'filter.limit');
    await expect400({ name: 'interactions', filter: filter({ limit: '10' }) }, 'filter.limit');
    await expect400({ name: 'interactions', filter: filter({ limit: 2.5 }) }, 'filter.limit');
    await expect400({ name: 'interactions', filter: filter({ cursor: 1.5 }) }, 'filter.cursor');
    await expect400({ name: 'interactions', filter: filter({ cursor: 'abc' }) }, 'filter.cursor');
    await expect400({ name: 'interactions', filter: filter({ cursor: -1 }) }, 'filter.cursor');
    for (const limit of [1, 500]) {
      expect((await usageRest(t.app, p.apiKey, { name: 'interactions', filter: filter({ limit }) })).status).toBe(200);
    }
  });

  it('wants environments as a non-empty string or a non-empty list of non-empty strings', async () => {
    await expect400(
      { name: 'interactions', filter: filter({ projectEnvironmentIDOrAlias: [] }) },
      'filter.projectEnvironmentIDOrAlias',
      /at least 1/,
    );
    await expect400(
      { name: 'interactions', filter: filter({ projectEnvironmentIDOrAlias: ['production', ''] }) },
      'filter.projectEnvironmentIDOrAlias.1',
      /empty/,
    );
    await expect400(
      { name: 'unique_users', filter: filter({ projectEnvironmentIDOrAlias: '' }) },
      'filter.projectEnvironmentIDOrAlias',
    );
    await expect400(
      { name: 'unique_users', filter: filter({ projectEnvironmentIDOrAlias: 7 }) },
      'filter.projectEnvironmentIDOrAlias',
    );
  });

  it('knows the ten names and the filter members of each', async () => {
    await expect400({ name: 'sessions', filter: filter({}) }, 'name', /one of/);
    await expect400({ filter: filter({}) }, 'name', /required/);
    await expect400({ name: 'interactions' }, 'filter', /required/);
    await expect400({ name: 'interactions', filter: { limit: 5 } }, 'filter.projectID', /required/);
    await expect400({ name: 'interactions', filter: filter({ projectID: '' }) }, 'filter.projectID', /empty/);
    await expect400({ name: 'top_intents', filter: filter({ cursor: 100 }) }, 'filter.cursor', /not an allowed member/);
    const missingData = await t.app.http('POST', '/v2/query/usage', { key: p.apiKey, body: { name: 'interactions' } });
    expect(missingData.status).toBe(400);
    // `name` outside `data` is a member the body does not know: ignored; `data` is still required.
    expect(missingData.body.details.map((d: { path: string }) => d.path)).toEqual(['data']);
  });

  it("accepts and ignores members it does not know (the original's v1 platform), in the filter, data and body", async () => {
    const q = await t.app.createProject();
    const { dev, prod } = environmentIds(q);
    await recordEvents(t.app, dataset(q.projectID, dev, prod));
    const ownFilter = (extra: Record<string, unknown>) => ({ projectID: q.projectID, ...extra });
    const plain = await usageRest(t.app, q.apiKey, { name: 'interactions', filter: ownFilter({}) });
    expect(plain.status).toBe(200);
    expect(plain.body.result.items.length).toBeGreaterThan(0);
    const tolerant = await t.app.http('POST', '/v2/query/usage', {
      key: q.apiKey,
      body: { data: { name: 'interactions', filter: ownFilter({ platform: 'web', page: 2 }), extra: true }, other: 1 },
    });
    expect(tolerant.status).toBe(200);
    expect(tolerant.body).toEqual(plain.body);
    const intents = await usageRest(t.app, q.apiKey, { name: 'top_intents', filter: ownFilter({ platform: 'web' }) });
    expect(intents.status).toBe(200);
    const plainIntents = await usageRest(t.app, q.apiKey, { name: 'top_intents', filter: ownFilter({}) });
    expect(intents.body).toEqual(plainIntents.body);
  });

  it('answers the GraphQL usage query with the same codes and detail paths', async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['interactions', filter({ startTime: '2026-02-30T00:00:00Z' }), 'filter.startTime'],
      ['interactions', filter({ limit: 0 }), 'filter.limit'],
      ['interactions', filter({ projectEnvironmentIDOrAlias: [] }), 'filter.projectEnvironmentIDOrAlias'],
      ['top_intents', filter({ cursor: 5 }), 'filter.cursor'],
    ];
    for (const [name, f, path] of cases) {
      const res = await usageGql(t.app, p.apiKey, name, f);
      expect(res.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
      expect(res.body.errors[0].extensions.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const unknownName = await usageGql(t.app, p.apiKey, 'sessions', filter({}));
    expect(unknownName.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('answers 401 for a project the key does not reach, one that does not exist, or a key without analytics:read', async () => {
    const other = await t.app.createProject();
    for (const projectID of [other.projectID, '0123456789abcdef01234567', 'not-an-id']) {
      const res = await usageRest(t.app, p.apiKey, { name: 'interactions', filter: { projectID } });
      expect(res.status, projectID).toBe(401);
      expect(res.body).toEqual({
        statusCode: 401,
        statusText: 'Unauthorized',
        errorCode: 'FORBIDDEN',
        message: expect.stringContaining(projectID),
      });
      const gql = await usageGql(t.app, p.apiKey, 'top_intents', { projectID });
      expect(gql.body.errors[0].extensions).toMatchObject({ code: 'FORBIDDEN', http: { status: 401 } });
    }
    // An environment of a project the key does not reach is refused like that project (SPEC.md "Errors").
    const foreignEnvironment = other.environments[0]!.id;
    for (const environments of [foreignEnvironment, ['production', foreignEnvironment]]) {
      const res = await usageRest(t.app, p.apiKey, {
        name: 'interactions',
        filter: { projectID: p.projectID, projectEnvironmentIDOrAlias: environments },
      });
      expect(res.status, String(environments)).toBe(401);
      expect(res.body).toMatchObject({ errorCode: 'FORBIDDEN', message: expect.stringContaining(foreignEnvironment) });
      const gql = await usageGql(t.app, p.apiKey, 'top_intents', {
        projectID: p.projectID,
        projectEnvironmentIDOrAlias: environments,
      });
      expect(gql.body.errors[0].extensions).toMatchObject({ code: 'FORBIDDEN', http: { status: 401 } });
    }
    // A name no project has stays a 404, so a typo is not mistaken for a permission problem.
    const typo = await usageRest(t.app, p.apiKey, {
      name: 'interactions',
      filter: { projectID: p.projectID, projectEnvironmentIDOrAlias: 'prodution' },
    });
    expect(typo.status).toBe(404);
    const narrow = await t.app.createProject({ scopes: ['transcripts:read'] });
    const noScope = await usageRest(t.app, narrow.apiKey, {
      name: 'interactions',
      filter: { projectID: narrow.projectID },
    });
    expect(noScope.status).toBe(401);
    expect(noScope.body).toMatchObject({
      errorCode: 'INSUFFICIENT_SCOPE',
      message: expect.stringContaining('analytics:read'),
    });
    const anonymous = await t.app.http('POST', '/v2/query/usage', {
      body: { data: { name: 'interactions', filter: { projectID: p.projectID } } },
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.errorCode).toBe('UNAUTHENTICATED');
  });

  it('lets a workspace key read every project of its workspace', async () => {
    const created = await t.app.gql(
      'mutation($ws: ID!) { createApiKey(input: { workspaceID: $ws, scopes: ["analytics:read"] }) { apiKey } }',
      { ws: p.workspaceID },
    );
    const wsKey = created.body.data.createApiKey.apiKey;
    const res = await usageRest(t.app, wsKey, { name: 'transcripts', filter: { projectID: p.projectID } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ result: { items: [] } });
  });
});
