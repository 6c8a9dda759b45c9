import { afterAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, useTestApp } from '../helpers/app';
import { createTestDatabase, describeEachDatabase, describeWithRedis } from '../helpers/lanes';
import { publish } from '../helpers/runtime';
import { recordSubscription } from '../helpers/subscriptions';

const subscription =
  'subscription($ws: ID) { auditEvents(workspaceID: $ws) { action actor targetType targetID workspaceID data } }';

interface AuditResult {
  data?: {
    auditEvents: {
      action: string;
      actor: string;
      targetType: string;
      targetID: string;
      workspaceID: string;
      data: unknown;
    };
  };
  errors?: { message: string; extensions: { code: string } }[];
}

function createEnvironment(app: TestApp, projectID: string, alias: string) {
  return app.http('POST', '/v1/environment', { key: app.operatorToken, body: { projectID, alias } });
}

describeEachDatabase('GraphQL subscriptions over SSE', (provider) => {
  const t = useTestApp(provider);

  for (const singleConnection of [false, true]) {
    const mode = singleConnection
      ? 'single connection mode on /graphql/stream'
      : 'distinct connections mode on /graphql';
    it(`delivers the audit stream in graphql-sse ${mode}`, async () => {
      const p = await t.app.createProject();
      const sub = recordSubscription<AuditResult>(t.app, {
        query: subscription,
        variables: { ws: p.workspaceID },
        key: t.app.operatorToken,
        singleConnection,
      });
      try {
        let probes = 0;
        const primed = await sub.prime(() => createEnvironment(t.app, p.projectID, `probe-${probes++}`));
        const key = await t.app.gql('mutation($p: ID!) { createApiKey(input: { projectID: $p }) { key { id } } }', {
          p: p.projectID,
        });
        const keyId = key.body.data.createApiKey.key.id;
        const events = await sub.waitFor((e) => e.some((x) => x.data?.auditEvents.targetID === keyId));
        expect(events.slice(0, primed).every((e) => e.data?.auditEvents.action === 'environment.create')).toBe(true);
        expect(events.at(-1)).toEqual({
          data: {
            auditEvents: {
              action: 'key.create',
              actor: 'operator',
              targetType: 'apiKey',
              targetID: keyId,
              workspaceID: p.workspaceID,
              data: { projectId: p.projectID, scopes: expect.any(Array) },
            },
          },
        });
      } finally {
        sub.close();
      }
    });
  }

  it('authorises on subscribe: a key without the admin scope is refused', async () => {
    const p = await t.app.createProject();
    const res = await fetch(`${t.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: p.apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: subscription, variables: { ws: p.workspaceID } }),
    });
    const text = await res.text();
    expect(text).toContain('INSUFFICIENT_SCOPE');
    expect(text).not.toContain('"action"');
  });

  it('validates arguments on subscribe (once), then resolves every event', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'Two',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'one',
          steps: [
            { id: 'one', type: 'message', message: 'One.', next: 'two' },
            { id: 'two', type: 'message', message: 'Two.' },
          ],
        },
      ],
    });
    const interact =
      'subscription($p: ID!, $u: String!) { interact(projectID: $p, userID: $u, request: { action: { type: "launch" } }) { event trace } }';
    const run = async (userID: string) => {
      const res = await fetch(`${t.app.url}/graphql`, {
        method: 'POST',
        headers: { authorization: p.apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: interact, variables: { p: p.projectID, u: userID } }),
      });
      return res.text();
    };
    const refused = await run('');
    expect(refused).toContain('VALIDATION_FAILED');
    expect(refused).not.toContain('"trace"');
    const served = await run('sub-user');
    const messages = [...served.matchAll(/"message":"([^"]*)"/g)].map((m) => m[1]);
    expect(messages).toEqual(['One.', 'Two.']);
    expect(served).not.toContain('errors');
  });

  it("does not show one workspace's events to another workspace's admin key", async () => {
    const mine = await t.app.createProject({ scopes: ['admin'] });
    const wsKey = (
      await t.app.gql(
        'mutation($ws: ID!) { createApiKey(input: { workspaceID: $ws, scopes: ["admin"] }) { apiKey } }',
        {
          ws: mine.workspaceID,
        },
      )
    ).body.data.createApiKey.apiKey;
    const other = await t.app.createProject();
    const sub = recordSubscription<AuditResult>(t.app, { query: subscription, key: wsKey, singleConnection: true });
    try {
      let n = 0;
      await sub.prime(async () => {
        await createEnvironment(t.app, other.projectID, `theirs-${n}`);
        await createEnvironment(t.app, mine.projectID, `mine-${n++}`);
      });
      const last = await createEnvironment(t.app, mine.projectID, 'last');
      await sub.waitFor((e) => e.some((x) => x.data?.auditEvents.targetID === last.body.environment.id));
      expect(sub.events.every((e) => e.data?.auditEvents.workspaceID === mine.workspaceID)).toBe(true);
    } finally {
      sub.close();
    }
  });
});

describeWithRedis('subscriptions across instances', (redisUrl) => {
  const apps: TestApp[] = [];
  const databases: { drop(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const database of databases) await database.drop();
  });

  it('delivers an event published on one instance to a subscriber on another, through Redis', async () => {
    const database = await createTestDatabase('sqlite');
    databases.push(database);
    const a = await startTestApp('sqlite', { database, env: { REDIS_URL: redisUrl } });
    const b = await startTestApp('sqlite', { database, env: { REDIS_URL: redisUrl, ADMIN_TOKEN: a.operatorToken } });
    apps.push(a, b);
    const p = await a.createProject();
    const sub = recordSubscription<AuditResult>(a, {
      query: subscription,
      variables: { ws: p.workspaceID },
      key: a.operatorToken,
      singleConnection: true,
    });
    try {
      // Environments are created on B only; the subscriber is on A. (Events published on A just
      // before the subscription started, such as the project's own creation, may arrive too.)
      const madeOnB = new Set<string>();
      let n = 0;
      const createOnB = async () => {
        const res = await createEnvironment(b, p.projectID, `via-b-${n++}`);
        expect(res.status).toBe(201);
        madeOnB.add(res.body.environment.id);
      };
      await sub.prime(createOnB);
      await createOnB();
      const events = await sub.waitFor((e) => e.some((x) => madeOnB.has(x.data?.auditEvents.targetID ?? '')));
      expect(events.find((x) => madeOnB.has(x.data?.auditEvents.targetID ?? ''))).toMatchObject({
        data: { auditEvents: { action: 'environment.create', workspaceID: p.workspaceID } },
      });
    } finally {
      sub.close();
    }
  });

  it('keeps deployments with different prefixes apart on one Redis', async () => {
    const database = await createTestDatabase('sqlite');
    databases.push(database);
    const a = await startTestApp('sqlite', { database, env: { REDIS_URL: redisUrl, REDIS_PREFIX: 'deploy-a:' } });
    const b = await startTestApp('sqlite', {
      database,
      env: { REDIS_URL: redisUrl, REDIS_PREFIX: 'deploy-b:', ADMIN_TOKEN: a.operatorToken },
    });
    apps.push(a, b);
    const p = await a.createProject();
    const sub = recordSubscription<AuditResult>(a, {
      query: subscription,
      variables: { ws: p.workspaceID },
      key: a.operatorToken,
    });
    try {
      let n = 0;
      await sub.prime(() => createEnvironment(a, p.projectID, `on-a-${n++}`));
      const onB = await createEnvironment(b, p.projectID, 'on-b');
      const marker = await createEnvironment(a, p.projectID, 'on-a-marker');
      await sub.waitFor((e) => e.some((x) => x.data?.auditEvents.targetID === marker.body.environment.id));
      const seen = sub.events.map((e) => e.data?.auditEvents.targetID);
      expect(seen).not.toContain(onB.body.environment.id);
    } finally {
      sub.close();
    }
  });
});
