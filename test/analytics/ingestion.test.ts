import { beforeAll, expect, it } from 'vitest';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { environmentIds, usageRest } from '../helpers/usage';

describeEachDatabase('POST /v1/usage/events (ingestion)', (provider) => {
  const t = useTestApp(provider);
  let p: TestProject;

  beforeAll(async () => {
    p = await t.app.createProject({ scopes: ['analytics:read', 'analytics:write'] });
  });

  const post = (events: unknown, key = p.apiKey) => t.app.http('POST', '/v1/usage/events', { key, body: { events } });
  const base = () => ({ projectID: p.projectID, environment: 'production' });
  const storedEvents = () => t.app.services.db.prisma.usageEvent.count({ where: { projectId: p.projectID } });
  const interactions = async (startTime: string) =>
    (await usageRest(t.app, p.apiKey, { name: 'interactions', filter: { projectID: p.projectID, startTime } })).body
      .result.items;

  it('stores a batch of every kind and counts it in the hour each event happened', async () => {
    const ts = '2026-02-01T09:15:00Z';
    const res = await post([
      { ...base(), kind: 'interaction', type: 'launch', userID: 'user-1', timestamp: ts },
      { ...base(), kind: 'interaction', type: 'text', userID: 'user-2', timestamp: ts },
      { ...base(), kind: 'credit', type: 'llm-output', model: 'gpt-4o-mini', tokens: 42, timestamp: ts },
      { ...base(), kind: 'function_call', functionID: 'fn-1', name: 'lookup', success: false, timestamp: ts },
      { ...base(), kind: 'api_call', apiToolID: 'tool-1', success: true, timestamp: ts },
      { ...base(), kind: 'integration_call', integrationToolName: 'hubspot', success: true, timestamp: ts },
      { ...base(), kind: 'kb_document', documentID: 'doc-9', timestamp: ts },
      { ...base(), kind: 'transcript', transcriptID: 'tr-1', timestamp: ts },
      { ...base(), kind: 'agent_invocation', agentID: 'agent-1', name: 'Billing', success: true, timestamp: ts },
      { ...base(), kind: 'intent', name: 'billing_question', timestamp: ts },
      // An alias or an ID names the environment; a timestamp in another offset lands in its UTC hour.
      {
        projectID: p.projectID,
        environment: environmentIds(p).prod,
        kind: 'interaction',
        type: 'text',
        timestamp: '2026-02-01T11:59:59+02:00',
      },
    ]);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({ recorded: 11, duplicates: 0 });

    const items = await interactions('2026-02-01T00:00:00Z');
    expect(items.map((i: { type: string; count: number }) => [i.type, i.count])).toEqual([
      ['launch', 1],
      ['text', 2],
    ]);
    expect(items[0].period).toBe('2026-02-01T09:00:00.000Z');
    const filter = { projectID: p.projectID, startTime: '2026-02-01T00:00:00Z' };
    const q = async (name: string) => (await usageRest(t.app, p.apiKey, { name, filter })).body.result;
    expect((await q('unique_users')).items[0].count).toBe(2);
    expect((await q('credit_usage')).items[0]).toMatchObject({ count: 42, model: 'gpt-4o-mini', type: 'llm-output' });
    expect((await q('function_usage')).items[0]).toMatchObject({ count: 1, successCount: 0, functionID: 'fn-1' });
    expect((await q('api_calls')).items[0]).toMatchObject({ count: 1, successCount: 1, apiToolID: 'tool-1', name: '' });
    expect((await q('integrations')).items[0]).toMatchObject({ integrationToolName: 'hubspot', successCount: 1 });
    expect((await q('kb_documents')).items[0]).toMatchObject({ documentID: 'doc-9', count: 1 });
    expect((await q('transcripts')).items[0]).toMatchObject({ count: 1 });
    expect((await q('agent_usage')).items[0]).toMatchObject({ agentID: 'agent-1', name: 'Billing', count: 1 });
    expect(await q('top_intents')).toEqual({ intents: [{ name: 'billing_question', count: 1 }] });
  });

  it('needs the analytics:write scope, which new keys do not get by default', async () => {
    const plain = await t.app.createProject();
    const res = await post(
      [{ projectID: plain.projectID, environment: 'production', kind: 'transcript' }],
      plain.apiKey,
    );
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({
      errorCode: 'INSUFFICIENT_SCOPE',
      message: expect.stringContaining('analytics:write'),
    });
    expect(await t.app.services.db.prisma.usageEvent.count({ where: { projectId: plain.projectID } })).toBe(0);
  });

  it('answers 404 for a project the key does not reach, naming the event, and stores nothing of the batch', async () => {
    const other = await t.app.createProject();
    const before = await storedEvents();
    const res = await post([
      { ...base(), kind: 'transcript' },
      { projectID: other.projectID, environment: 'production', kind: 'transcript' },
    ]);
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ errorCode: 'NOT_FOUND', details: [{ path: 'events.1.projectID' }] });
    expect(await storedEvents()).toBe(before);
    expect(await t.app.services.db.prisma.usageEvent.count({ where: { projectId: other.projectID } })).toBe(0);
  });

  it("takes one batch for several projects of a workspace key's workspace", async () => {
    const first = await t.app.createProject({ name: 'ws one' });
    const second = await t.app.createProject({ name: 'ws two', workspaceId: first.workspaceID });
    const created = await t.app.gql(
      'mutation($ws: ID!) { createApiKey(input: { workspaceID: $ws, scopes: ["analytics:write"] }) { apiKey } }',
      { ws: first.workspaceID },
    );
    const wsKey = created.body.data.createApiKey.apiKey;
    const res = await post(
      [first, second].map((q) => ({ projectID: q.projectID, environment: 'development', kind: 'transcript' })),
      wsKey,
    );
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ recorded: 2, duplicates: 0 });
    for (const q of [first, second]) {
      expect(await t.app.services.db.prisma.usageEvent.count({ where: { projectId: q.projectID } })).toBe(1);
    }
  });

  it('refuses the whole batch when one event is invalid, with the path of each problem', async () => {
    const before = await storedEvents();
    const res = await post([
      { ...base(), kind: 'interaction', type: 'text' },
      { ...base(), kind: 'interaction', type: 'text', model: 'gpt' },
      { ...base(), kind: 'credit', type: 'llm-middle', model: 'm', tokens: -5 },
      { ...base(), kind: 'function_call', functionID: 'f' },
      { ...base(), kind: 'teleport' },
      { ...base(), kind: 'intent', name: 'x', timestamp: '2026-02-30T00:00:00Z' },
      { ...base(), kind: 'intent', name: 'x', timestamp: '2026-01-01T00:00:00' },
      { ...base(), kind: 'intent', name: 'x', timestamp: '2999-01-01T00:00:00Z' },
      { kind: 'transcript', environment: 'production', projectID: 'nope' },
      // PostgreSQL cannot store these: refused up front rather than failing the write.
      { ...base(), kind: 'intent', name: 'nul\u0000byte' },
      { ...base(), kind: 'intent', name: 'lone \ud800 surrogate' },
    ]);
    expect(res.status).toBe(400);
    expect(res.body.errorCode).toBe('VALIDATION_FAILED');
    expect(res.body.details.map((d: { path: string }) => d.path)).toEqual([
      'events.1.model',
      'events.2.type',
      'events.2.tokens',
      'events.3.success',
      'events.4.kind',
      'events.5.timestamp',
      'events.6.timestamp',
      'events.7.timestamp',
      'events.8.projectID',
      'events.9.name',
      'events.10.name',
    ]);
    expect(await storedEvents()).toBe(before);
  });

  it('takes 1 to 1,000 events per request', async () => {
    const empty = await post([]);
    expect(empty.status).toBe(400);
    expect(empty.body.details[0]).toMatchObject({ path: 'events', message: 'must have at least 1 item(s)' });
    const tooMany = await post(Array.from({ length: 1001 }, () => ({ ...base(), kind: 'intent', name: 'x' })));
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.details[0]).toMatchObject({ path: 'events', message: 'must have at most 1000 items' });
    const notAList = await t.app.http('POST', '/v1/usage/events', { key: p.apiKey, body: { event: {} } });
    expect(notAList.status).toBe(400);
    expect(notAList.body.details.map((d: { path: string }) => d.path).sort()).toEqual(['event', 'events']);

    const before = await storedEvents();
    const full = await post(
      Array.from({ length: 1000 }, (_, i) => ({
        ...base(),
        kind: 'interaction',
        type: 'text',
        userID: `bulk-${i % 250}`,
        timestamp: new Date(Date.UTC(2026, 2, 1, i % 24)).toISOString(),
      })),
    );
    expect(full.status).toBe(201);
    expect(full.body).toEqual({ recorded: 1000, duplicates: 0 });
    expect(await storedEvents()).toBe(before + 1000);
  });

  it('answers 404 for an environment the project lacks, storing nothing', async () => {
    const before = await storedEvents();
    const res = await post([
      { ...base(), kind: 'transcript' },
      { ...base(), environment: 'staging', kind: 'transcript' },
    ]);
    expect(res.status).toBe(404);
    expect(res.body.details).toEqual([{ path: 'events.1.environment', message: 'Environment "staging" not found' }]);
    expect(await storedEvents()).toBe(before);
  });

  it('counts an event sent again with the same eventID once', async () => {
    const ts = '2026-02-02T10:00:00Z';
    const batch = [
      { ...base(), kind: 'interaction', type: 'retry', eventID: 'evt-1', userID: 'r1', timestamp: ts },
      { ...base(), kind: 'interaction', type: 'retry', eventID: 'evt-2', userID: 'r2', timestamp: ts },
      { ...base(), kind: 'interaction', type: 'retry', eventID: 'evt-1', userID: 'r1', timestamp: ts },
      { ...base(), kind: 'interaction', type: 'retry', timestamp: ts },
    ];
    expect((await post(batch)).body).toEqual({ recorded: 3, duplicates: 1 });
    expect((await post(batch)).body).toEqual({ recorded: 1, duplicates: 3 });
    const items = await interactions('2026-02-02T00:00:00Z');
    expect(items.filter((i: { type: string }) => i.type === 'retry')).toEqual([
      expect.objectContaining({ period: '2026-02-02T10:00:00.000Z', count: 4 }),
    ]);
    const users = await usageRest(t.app, p.apiKey, {
      name: 'unique_users',
      filter: { projectID: p.projectID, startTime: '2026-02-02T00:00:00Z' },
    });
    expect(users.body.result.items[0].count).toBe(2);
  });

  it('keeps the counters exact when old events arrive late', async () => {
    const hour = '2025-06-01T10:00:00Z';
    const send = (n: number, from: number) =>
      post(
        Array.from({ length: n }, (_, i) => ({
          ...base(),
          kind: 'interaction',
          type: 'late',
          userID: `late-${(from + i) % 3}`,
          timestamp: `2025-06-01T10:${String((from + i) % 60).padStart(2, '0')}:00Z`,
        })),
      );
    await send(5, 0);
    await send(7, 5);
    const res = await usageRest(t.app, p.apiKey, {
      name: 'interactions',
      filter: { projectID: p.projectID, startTime: hour, endTime: '2025-06-01T11:00:00Z' },
    });
    expect(res.body.result.items).toEqual([
      expect.objectContaining({ period: '2025-06-01T10:00:00.000Z', type: 'late', count: 12 }),
    ]);
    const users = await usageRest(t.app, p.apiKey, {
      name: 'unique_users',
      filter: { projectID: p.projectID, startTime: hour, endTime: '2025-06-01T11:00:00Z' },
    });
    expect(users.body.result.items[0].count).toBe(3);
  });

  it('works the same through the GraphQL recordUsageEvents mutation', async () => {
    const res = await t.app.gql(
      `mutation($events: [UsageEventInput!]!) { recordUsageEvents(events: $events) { recorded duplicates } }`,
      {
        events: [
          {
            ...base(),
            kind: 'agent_invocation',
            agentID: 'a-gql',
            success: true,
            timestamp: '2026-02-03T08:00:00Z',
            name: null,
          },
        ],
      },
      p.apiKey,
    );
    expect(res.body).toEqual({ data: { recordUsageEvents: { recorded: 1, duplicates: 0 } } });
    const invalid = await t.app.gql(
      `mutation($events: [UsageEventInput!]!) { recordUsageEvents(events: $events) { recorded } }`,
      { events: [{ ...base(), kind: 'agent_invocation', agentID: 'a-gql', tokens: 5, success: true }] },
      p.apiKey,
    );
    expect(invalid.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: [{ path: 'events.0.tokens', message: 'is not an allowed member' }],
    });
  });
});
