import { afterAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';

/** State endpoints, and turns of one user that never lose each other's updates. */

const counter = {
  name: 'Counter',
  startFlow: 'main',
  variables: [{ name: 'count', default: 0 }, { name: 'seen', default: [] }, { name: 'answer' }],
  flows: [
    {
      id: 'main',
      start: 'inc',
      steps: [
        // The wait widens the window in which two turns would overwrite each other without the lease.
        { id: 'inc', type: 'set', assignments: [{ variable: 'count', value: 'count + 1' }], next: 'pause' },
        { id: 'pause', type: 'wait', ms: 20, next: 'remember' },
        {
          id: 'remember',
          type: 'set',
          assignments: [{ variable: 'seen', value: '$append(seen, count)' }],
          next: 'say',
        },
        { id: 'say', type: 'message', message: '{count}', next: 'ask' },
        { id: 'ask', type: 'capture', variable: 'answer', next: 'inc' },
      ],
    },
  ],
};

async function concurrentTurns(apps: TestApp[], projectID: string, key: string, user: string, n: number) {
  const results = await Promise.all(
    Array.from({ length: n }, (_v, i) =>
      interact(apps[i % apps.length]!, key, projectID, user, { action: { type: 'text', payload: 'go' } }),
    ),
  );
  for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200);
  return results.map((r) => Number(firstMessage(r.body)));
}

function firstMessage(traces: unknown): string | undefined {
  const text = (traces as { type: string; payload: { message?: string } }[]).find((tr) => tr.type === 'text');
  return text?.payload.message;
}

describeEachDatabase('runtime state', (provider) => {
  const t = useTestApp(provider);
  const extra: TestApp[] = [];
  afterAll(async () => {
    for (const app of extra) await app.close();
  });

  it('GET, PUT, PATCH variables and DELETE a user state, with the documented errors', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, counter);
    const base = `/v2/project/${p.projectID}/user/${encodeURIComponent('user one')}/state`;

    const missing = await t.app.http('GET', base, { key: p.apiKey });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ statusCode: 404, errorCode: 'NOT_FOUND' });

    await interact(t.app, p.apiKey, p.projectID, 'user one', { action: { type: 'launch' } });
    const got = await t.app.http('GET', base, { key: p.apiKey });
    expect(got.status).toBe(200);
    expect(got.body.variables).toMatchObject({ count: 1, user_id: 'user one' });
    expect(got.body.stack).toEqual([
      { programID: 'main', diagramID: 'main', nodeID: 'ask', variables: {}, storage: { waiting: true } },
    ]);

    const patched = await t.app.http('PATCH', `${base}/variables`, {
      key: p.apiKey,
      body: { count: 40, extra: { a: 1 } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.variables).toMatchObject({ count: 40, extra: { a: 1 } });
    // The next turn continues from the patched value.
    const after = await interact(t.app, p.apiKey, p.projectID, 'user one', {
      action: { type: 'text', payload: 'more' },
    });
    expect(firstMessage(after.body)).toBe('41');

    const replaced = await t.app.http('PUT', base, {
      key: p.apiKey,
      body: { stack: [{ diagramID: 'main', nodeID: 'say' }], storage: {}, variables: { count: 7, seen: [] } },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toEqual({
      stack: [{ programID: 'main', diagramID: 'main', nodeID: 'say', variables: {}, storage: {} }],
      storage: {},
      variables: { count: 7, seen: [] },
    });
    // A stack that is not waiting continues where it stands.
    const resumed = await interact(t.app, p.apiKey, p.projectID, 'user one', {
      action: { type: 'text', payload: 'x' },
    });
    expect(firstMessage(resumed.body)).toBe('7');

    const badPut = await t.app.http('PUT', base, { key: p.apiKey, body: { stack: 'nope', other: 1 } });
    expect(badPut.status).toBe(400);
    expect(badPut.body.details).toEqual(
      expect.arrayContaining([
        { path: 'stack', message: 'must be an array (got a string)' },
        { path: 'other', message: 'is not an allowed member' },
      ]),
    );
    const badPatch = await t.app.http('PATCH', `${base}/variables`, { key: p.apiKey, body: { '1bad': 1 } });
    expect(badPatch.status).toBe(400);

    const other = await t.app.createProject();
    expect((await t.app.http('GET', base, { key: other.apiKey })).status).toBe(404);
    const reader = await t.app.createProject({ scopes: ['analytics:read'] });
    const noScope = await t.app.http('GET', `/v2/project/${reader.projectID}/user/x/state`, { key: reader.apiKey });
    expect(noScope.status).toBe(401);
    expect(noScope.body.errorCode).toBe('INSUFFICIENT_SCOPE');

    const deleted = await t.app.http('DELETE', base, { key: p.apiKey });
    expect(deleted.status).toBe(204);
    expect((await t.app.http('GET', base, { key: p.apiKey })).status).toBe(404);
    expect((await t.app.http('DELETE', base, { key: p.apiKey })).status).toBe(404);

    // Environments are separate: production has no state for this user.
    const prod = await t.app.http('GET', base, { key: p.apiKey, query: { environment: 'production' } });
    expect(prod.status).toBe(404);
    expect((await t.app.http('GET', base, { key: p.apiKey, query: { environment: 'nope' } })).status).toBe(404);
  });

  it('never loses an update when turns of one user run at the same time', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, counter);
    await interact(t.app, p.apiKey, p.projectID, 'racer', { action: { type: 'launch' } });
    const n = 8;
    const counts = await concurrentTurns([t.app], p.projectID, p.apiKey, 'racer', n);
    // Each turn saw the one before it: every count from 2 to n + 1 exactly once.
    expect([...counts].sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_v, i) => i + 2));
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/racer/state`, { key: p.apiKey });
    expect(state.body.variables.count).toBe(n + 1);
    expect([...state.body.variables.seen].sort((a: number, b: number) => a - b)).toEqual(
      Array.from({ length: n + 1 }, (_v, i) => i + 1),
    );
  });

  it('never loses an update across two instances sharing the database', async () => {
    // Two servers on one database: the lease is in the database, not in a process.
    const second = await startTestApp(provider, {
      database: t.app.database,
      env: { ADMIN_TOKEN: t.app.operatorToken },
    });
    extra.push(second);
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, counter);
    await interact(t.app, p.apiKey, p.projectID, 'twin', { action: { type: 'launch' } });
    const n = 8;
    const counts = await concurrentTurns([t.app, second], p.projectID, p.apiKey, 'twin', n);
    expect([...counts].sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_v, i) => i + 2));
    const state = await second.http('GET', `/v2/project/${p.projectID}/user/twin/state`, { key: p.apiKey });
    expect(state.body.variables.count).toBe(n + 1);
  });
});
