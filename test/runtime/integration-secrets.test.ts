import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createSecretBox, parseSecretKey } from '../../src/lib/secret-box';
import { startTestApp, type TestApp, testIntegrationSecretsKey } from '../helpers/app';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

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
      expect(listed.body.errors).toBeDefined();
    } finally {
      await wrong.close();
    }
  });
});
