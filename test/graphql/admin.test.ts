import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

describeEachDatabase('admin operations', (provider) => {
  const t = useTestApp(provider);

  it('creates a project with development and production environments and a key that works', async () => {
    const res = await t.app.gql(
      `mutation { createProject(input: { name: "Support bot" }) {
          apiKey
          project { id name workspaceID environments { id alias } }
          key { id projectID scopes revokedAt }
        } }`,
    );
    expect(res.status).toBe(200);
    const out = res.body.data.createProject;
    expect(out.project.id).toMatch(/^[0-9a-f]{24}$/);
    expect(out.project.environments.map((e: { alias: string }) => e.alias)).toEqual(['development', 'production']);
    expect(out.key).toMatchObject({ projectID: out.project.id, revokedAt: null });
    expect(out.key.scopes).not.toContain('admin');
    const whoami = await t.app.http('GET', '/v1/whoami', { key: out.apiKey });
    expect(whoami.body.key.projectID).toBe(out.project.id);
  });

  it('validates inputs: empty or long names, unknown scopes', async () => {
    for (const name of ['', 'x'.repeat(101)]) {
      const res = await t.app.gql('mutation($n: String!) { createProject(input: { name: $n }) { project { id } } }', {
        n: name,
      });
      expect(res.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
      expect(res.body.errors[0].extensions.details[0].path).toContain('name');
    }
    const scopes = await t.app.gql(
      'mutation { createProject(input: { name: "x", keyScopes: ["root"] }) { project { id } } }',
    );
    expect(scopes.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
  });

  it('creates environments, refusing duplicates (409) and bad aliases (400)', async () => {
    const p = await t.app.createProject();
    const ok = await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: { projectID: p.projectID, alias: 'staging' },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.environment).toMatchObject({ alias: 'staging', projectID: p.projectID });
    const dup = await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: { projectID: p.projectID, alias: 'staging' },
    });
    expect(dup.status).toBe(409);
    expect(dup.body.errorCode).toBe('CONFLICT');
    for (const alias of ['', 'Staging', '1abc', 'a'.repeat(33), 'abcdefabcdefabcdefabcdef']) {
      const bad = await t.app.http('POST', '/v1/environment', {
        key: t.app.operatorToken,
        body: { projectID: p.projectID, alias },
      });
      expect(bad.status, alias).toBe(400);
      expect(bad.body.details[0].path).toBe('alias');
    }
  });

  it('lets a key grant only scopes it holds itself', async () => {
    const p = await t.app.createProject({ scopes: ['admin', 'analytics:read'] });
    const denied = await t.app.gql(
      'mutation($p: ID!) { createApiKey(input: { projectID: $p, scopes: ["kb:write"] }) { apiKey } }',
      { p: p.projectID },
      p.apiKey,
    );
    expect(denied.body.errors[0].extensions.code).toBe('INSUFFICIENT_SCOPE');
    expect(denied.body.errors[0].message).toContain('kb:write');
    const allowed = await t.app.gql(
      'mutation($p: ID!) { createApiKey(input: { projectID: $p, scopes: ["analytics:read"] }) { key { scopes } } }',
      { p: p.projectID },
      p.apiKey,
    );
    expect(allowed.body.data.createApiKey.key.scopes).toEqual(['analytics:read']);
  });

  it('keeps an audit log of who did what, readable page by page', async () => {
    const p = await t.app.createProject();
    await t.app.http('POST', '/v1/environment', {
      key: t.app.operatorToken,
      body: { projectID: p.projectID, alias: 'qa' },
    });
    const first = await t.app.gql(
      'query($ws: ID!) { auditEvents(workspaceID: $ws, first: 2) { edges { node { action actor targetType } } pageInfo { hasNextPage endCursor } } }',
      { ws: p.workspaceID },
    );
    const page = first.body.data.auditEvents;
    expect(page.edges.map((e: { node: { action: string } }) => e.node.action)).toEqual([
      'environment.create',
      'key.create',
    ]);
    expect(page.edges[0].node.actor).toBe('operator');
    expect(page.pageInfo.hasNextPage).toBe(true);
    const second = await t.app.gql(
      'query($ws: ID!, $after: String) { auditEvents(workspaceID: $ws, first: 10, after: $after) { edges { node { action } } pageInfo { hasNextPage } } }',
      { ws: p.workspaceID, after: page.pageInfo.endCursor },
    );
    expect(second.body.data.auditEvents.edges.map((e: { node: { action: string } }) => e.node.action)).toEqual([
      'project.create',
      'workspace.create',
    ]);
    expect(second.body.data.auditEvents.pageInfo.hasNextPage).toBe(false);
  });

  it('loads projects and their environments without a query per project', async () => {
    const { workspaceID } = await t.app.createProject({ name: 'one' });
    for (let i = 0; i < 4; i++) await t.app.createProject({ name: `more ${i}`, workspaceId: workspaceID });
    const operations: string[] = [];
    // The job runner's polls are the instance's own work, not this request's.
    const listener = (e: { model: string | undefined; operation: string; background: boolean }) => {
      if (!e.background) operations.push(`${e.model}.${e.operation}`);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      const res = await t.app.gql('query($ws: ID) { projects(workspaceID: $ws) { id environments { alias } } }', {
        ws: workspaceID,
      });
      expect(res.body.data.projects).toHaveLength(5);
      expect(res.body.data.projects.every((p: { environments: unknown[] }) => p.environments.length === 2)).toBe(true);
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    expect(operations).toEqual(['Project.findMany']);
  });
});

describeEachDatabase('GraphQL in process', (provider) => {
  const t = useTestApp(provider);

  it('answers through yoga.fetch exactly as over HTTP', async () => {
    const p = await t.app.createProject();
    const res = await t.app.running.parley.yoga.fetch('http://parley.internal/graphql', {
      method: 'POST',
      headers: { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ viewer { kind projectID } }' }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: { viewer: { kind: 'key', projectID: p.projectID } } });
    const denied = await t.app.running.parley.yoga.fetch('http://parley.internal/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ viewer { kind } }' }),
    });
    const body = await denied.json();
    expect(denied.status).toBe(401);
    expect(body.errors[0].extensions).toEqual({ code: 'UNAUTHENTICATED', http: { status: 401 } });
  });
});
