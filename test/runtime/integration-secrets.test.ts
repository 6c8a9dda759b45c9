import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { ConfigError, loadConfig } from '../../src/env';
import { createSecretBox, keyIdOf, parseSecretKey } from '../../src/lib/secret-box';
import { startTestApp, type TestApp, testIntegrationSecretsKey } from '../helpers/app';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';
import { runParley } from '../helpers/serve-process';

/**
 * Integration header values (MCP credentials) at rest: sealed with AES-256-GCM under
 * INTEGRATION_SECRETS_KEY, read back in clear by admin only, refused without a key, and rows
 * written in clear before encryption existed are sealed when an instance with the key starts.
 */

const create = `mutation($input: CreateIntegrationInput!) { createIntegration(input: $input) { id headers headerNames } }`;
const list = `query($p: ID!) { integrations(projectID: $p) { name headers headerNames } }`;

describeEachDatabase('integration secrets at rest', (provider) => {
  let database: ScratchDatabase;
  let app: TestApp;
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    app = await startTestApp(provider, { database });
  });
  afterAll(async () => {
    await app?.close();
    await database?.drop();
  });

  const storedHeaders = async (id: string) =>
    (await app.services.db.prisma.integration.findUniqueOrThrow({ where: { id } })).headers as Record<string, string>;

  it('stores header values sealed, gives them back to admin, and re-seals on update', async () => {
    const p = await app.createProject({ scopes: ['admin', 'runtime:interact'] });
    const res = await app.gql(create, {
      input: {
        projectID: p.projectID,
        name: 'crm',
        url: 'https://mcp.example.com/mcp',
        headers: { Authorization: 'Bearer s3cret-value' },
      },
    });
    expect(res.body.errors).toBeUndefined();
    const { id } = res.body.data.createIntegration;
    expect(res.body.data.createIntegration.headers).toEqual({ Authorization: 'Bearer s3cret-value' });

    const stored = await storedHeaders(id);
    expect(Object.keys(stored)).toEqual(['sealed:v1']);
    expect(JSON.stringify(stored)).not.toContain('s3cret');
    const box = createSecretBox(parseSecretKey(testIntegrationSecretsKey)!);
    expect(JSON.parse(box.open(stored['sealed:v1']!, `integration-headers:${id}`))).toEqual({
      Authorization: 'Bearer s3cret-value',
    });
    // Sealed for its row: the same value does not open as another row's.
    expect(() => box.open(stored['sealed:v1']!, 'integration-headers:other')).toThrow();

    const listed = await app.gql(list, { p: p.projectID });
    expect(listed.body.data.integrations).toEqual([
      { name: 'crm', headers: { Authorization: 'Bearer s3cret-value' }, headerNames: ['Authorization'] },
    ]);
    // Only admin reads them back.
    const nonAdmin = await app.createProject({ scopes: ['runtime:interact'] });
    const refused = await app.gql(list, { p: nonAdmin.projectID }, nonAdmin.apiKey);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('INSUFFICIENT_SCOPE');

    const updated = await app.gql(
      `mutation($p: ID!, $id: ID!, $h: JSONObject!) { updateIntegration(projectID: $p, id: $id, input: {headers: $h}) { headers } }`,
      { p: p.projectID, id, h: { 'X-Key': 'k2' } },
    );
    expect(updated.body.errors).toBeUndefined();
    expect(updated.body.data.updateIntegration.headers).toEqual({ 'X-Key': 'k2' });
    expect(JSON.stringify(await storedHeaders(id))).not.toContain('k2');
    const audits = await app.services.db.prisma.auditEvent.findMany({ where: { targetId: id } });
    expect(JSON.stringify(audits)).not.toMatch(/s3cret|k2"/);
  });

  it('seals rows stored in clear when an instance with the key starts; without a key, refuses new header values', async () => {
    const p = await app.createProject({ scopes: ['admin'] });
    // A row as written before encryption existed.
    const legacy = await app.services.db.prisma.integration.create({
      data: {
        id: 'a'.repeat(24),
        projectId: p.projectID,
        name: 'legacy',
        url: 'https://mcp.example.com/mcp',
        headers: { Authorization: 'Bearer old-plain' },
      },
    });

    // Without a key: the clear row is still read (and used), new header values are refused.
    const keyless = await startTestApp(provider, { database, env: { INTEGRATION_SECRETS_KEY: undefined } });
    try {
      const listed = await keyless.gql(list, { p: p.projectID });
      expect(listed.body.data.integrations).toContainEqual(
        expect.objectContaining({ name: 'legacy', headers: { Authorization: 'Bearer old-plain' } }),
      );
      const refused = await keyless.gql(create, {
        input: { projectID: p.projectID, name: 'new', url: 'https://mcp.example.com/mcp', headers: { A: 'b' } },
      });
      expect(refused.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
      expect(refused.body.errors[0].message).toContain('INTEGRATION_SECRETS_KEY');
      const noHeaders = await keyless.gql(create, {
        input: { projectID: p.projectID, name: 'open', url: 'https://mcp.example.com/mcp' },
      });
      expect(noHeaders.body.errors).toBeUndefined();
      expect(await app.services.db.prisma.integration.count({ where: { projectId: p.projectID, name: 'new' } })).toBe(
        0,
      );
    } finally {
      await keyless.close();
    }
    expect(await storedHeaders(legacy.id)).toEqual({ Authorization: 'Bearer old-plain' });

    // An instance with the key seals it at start.
    const keyed = await startTestApp(provider, { database });
    try {
      const stored = await storedHeaders(legacy.id);
      expect(Object.keys(stored)).toEqual(['sealed:v1']);
      const listed = await keyed.gql(list, { p: p.projectID });
      expect(listed.body.data.integrations).toContainEqual(
        expect.objectContaining({ name: 'legacy', headers: { Authorization: 'Bearer old-plain' } }),
      );
    } finally {
      await keyed.close();
    }

    // Another key cannot read them, and says so.
    const wrong = await startTestApp(provider, { database, env: { INTEGRATION_SECRETS_KEY: '11'.repeat(32) } });
    try {
      const listed = await wrong.gql(list, { p: p.projectID });
      expect(listed.body.errors?.[0]?.extensions?.code).toBe('SERVICE_UNAVAILABLE');
      expect(listed.body.errors?.[0]?.message).toContain('cannot be decrypted');
      expect(JSON.stringify(listed.body)).not.toContain('old-plain');
    } finally {
      await wrong.close();
    }
  });

  it('rotates the key: a previous key still opens, rows are sealed again with the new key at start and by `parley secrets reseal`', async () => {
    const newKey = '22'.repeat(32);
    const oldBox = createSecretBox(parseSecretKey(testIntegrationSecretsKey)!);
    const newBox = createSecretBox(parseSecretKey(newKey)!);
    const p = await app.createProject({ scopes: ['admin'] });
    const made = async (name: string) => {
      const res = await app.gql(create, {
        input: {
          projectID: p.projectID,
          name,
          url: 'https://mcp.example.com/mcp',
          headers: { Authorization: `Bearer ${name}` },
        },
      });
      expect(res.body.errors).toBeUndefined();
      return res.body.data.createIntegration.id as string;
    };
    const sealedWith = async (id: string) => keyIdOf((await storedHeaders(id))['sealed:v1']!);
    const first = await made('rotate-a');
    expect(await sealedWith(first)).toBe(oldBox.keyId);
    const before = await app.services.db.prisma.integration.findUniqueOrThrow({ where: { id: first } });

    // The new key alone cannot open what the old one sealed: the command says so, names the rows
    // and changes nothing.
    const env = { DATABASE_URL: database.url, LOG_LEVEL: 'warn' };
    const refused = await runParley(['secrets', 'reseal'], { ...env, INTEGRATION_SECRETS_KEY: newKey });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('INTEGRATION_SECRETS_PREVIOUS_KEYS');
    const refusal = JSON.parse(refused.stdout);
    expect(refusal).toMatchObject({ keyID: newBox.keyId, previousKeyIDs: [], resealed: 0 });
    expect(refusal.unreadable).toContain(first);
    expect(await sealedWith(first)).toBe(oldBox.keyId);

    // An instance with the new key and the old one as previous reads the rows, and seals them again
    // with the new key at start (the row's updatedAt stays: what it holds did not change).
    const rotated = await startTestApp(provider, {
      database,
      env: { INTEGRATION_SECRETS_KEY: newKey, INTEGRATION_SECRETS_PREVIOUS_KEYS: ` ${testIntegrationSecretsKey} ,` },
    });
    try {
      expect(await sealedWith(first)).toBe(newBox.keyId);
      const after = await rotated.services.db.prisma.integration.findUniqueOrThrow({ where: { id: first } });
      expect(after.updatedAt).toEqual(before.updatedAt);
      const listed = await rotated.gql(list, { p: p.projectID });
      expect(listed.body.errors).toBeUndefined();
      expect(listed.body.data.integrations).toContainEqual(
        expect.objectContaining({ name: 'rotate-a', headers: { Authorization: 'Bearer rotate-a' } }),
      );
    } finally {
      await rotated.close();
    }

    // A row sealed with the old key meanwhile (an instance not yet given the new key) is sealed
    // again by the command; a second run finds nothing left to do.
    const second = await made('rotate-b');
    expect(await sealedWith(second)).toBe(oldBox.keyId);
    const rotateEnv = {
      ...env,
      INTEGRATION_SECRETS_KEY: newKey,
      INTEGRATION_SECRETS_PREVIOUS_KEYS: testIntegrationSecretsKey,
    };
    const resealed = await runParley(['secrets', 'reseal'], rotateEnv);
    expect(resealed.code).toBe(0);
    expect(JSON.parse(resealed.stdout)).toEqual({
      keyID: newBox.keyId,
      previousKeyIDs: [oldBox.keyId],
      sealed: 0,
      resealed: 1,
      unreadable: [],
    });
    expect(await sealedWith(second)).toBe(newBox.keyId);
    expect(JSON.parse((await runParley(['secrets', 'reseal'], rotateEnv)).stdout)).toMatchObject({ resealed: 0 });

    // The old key is no longer needed.
    const newOnly = await startTestApp(provider, { database, env: { INTEGRATION_SECRETS_KEY: newKey } });
    try {
      const listed = await newOnly.gql(list, { p: p.projectID });
      expect(listed.body.errors).toBeUndefined();
      expect(listed.body.data.integrations).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ name: 'rotate-a', headers: { Authorization: 'Bearer rotate-a' } }),
          expect.objectContaining({ name: 'rotate-b', headers: { Authorization: 'Bearer rotate-b' } }),
        ]),
      );
    } finally {
      await newOnly.close();
    }
    // The instance still on the old key alone cannot read them any more, and says which key it lacks.
    const stale = await app.gql(list, { p: p.projectID });
    expect(stale.status).toBe(503);
    expect(stale.body.errors?.[0]?.extensions?.code).toBe('SERVICE_UNAVAILABLE');
    expect(stale.body.errors?.[0]?.message).toContain('INTEGRATION_SECRETS_PREVIOUS_KEYS');
    expect(stale.body.errors?.[0]?.message).toContain(`key id ${newBox.keyId}`);
    const nowStored = (await storedHeaders(first))['sealed:v1']!;
    expect(() => oldBox.open(nowStored, `integration-headers:${first}`)).toThrow(
      `sealed with another key (key id ${newBox.keyId}, configured ${oldBox.keyId})`,
    );
  });

  it('refuses previous keys that are malformed or given without INTEGRATION_SECRETS_KEY, and a reseal without a key', async () => {
    expect(() => loadConfig({ INTEGRATION_SECRETS_PREVIOUS_KEYS: testIntegrationSecretsKey })).toThrow(ConfigError);
    expect(() => loadConfig({ INTEGRATION_SECRETS_PREVIOUS_KEYS: testIntegrationSecretsKey })).toThrow(
      'needs INTEGRATION_SECRETS_KEY',
    );
    expect(() =>
      loadConfig({ INTEGRATION_SECRETS_KEY: testIntegrationSecretsKey, INTEGRATION_SECRETS_PREVIOUS_KEYS: 'abc,def' }),
    ).toThrow('INTEGRATION_SECRETS_PREVIOUS_KEYS');
    const noKey = await runParley(['secrets', 'reseal'], { DATABASE_URL: database.url });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain('needs INTEGRATION_SECRETS_KEY');
    expect(noKey.stdout).toBe('');
    const unknown = await runParley(['secrets', 'rotate'], { DATABASE_URL: database.url });
    expect(unknown.code).toBe(2);
  });
});
