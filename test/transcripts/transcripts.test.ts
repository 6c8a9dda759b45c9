import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, conversation, errorBody, ingestTranscript, unredactedProject } from './helpers';

const unknownId = 'ffffffffffffffffffffffff';

describeEachDatabase('transcripts over REST', (provider) => {
  const t = useTestApp(provider);

  it('ingests a transcript with logs, appends more in order, and returns it with history and logs', async () => {
    const p = await t.app.createProject();
    const created = await t.app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: {
        projectID: p.projectID,
        sessionID: 'session-1',
        userID: 'user-1',
        environment: 'production',
        logs: [...conversation('hi'), { type: 'end', data: null, createdAt: '2026-01-02T03:04:05+02:00' }],
      },
    });
    expect(created.status).toBe(201);
    const transcript = created.body.transcript;
    expect(transcript).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{24}$/),
      sessionID: 'session-1',
      projectID: p.projectID,
      environmentID: p.environments.find((e) => e.alias === 'production')!.id,
      userID: 'user-1',
      createdAt: expect.stringMatching(/Z$/),
      updatedAt: expect.stringMatching(/Z$/),
      expiresAt: null,
      endedAt: null,
      recordingURL: null,
      device: null,
      browser: null,
      os: null,
      properties: [],
      evaluations: [],
    });
    const appended = await t.app.http('POST', `/v1/transcript/${transcript.id}/logs`, {
      key: p.apiKey,
      body: { logs: conversation('second turn') },
    });
    expect(appended.status).toBe(204);
    expect(appended.text).toBe('');

    const got = await t.app.http('GET', `/v1/transcript/${transcript.id}`, { key: p.apiKey });
    expect(got.status).toBe(200);
    expect(got.body.transcript.history).toHaveLength(2);
    expect(
      got.body.transcript.logs.map((l: { type: string; data: { type?: string } }) => l.data?.type ?? l.type),
    ).toEqual(['text', 'text', 'debug', 'end', 'text', 'text', 'debug']);
    expect(got.body.transcript.logs[3]).toEqual({
      type: 'end',
      data: null,
      createdAt: '2026-01-02T01:04:05.000Z',
      updatedAt: expect.any(String),
    });
    expect(got.body.transcript.logs[4].data.payload).toBe('second turn');

    // The same session again is a conflict; the development environment is a different session.
    const again = await t.app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'session-1', environment: 'production' },
    });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject(errorBody(409, 'CONFLICT'));
    const dev = await t.app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'session-1' },
    });
    expect(dev.status).toBe(201);
    expect(dev.body.transcript.environmentID).toBe(p.environments.find((e) => e.alias === 'development')!.id);
  });

  it('refuses bad ingestion bodies with 400, unknown environments and transcripts with 404', async () => {
    const p = await t.app.createProject();
    const bad: [unknown, string][] = [
      [{ projectID: 'abc', sessionID: 's' }, 'projectID'],
      [{ projectID: `${p.projectID}0`, sessionID: 's' }, 'projectID'],
      [{ projectID: p.projectID, sessionID: '' }, 'sessionID'],
      [{ projectID: p.projectID, sessionID: 5 }, 'sessionID'],
      [{ projectID: p.projectID, sessionID: 's', extra: true }, 'extra'],
      [{ projectID: p.projectID, sessionID: 's', logs: [{ type: 'chat', data: {} }] }, 'logs.0.type'],
      [{ projectID: p.projectID, sessionID: 's', logs: [{ type: 'trace', data: { payload: 1 } }] }, 'logs.0.data'],
      [
        { projectID: p.projectID, sessionID: 's', logs: [{ type: 'action', data: {}, createdAt: '2026-01-02T03:04' }] },
        'logs.0.createdAt',
      ],
      [{ projectID: p.projectID, sessionID: 's', logs: [{ type: 'action', data: {}, more: 1 }] }, 'logs.0.more'],
    ];
    for (const [body, path] of bad) {
      const res = await t.app.http('POST', '/v1/transcript', { key: p.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject(errorBody(400, 'VALIDATION_FAILED'));
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const env = await t.app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 's', environment: 'staging' },
    });
    expect(env.status).toBe(404);
    const other = await t.app.createProject();
    const foreign = await t.app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: other.projectID, sessionID: 's' },
    });
    expect(foreign.status).toBe(404);
    const theirs = await ingestTranscript(t.app, other);
    for (const id of [unknownId, theirs]) {
      const res = await t.app.http('POST', `/v1/transcript/${id}/logs`, {
        key: p.apiKey,
        body: { logs: conversation('x') },
      });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject(errorBody(404, 'NOT_FOUND'));
    }
    const empty = await t.app.http('POST', `/v1/transcript/${theirs}/logs`, { key: other.apiKey, body: { logs: [] } });
    expect(empty.status).toBe(400);
    const notHex = await t.app.http('POST', '/v1/transcript/nothex/logs', {
      key: p.apiKey,
      body: { logs: conversation('x') },
    });
    expect(notHex.status).toBe(400);
    expect(notHex.body.details[0].path).toBe('transcriptID');
  });

  it('searches with take, skip and order, and refuses out-of-range paging', async () => {
    const p = await t.app.createProject();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await ingestTranscript(t.app, p, { sessionID: `s${i}` }));
    const search = (query: Record<string, string>, body?: unknown) =>
      t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, query, body });
    const all = await search({});
    expect(all.status).toBe(200);
    expect(Object.keys(all.body)).toEqual(['transcripts']);
    expect(all.body.transcripts.map((x: { id: string }) => x.id)).toEqual([...ids].reverse());
    const page = await search({ take: '2', skip: '1', order: 'ASC' });
    expect(page.body.transcripts.map((x: { id: string }) => x.id)).toEqual(ids.slice(1, 3));
    const last = await search({ take: '2', skip: '4', order: 'ASC' });
    expect(last.body.transcripts.map((x: { id: string }) => x.id)).toEqual(ids.slice(4));
    for (const [query, path] of [
      [{ take: '0' }, 'take'],
      [{ take: '101' }, 'take'],
      [{ take: 'ten' }, 'take'],
      [{ skip: '-1' }, 'skip'],
      [{ order: 'UP' }, 'order'],
      [{ encode: 'maybe' }, 'encode'],
    ] as const) {
      const res = await search(query);
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.body).toMatchObject(errorBody(400, 'VALIDATION_FAILED'));
      expect(res.body.details[0].path).toBe(path);
    }
    expect((await search({ take: '100' })).status).toBe(200);
    const badProject = await t.app.http('POST', '/v1/transcript/project/123', { key: p.apiKey });
    expect(badProject.status).toBe(400);
    const other = await t.app.createProject();
    const foreign = await t.app.http('POST', `/v1/transcript/project/${other.projectID}`, { key: p.apiKey });
    expect(foreign.status).toBe(404);
    expect((await t.app.http('POST', `/v1/transcript/project/${unknownId}`, { key: p.apiKey })).status).toBe(404);
  });

  it('filters by the body criteria, ignores members it does not know, and refuses bad values', async () => {
    const p = await t.app.createProject();
    const a = await ingestTranscript(t.app, p, { sessionID: 'alpha', userID: 'u1' });
    const b = await ingestTranscript(t.app, p, { sessionID: 'beta', userID: 'u2', environment: 'production' });
    const c = await ingestTranscript(t.app, p, { sessionID: 'gamma', userID: 'u1' });
    await t.app.http('POST', `/v1/transcript/${c}/project/${p.projectID}/end`, { key: p.apiKey });
    const search = async (body: unknown) => {
      const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, body });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.transcripts.map((x: { id: string }) => x.id).sort();
    };
    expect(await search({ sessionID: 'beta' })).toEqual([b]);
    expect(await search({ userID: 'u1' })).toEqual([a, c].sort());
    expect(await search({ environmentID: 'production' })).toEqual([b]);
    expect(await search({ environmentID: p.environments.find((e) => e.alias === 'development')!.id })).toEqual(
      [a, c].sort(),
    );
    expect(await search({ ended: true })).toEqual([c]);
    expect(await search({ ended: false })).toEqual([a, b].sort());
    expect(await search({ startDate: '2000-01-01T00:00:00Z', endDate: '2100-01-01T00:00:00Z' })).toHaveLength(3);
    expect(await search({ endDate: '2000-01-01T00:00:00Z' })).toEqual([]);
    expect(await search({ updatedAfter: '2100-01-01T00:00:00Z' })).toEqual([]);
    expect(await search({ updatedBefore: '2100-01-01T00:00:00+01:00' })).toHaveLength(3);
    // SPEC.md does not close the search body: members Parley does not know are ignored.
    expect(await search({ sessionID: 'beta', sessionId: 'alpha', platform: 'web' })).toEqual([b]);
    expect(await search({ ended: true, tags: ['x'] })).toEqual([c]);

    const bad: [unknown, string][] = [
      [{ ended: 'yes' }, 'ended'],
      [{ startDate: '2026-01-02T03:04:05' }, 'startDate'],
      [{ startDate: '2026-02-30T00:00:00Z' }, 'startDate'],
      [{ filters: [{ id: 'abc', op: 'eq', value: 1 }] }, 'filters.0.id'],
      [{ filters: [{ id: unknownId, op: 'like', value: 1 }] }, 'filters.0.op'],
      [{ filters: [{ id: unknownId, op: 'between', value: 1 }] }, 'filters.0.value'],
      [{ filters: [{ id: unknownId, op: 'in', value: [] }] }, 'filters.0.value'],
      [{ filters: [{ id: unknownId, op: 'exists', value: 1 }] }, 'filters.0.value'],
      [{ filters: Array.from({ length: 51 }, () => ({ id: unknownId, op: 'exists' })) }, 'filters'],
      // A well-formed filter on an ID that is neither a property nor an evaluation of the project.
      [{ filters: [{ id: unknownId, op: 'eq', value: 1 }] }, 'filters.0.id'],
    ];
    for (const [body, path] of bad) {
      const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(
        res.body.details.map((d: { path: string }) => d.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    const notJson = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey, body: '{"a":' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.errorCode).toBe('MALFORMED_JSON');
  });

  it('answers a search page with one query for transcripts, properties and evaluations (no N+1)', async () => {
    const p = await t.app.createProject();
    for (let i = 0; i < 6; i++) await ingestTranscript(t.app, p);
    const operations: string[] = [];
    // The job runner's polls are the instance's own work, not this request's.
    const listener = (e: { model: string | undefined; operation: string; background: boolean }) => {
      if (!e.background) operations.push(`${e.model}.${e.operation}`);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey });
      expect(res.body.transcripts).toHaveLength(6);
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    // One statement for the page and its relations (src/transcripts/search-page.ts: SQL on the
    // driver adapter, so the operation has no model). Access control reads nothing: the key's
    // project is cached with the key (src/auth/keys.ts).
    expect(operations.filter((o) => !o.startsWith('ApiKey.')).sort()).toEqual(['undefined.queryRows']);
  });

  it('gets a transcript: filterConversation, customTraceTypes, encode, unredacted', async () => {
    const p = await unredactedProject(t.app);
    const id = await ingestTranscript(t.app, p, {
      logs: [
        { type: 'action', data: { type: 'text', payload: 'call me on +44 20 7946 0958 or <a@example.com>' } },
        { type: 'trace', data: { type: 'text', payload: { message: 'Sure & "thanks"' } } },
        { type: 'trace', data: { type: 'speak', payload: { type: 'message', message: 'spoken' } } },
        { type: 'trace', data: { type: 'choice', payload: { buttons: [] } } },
        { type: 'trace', data: { type: 'live-agent-handoff', payload: {} } },
        { type: 'trace', data: { type: 'debug', payload: { message: 'x' } } },
        { type: 'end', data: null },
      ],
    });
    const get = (query: Record<string, string | string[]> = {}) =>
      t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey, query });
    const types = (res: { body: { transcript: { logs: { type: string; data: { type?: string } | null }[] } } }) =>
      res.body.transcript.logs.map((l) => (l.type === 'trace' ? l.data!.type : l.type));
    expect(types(await get())).toEqual(['action', 'text', 'speak', 'choice', 'live-agent-handoff', 'debug', 'end']);
    expect(types(await get({ filterConversation: 'true' }))).toEqual(['action', 'text', 'speak', 'live-agent-handoff']);
    expect(types(await get({ filterConversation: 'true', customTraceTypes: ['choice', 'debug'] }))).toEqual([
      'action',
      'text',
      'speak',
      'choice',
      'live-agent-handoff',
      'debug',
    ]);
    expect(types(await get({ filterConversation: 'true', customTraceTypes: 'choice' }))).toContain('choice');
    // The bracket forms that qs (indices) and axios (empty brackets) send, alone or mixed with the plain one.
    const bracketForms: Record<string, string | string[]>[] = [
      { 'customTraceTypes[]': ['choice', 'debug'] },
      { 'customTraceTypes[0]': 'choice', 'customTraceTypes[1]': 'debug' },
      { 'customTraceTypes[]': 'choice', customTraceTypes: 'debug' },
    ];
    for (const query of bracketForms) {
      expect(types(await get({ filterConversation: 'true', ...query })), JSON.stringify(query)).toEqual([
        'action',
        'text',
        'speak',
        'choice',
        'live-agent-handoff',
        'debug',
      ]);
    }
    // REST and GraphQL share one limit: at most 50 names of at most 100 characters.
    const names = (n: number, length = 5) => Array.from({ length: n }, (_, i) => `${i}`.padStart(length, 't'));
    expect((await get({ filterConversation: 'true', 'customTraceTypes[]': names(50) })).status).toBe(200);
    const logsQuery = `query($id: ID!, $types: [String!]) { transcript(id: $id) { logs(filterConversation: true, customTraceTypes: $types) { type } } }`;
    expect((await t.app.gql(logsQuery, { id, types: names(50) }, p.apiKey)).body.errors).toBeUndefined();
    for (const [list, path] of [
      [names(51), 'customTraceTypes'],
      [names(1, 101), 'customTraceTypes.0'],
    ] as const) {
      const rest = await get({ filterConversation: 'true', 'customTraceTypes[]': [...list] });
      expect(rest.status).toBe(400);
      expect(rest.body.details[0].path).toBe(path);
      const gql = await t.app.gql(logsQuery, { id, types: list }, p.apiKey);
      expect(gql.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
    }

    const redacted = await get();
    expect(redacted.body.transcript.logs[0].data.payload).toBe('call me on [phone] or <[email]>');
    const original = await get({ unredacted: 'true' });
    expect(original.body.transcript.logs[0].data.payload).toBe('call me on +44 20 7946 0958 or <a@example.com>');
    const encoded = await get({ encode: 'true' });
    expect(encoded.body.transcript.logs[0].data.payload).toBe('call me on [phone] or &lt;[email]&gt;');
    expect(encoded.body.transcript.logs[1].data.payload.message).toBe('Sure &amp; &quot;thanks&quot;');

    // Past the retention the original is gone: unredacted=true then returns the redacted text.
    await t.app.services.db.prisma.transcriptLogOriginal.updateMany({
      where: { log: { transcriptId: id } },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    const expired = await get({ unredacted: 'true' });
    expect(expired.body.transcript.logs[0].data.payload).toBe('call me on [phone] or <[email]>');

    // transcripts:read alone never reads the originals: 401 naming the scope, over REST and GraphQL.
    const made = await t.app.gql(
      'mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { apiKey key { scopes } } }',
      { input: { projectID: p.projectID, scopes: ['transcripts:read'] } },
    );
    const readerKey = made.body.data.createApiKey.apiKey as string;
    const asReader = (query: Record<string, string>) =>
      t.app.http('GET', `/v1/transcript/${id}`, { key: readerKey, query });
    expect((await asReader({})).body.transcript.logs[0].data.payload).toBe('call me on [phone] or <[email]>');
    const refused = await asReader({ unredacted: 'true' });
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({
      ...errorBody(401, 'INSUFFICIENT_SCOPE'),
      message: expect.stringContaining('transcripts:read-unredacted'),
    });
    const overGraphql = await t.app.gql(
      'query($id: ID!) { transcript(id: $id) { logs(unredacted: true) { data } } }',
      { id },
      readerKey,
    );
    expect(overGraphql.body.errors[0].extensions.code).toBe('INSUFFICIENT_SCOPE');
    expect(JSON.stringify(overGraphql.body)).not.toContain('7946');
    // A new project key does not get the scope unless asked for.
    const plain = await t.app.createProject();
    const keys = await t.app.gql('query { viewer { scopes } }', {}, plain.apiKey);
    expect(keys.body.data.viewer.scopes).not.toContain('transcripts:read-unredacted');

    for (const query of [{ unredacted: 'yes' }, { filterConversation: '2' }] as Record<string, string>[]) {
      expect((await get(query)).status).toBe(400);
    }
    const other = await t.app.createProject();
    expect((await t.app.http('GET', `/v1/transcript/${id}`, { key: other.apiKey })).status).toBe(404);
    expect((await t.app.http('GET', `/v1/transcript/${unknownId}`, { key: p.apiKey })).status).toBe(404);
    expect((await t.app.http('GET', '/v1/transcript/xyz', { key: p.apiKey })).status).toBe(400);
  });

  it('ends a transcript once, queueing one job per enabled evaluation; ending again is a 200 no-op', async () => {
    const p = await adminProject(t.app);
    const make = (name: string, enabled: boolean) =>
      t.app.http('POST', '/v1/transcript-evaluation', {
        key: p.apiKey,
        body: { projectID: p.projectID, name, enabled, type: 'string', prompt: 'What did the user want?' },
      });
    for (const [name, enabled] of [
      ['a', true],
      ['b', true],
      ['off', false],
    ] as const)
      expect((await make(name, enabled)).status).toBe(201);
    const id = await ingestTranscript(t.app, p);
    t.app.services.jobs.abandon(); // keep the jobs queued so the test can count them
    const end = await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
    expect(end.status).toBe(200);
    expect(end.body).toEqual({ transcriptID: id, endedAt: expect.stringMatching(/Z$/), evaluationsQueued: 2 });
    const again = await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ transcriptID: id, endedAt: end.body.endedAt, evaluationsQueued: 0 });
    const jobs = await t.app.services.db.prisma.job.findMany({
      where: { projectId: p.projectID, queue: 'evaluation' },
    });
    expect(jobs).toHaveLength(2);
    const got = await t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey, query: { allEvaluations: 'true' } });
    expect(got.body.transcript.endedAt).toBe(end.body.endedAt);
    expect(got.body.transcript.evaluations.map((e: { name: string; status: string }) => [e.name, e.status])).toEqual([
      ['a', 'pending'],
      ['b', 'pending'],
    ]);
    t.app.services.jobs.start();

    const other = await t.app.createProject();
    expect(
      (await t.app.http('POST', `/v1/transcript/${id}/project/${other.projectID}/end`, { key: other.apiKey })).status,
    ).toBe(404);
    expect(
      (await t.app.http('POST', `/v1/transcript/${id}/project/${other.projectID}/end`, { key: p.apiKey })).status,
    ).toBe(404);
    expect(
      (await t.app.http('POST', `/v1/transcript/${unknownId}/project/${p.projectID}/end`, { key: p.apiKey })).status,
    ).toBe(404);
    expect((await t.app.http('POST', `/v1/transcript/${id}/project/short/end`, { key: p.apiKey })).status).toBe(400);
  });

  it('deletes a transcript with its logs, originals, values and results, leaving nothing behind', async () => {
    const p = await adminProject(t.app);
    const prop = await t.app.http('POST', '/v1/transcript-property', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'topic', type: 'string' },
    });
    const id = await ingestTranscript(t.app, p, { logs: conversation('my mail is x@y.org') });
    await t.app.http('POST', '/v1/transcript-property-value', {
      key: p.apiKey,
      body: { propertyID: prop.body.property.id, transcriptID: id, value: 'billing' },
    });
    await t.app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'e', type: 'string', prompt: 'p' },
    });
    await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
    const db = t.app.services.db.prisma;
    // The user's message and the agent's echo of it both held the address.
    expect(await db.transcriptLogOriginal.count({ where: { log: { transcriptId: id } } })).toBe(2);
    const originalsBefore = await db.transcriptLogOriginal.count();
    const other = await t.app.createProject();
    expect((await t.app.http('DELETE', `/v1/transcript/${id}`, { key: other.apiKey })).status).toBe(404);
    const res = await t.app.http('DELETE', `/v1/transcript/${id}`, { key: p.apiKey });
    expect(res.status).toBe(204);
    expect(await db.transcript.count({ where: { id } })).toBe(0);
    expect(await db.transcriptLog.count({ where: { transcriptId: id } })).toBe(0);
    expect(await db.transcriptLogOriginal.count()).toBe(originalsBefore - 2);
    expect(await db.transcriptPropertyValue.count({ where: { transcriptId: id } })).toBe(0);
    expect(await db.evaluationResult.count({ where: { transcriptId: id } })).toBe(0);
    expect((await t.app.http('DELETE', `/v1/transcript/${id}`, { key: p.apiKey })).status).toBe(404);
    expect((await t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey })).status).toBe(404);
  });

  it('needs transcripts:read to read and transcripts:write to write (401 naming the scope)', async () => {
    const owner = await t.app.createProject();
    const id = await ingestTranscript(t.app, owner);
    const readOnly = await t.app.gql(
      'mutation($p: ID!) { createApiKey(input: { projectID: $p, scopes: ["transcripts:read"] }) { apiKey } }',
      { p: owner.projectID },
    );
    const key = readOnly.body.data.createApiKey.apiKey;
    expect((await t.app.http('GET', `/v1/transcript/${id}`, { key })).status).toBe(200);
    const del = await t.app.http('DELETE', `/v1/transcript/${id}`, { key });
    expect(del.status).toBe(401);
    expect(del.body).toMatchObject({
      errorCode: 'INSUFFICIENT_SCOPE',
      message: expect.stringContaining('transcripts:write'),
    });
    const analytics = await t.app.gql(
      'mutation($p: ID!) { createApiKey(input: { projectID: $p, scopes: ["analytics:read"] }) { apiKey } }',
      { p: owner.projectID },
    );
    const search = await t.app.http('POST', `/v1/transcript/project/${owner.projectID}`, {
      key: analytics.body.data.createApiKey.apiKey,
    });
    expect(search.status).toBe(401);
    expect((await t.app.http('GET', `/v1/transcript/${id}`)).status).toBe(401);
  });

  it('serves the search over GraphQL as a connection with totalCount and cursors', async () => {
    const p = await t.app.createProject();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await ingestTranscript(t.app, p, { userID: i % 2 ? 'odd' : 'even' }));
    const query = `query($p: ID!, $c: TranscriptSearchCriteria, $first: Int, $after: String) {
      transcripts(projectID: $p, criteria: $c, first: $first, after: $after, order: ASC) {
        totalCount edges { cursor node { id userID } } pageInfo { hasNextPage endCursor }
      }
    }`;
    const first = await t.app.gql(query, { p: p.projectID, first: 3 }, p.apiKey);
    expect(first.body.data.transcripts.totalCount).toBe(4);
    expect(first.body.data.transcripts.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.slice(0, 3));
    expect(first.body.data.transcripts.pageInfo.hasNextPage).toBe(true);
    const next = await t.app.gql(
      query,
      { p: p.projectID, first: 3, after: first.body.data.transcripts.pageInfo.endCursor },
      p.apiKey,
    );
    expect(next.body.data.transcripts.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.slice(3));
    const odd = await t.app.gql(query, { p: p.projectID, c: { userID: 'odd' } }, p.apiKey);
    expect(odd.body.data.transcripts.totalCount).toBe(2);
    const tooMany = await t.app.gql(query, { p: p.projectID, first: 101 }, p.apiKey);
    expect(tooMany.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
  });
});
