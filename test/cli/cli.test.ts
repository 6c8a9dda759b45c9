import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createScratchDatabase } from '../../src/db/scratch';
import { startTestApp } from '../helpers/app';
import { describeEachDatabase, describeWithRedis, lanes } from '../helpers/lanes';
import { runParley as parley } from '../helpers/serve-process';

describeEachDatabase('the parley CLI', (provider) => {
  let database: ScratchDatabase;
  beforeAll(async () => {
    // An empty database: the CLI applies the migrations itself.
    const l = lanes();
    database = await createScratchDatabase(provider, {
      pgAdminUrl: l.postgres?.adminUrl,
      prefix: `parley_t_${l.runId}_cli`,
    });
  });
  afterAll(async () => {
    await database.drop();
  });

  it('creates a project, printing exactly one JSON object on stdout, and its key authenticates GraphQL', async () => {
    const out = await parley(['project', 'create', '--name', 'demo'], { DATABASE_URL: database.url });
    expect(out.code).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const created = JSON.parse(lines[0]!);
    expect(Object.keys(created).sort()).toEqual(['apiKey', 'environments', 'projectID', 'workspaceID']);
    expect(created.projectID).toMatch(/^[0-9a-f]{24}$/);
    expect(created.workspaceID).toMatch(/^[0-9a-f]{24}$/);
    expect(created.apiKey).toMatch(/^ak\.[0-9a-f]{24}\./);
    expect(created.environments.map((e: { alias: string }) => e.alias)).toEqual(['development', 'production']);
    // Logs went to stderr, as JSON lines.
    expect(out.stderr).toContain('applied database migrations');

    const app = await startTestApp(provider, { database });
    try {
      const res = await app.gql('{ viewer { kind projectID } projects { name } }', {}, created.apiKey);
      expect(res.body.data).toEqual({
        viewer: { kind: 'key', projectID: created.projectID },
        projects: [{ name: 'demo' }],
      });

      const key = await parley(
        [
          'key',
          'create',
          '--project',
          created.projectID,
          '--scopes',
          'analytics:read,kb:read,transcripts:read-unredacted',
        ],
        {
          DATABASE_URL: database.url,
        },
      );
      expect(key.code).toBe(0);
      const k = JSON.parse(key.stdout);
      expect(Object.keys(k).sort()).toEqual(['apiKey', 'keyID', 'scopes']);
      expect(k.scopes).toEqual(['analytics:read', 'kb:read', 'transcripts:read-unredacted']);
      expect((await app.http('GET', '/v1/whoami', { key: k.apiKey })).body.key.scopes).toEqual([
        'analytics:read',
        'kb:read',
        'transcripts:read-unredacted',
      ]);

      const revoke = await parley(['key', 'revoke', k.keyID], { DATABASE_URL: database.url });
      expect(revoke.code).toBe(0);
      expect(JSON.parse(revoke.stdout)).toMatchObject({ keyID: k.keyID, revokedAt: expect.stringMatching(/Z$/) });
      app.services.auth.invalidate(k.keyID); // another process revoked it: this instance's cache would keep it for up to KEY_CACHE_TTL_MS
      expect((await app.http('GET', '/v1/whoami', { key: k.apiKey })).status).toBe(401);
    } finally {
      await app.close();
    }
  });

  it('exits 2 with usage on bad arguments, and 1 naming an unknown project', async () => {
    const noName = await parley(['project', 'create'], { DATABASE_URL: database.url });
    expect(noName.code).toBe(2);
    expect(noName.stdout).toBe('');
    expect(noName.stderr).toContain('--name');
    const badScope = await parley(['key', 'create', '--project', 'a'.repeat(24), '--scopes', 'root'], {
      DATABASE_URL: database.url,
    });
    expect(badScope.code).toBe(2);
    const unknown = await parley(['key', 'create', '--project', 'a'.repeat(24)], { DATABASE_URL: database.url });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not found');
    const bogus = await parley(['frobnicate'], { DATABASE_URL: database.url });
    expect(bogus.code).toBe(2);
  });

  it('migrates on demand and reports what it applied', async () => {
    const out = await parley(['migrate'], { DATABASE_URL: database.url });
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({ applied: [] });
  });

  it('shows and sets web chat settings, refusing bad values', async () => {
    const env = { DATABASE_URL: database.url };
    const created = JSON.parse((await parley(['project', 'create', '--name', 'chat'], env)).stdout);
    const shown = await parley(['webchat', 'show', '--project', created.projectID], env);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      enabled: false,
      allowedOrigins: [],
      environmentAlias: 'development',
    });
    const set = await parley(
      [
        'webchat',
        'set',
        '--project',
        created.projectID,
        '--environment',
        'production',
        '--enable',
        '--origin',
        'https://a.example',
        '--origin',
        'http://localhost:8080',
        '--title',
        'Help',
        '--position',
        'left',
        '--no-feedback',
      ],
      env,
    );
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      enabled: true,
      environmentAlias: 'production',
      allowedOrigins: ['https://a.example', 'http://localhost:8080'],
      title: 'Help',
      position: 'left',
      feedback: false,
    });
    const again = await parley(['webchat', 'show', '--project', created.projectID, '--environment', 'production'], env);
    expect(JSON.parse(again.stdout)).toMatchObject({ enabled: true, title: 'Help' });
    const bad = await parley(
      ['webchat', 'set', '--project', created.projectID, '--origin', 'https://a.example/x'],
      env,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('allowedOrigins.0: must be an origin');
    // Five CLI processes, each starting tsx and opening the database: generous on a loaded machine.
  }, 300_000);
});

describeWithRedis('a key revoked from the CLI', (redisUrl) => {
  it('is refused at once by a running server that shares the Redis, not after its key cache ages', async () => {
    const l = lanes();
    // A key cache that would keep the key for a minute: only the announcement can drop it in time.
    const env = { REDIS_URL: redisUrl, REDIS_PREFIX: `parley-test:${l.runId}:cli:` };
    const app = await startTestApp('sqlite', { env: { ...env, KEY_CACHE_TTL_MS: '60000' } });
    const { database } = app;
    try {
      const project = await app.createProject();
      const key = await parley(['key', 'create', '--project', project.projectID, '--scopes', 'analytics:read'], {
        DATABASE_URL: database.url,
        ...env,
      });
      expect(key.code).toBe(0);
      const k = JSON.parse(key.stdout);
      expect((await app.http('GET', '/v1/whoami', { key: k.apiKey })).status).toBe(200); // now cached

      const revoke = await parley(['key', 'revoke', k.keyID], { DATABASE_URL: database.url, ...env });
      expect(revoke.code).toBe(0);
      await expect
        .poll(async () => (await app.http('GET', '/v1/whoami', { key: k.apiKey })).status, { timeout: 10_000 })
        .toBe(401);
    } finally {
      await app.close();
    }
  });
});
