import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { errorBody, ingestTranscript, requestOperations } from './helpers';

const unknownId = 'ffffffffffffffffffffffff';

describeEachDatabase('transcript properties and values over REST', (provider) => {
  const t = useTestApp(provider);

  it('creates, lists, gets, renames and deletes properties', async () => {
    const p = await t.app.createProject();
    const created = await t.app.http('POST', '/v1/transcript-property', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'Resolved', type: 'boolean' },
    });
    expect(created.status).toBe(201);
    const property = created.body.property;
    expect(property).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{24}$/),
      projectID: p.projectID,
      name: 'Resolved',
      type: 'boolean',
      default: false,
      createdAt: expect.stringMatching(/Z$/),
      updatedAt: expect.stringMatching(/Z$/),
    });
    await t.app.http('POST', '/v1/transcript-property', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'Score', type: 'number' },
    });
    const list = await t.app.http('GET', `/v1/transcript-property/project/${p.projectID}`, { key: p.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.properties.map((x: { name: string }) => x.name)).toEqual(['Resolved', 'Score']);
    const got = await t.app.http('GET', `/v1/transcript-property/${property.id}`, { key: p.apiKey });
    expect(got.body).toEqual({ property });
    const renamed = await t.app.http('PATCH', `/v1/transcript-property/${property.id}`, {
      key: p.apiKey,
      body: { name: 'Solved' },
    });
    expect(renamed.status).toBe(204);
    expect(renamed.text).toBe('');
    const noop = await t.app.http('PATCH', `/v1/transcript-property/${property.id}`, { key: p.apiKey, body: {} });
    expect(noop.status).toBe(204);
    expect(
      (await t.app.http('GET', `/v1/transcript-property/${property.id}`, { key: p.apiKey })).body.property.name,
    ).toBe('Solved');
    const deleted = await t.app.http('DELETE', `/v1/transcript-property/${property.id}`, { key: p.apiKey });
    expect(deleted.status).toBe(204);
    expect((await t.app.http('GET', `/v1/transcript-property/${property.id}`, { key: p.apiKey })).status).toBe(404);
    expect((await t.app.http('DELETE', `/v1/transcript-property/${property.id}`, { key: p.apiKey })).status).toBe(404);
  });

  it('refuses bad property bodies (400), duplicate names (409), unknown and foreign IDs (404)', async () => {
    const p = await t.app.createProject();
    const other = await t.app.createProject();
    const create = (body: unknown, key = p.apiKey) => t.app.http('POST', '/v1/transcript-property', { key, body });
    const bad: [unknown, string][] = [
      [{ projectID: 'x'.repeat(23), name: 'a', type: 'string' }, 'projectID'],
      [{ projectID: `${p.projectID}a`, name: 'a', type: 'string' }, 'projectID'],
      [{ projectID: p.projectID, name: '', type: 'string' }, 'name'],
      [{ projectID: p.projectID, name: 'x'.repeat(101), type: 'string' }, 'name'],
      [{ projectID: p.projectID, name: 'a', type: 'date' }, 'type'],
      [{ projectID: p.projectID, name: 7, type: 'string' }, 'name'],
      [{ projectID: p.projectID, name: 'a' }, 'type'],
      [{ projectID: p.projectID, name: 'a', type: 'string', default: true }, 'default'],
    ];
    for (const [body, path] of bad) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject(errorBody(400, 'VALIDATION_FAILED'));
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect((await create({ projectID: p.projectID, name: 'x'.repeat(100), type: 'string' })).status).toBe(201);
    expect((await create({ projectID: p.projectID, name: 'Topic', type: 'string' })).status).toBe(201);
    const dup = await create({ projectID: p.projectID, name: 'Topic', type: 'number' });
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject(errorBody(409, 'CONFLICT'));
    // Names are unique per project, not across projects.
    expect((await create({ projectID: other.projectID, name: 'Topic', type: 'string' }, other.apiKey)).status).toBe(
      201,
    );
    expect((await create({ projectID: other.projectID, name: 'Mine', type: 'string' })).status).toBe(404);

    const theirs = (
      await t.app.http('GET', `/v1/transcript-property/project/${other.projectID}`, { key: other.apiKey })
    ).body.properties[0].id;
    for (const id of [theirs, unknownId]) {
      expect((await t.app.http('GET', `/v1/transcript-property/${id}`, { key: p.apiKey })).status).toBe(404);
      expect(
        (await t.app.http('PATCH', `/v1/transcript-property/${id}`, { key: p.apiKey, body: { name: 'n' } })).status,
      ).toBe(404);
      expect((await t.app.http('DELETE', `/v1/transcript-property/${id}`, { key: p.apiKey })).status).toBe(404);
    }
    expect(
      (await t.app.http('GET', `/v1/transcript-property/project/${other.projectID}`, { key: p.apiKey })).status,
    ).toBe(404);
    expect((await t.app.http('GET', '/v1/transcript-property/short', { key: p.apiKey })).status).toBe(400);

    const mine = (await t.app.http('GET', `/v1/transcript-property/project/${p.projectID}`, { key: p.apiKey })).body
      .properties;
    const topic = mine.find((x: { name: string }) => x.name === 'Topic').id;
    const patches: [unknown, number][] = [
      [{ name: '' }, 400],
      [{ name: 'y'.repeat(101) }, 400],
      [{ type: 'list' }, 400],
      [{ projectID: p.projectID }, 400],
      [{ name: 'x'.repeat(100) }, 409],
    ];
    for (const [body, status] of patches) {
      const res = await t.app.http('PATCH', `/v1/transcript-property/${topic}`, { key: p.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(status);
    }
    const noBody = await t.app.http('PATCH', `/v1/transcript-property/${topic}`, { key: p.apiKey });
    expect(noBody.status).toBe(400);
  });

  it('sets, replaces, lists and deletes values; a value must parse as the property type', async () => {
    const p = await t.app.createProject();
    const prop = async (name: string, type: string) =>
      (
        await t.app.http('POST', '/v1/transcript-property', {
          key: p.apiKey,
          body: { projectID: p.projectID, name, type },
        })
      ).body.property.id as string;
    const score = await prop('score', 'number');
    const solved = await prop('solved', 'boolean');
    const topic = await prop('topic', 'string');
    const transcript = await ingestTranscript(t.app, p);
    const set = (body: Record<string, unknown>) =>
      t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { transcriptID: transcript, ...body },
      });

    const first = await set({ propertyID: score, value: '4.50', metadata: { by: 'agent' } });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      propertyValue: {
        propertyID: score,
        transcriptID: transcript,
        value: '4.5',
        metadata: { by: 'agent' },
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    });
    const replaced = await set({ propertyID: score, value: '3', metadata: null });
    expect(replaced.body.propertyValue).toMatchObject({ value: '3', metadata: null });
    expect((await set({ propertyID: solved, value: 'TRUE' })).body.propertyValue.value).toBe('true');
    expect((await set({ propertyID: topic, value: 'refund <now>' })).status).toBe(201);

    for (const [propertyID, value] of [
      [score, 'four'],
      [score, '1e999'],
      [score, ''],
      [solved, 'yes'],
      [solved, '1'],
    ]) {
      const res = await set({ propertyID, value });
      expect(res.status, `${value}`).toBe(400);
      expect(res.body.details[0].path).toBe('value');
    }
    for (const body of [
      { propertyID: score, value: 3 },
      { propertyID: score },
      { propertyID: score, value: '1', metadata: 'x' },
      { propertyID: score, value: '1', extra: 1 },
      { propertyID: 'abc', value: '1' },
    ]) {
      expect((await set(body)).status, JSON.stringify(body)).toBe(400);
    }
    expect((await set({ propertyID: unknownId, value: '1' })).status).toBe(404);

    const list = await t.app.http('GET', `/v1/transcript-property-value/transcript/${transcript}`, { key: p.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.propertyValues.map((v: { propertyID: string; value: string }) => [v.propertyID, v.value])).toEqual(
      [
        [score, '3'],
        [solved, 'true'],
        [topic, 'refund <now>'],
      ],
    );
    // The transcript shows them as its properties, with name and type.
    const got = await t.app.http('GET', `/v1/transcript/${transcript}`, { key: p.apiKey });
    expect(got.body.transcript.properties[0]).toEqual({
      id: score,
      name: 'score',
      type: 'number',
      default: false,
      value: '3',
      metadata: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });

    const del = await t.app.http('DELETE', `/v1/transcript-property-value/transcript/${transcript}/property/${topic}`, {
      key: p.apiKey,
    });
    expect(del.status).toBe(204);
    expect(
      (
        await t.app.http('DELETE', `/v1/transcript-property-value/transcript/${transcript}/property/${topic}`, {
          key: p.apiKey,
        })
      ).status,
    ).toBe(404);

    // Another project sees none of it.
    const other = await t.app.createProject();
    expect(
      (await t.app.http('GET', `/v1/transcript-property-value/transcript/${transcript}`, { key: other.apiKey })).status,
    ).toBe(404);
    const theirTranscript = await ingestTranscript(t.app, other);
    expect((await set({ propertyID: score, value: '1', transcriptID: theirTranscript })).status).toBe(404);
    expect(
      (
        await t.app.http('DELETE', `/v1/transcript-property-value/transcript/${transcript}/property/${score}`, {
          key: other.apiKey,
        })
      ).status,
    ).toBe(404);
    expect(
      (await t.app.http('GET', `/v1/transcript-property-value/transcript/${unknownId}`, { key: p.apiKey })).status,
    ).toBe(404);
  });

  it('refuses a new type while values would not parse (409 with the count), and rewrites them when they do', async () => {
    const p = await t.app.createProject();
    const prop = (
      await t.app.http('POST', '/v1/transcript-property', {
        key: p.apiKey,
        body: { projectID: p.projectID, name: 'level', type: 'string' },
      })
    ).body.property.id;
    const transcripts = [
      await ingestTranscript(t.app, p),
      await ingestTranscript(t.app, p),
      await ingestTranscript(t.app, p),
    ];
    const values = ['10', '2.50', 'high'];
    for (const [i, transcriptID] of transcripts.entries()) {
      await t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { propertyID: prop, transcriptID, value: values[i] },
      });
    }
    const refused = await t.app.http('PATCH', `/v1/transcript-property/${prop}`, {
      key: p.apiKey,
      body: { type: 'number' },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/1 stored value would not parse as number/);
    expect((await t.app.http('GET', `/v1/transcript-property/${prop}`, { key: p.apiKey })).body.property.type).toBe(
      'string',
    );

    await t.app.http('DELETE', `/v1/transcript-property-value/transcript/${transcripts[2]}/property/${prop}`, {
      key: p.apiKey,
    });
    const ok = await t.app.http('PATCH', `/v1/transcript-property/${prop}`, {
      key: p.apiKey,
      body: { type: 'number' },
    });
    expect(ok.status).toBe(204);
    const stored = await t.app.services.db.prisma.transcriptPropertyValue.findMany({
      where: { propertyId: prop },
      orderBy: { numberValue: 'asc' },
    });
    expect(stored.map((v) => [v.value, v.numberValue])).toEqual([
      ['2.5', 2.5],
      ['10', 10],
    ]);
    // A number filter now sees them as numbers (10 > 9, which as text it would not be).
    const search = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      body: { filters: [{ id: prop, op: 'gt', value: 9 }] },
    });
    expect(search.body.transcripts.map((x: { id: string }) => x.id)).toEqual([transcripts[0]]);
  });

  it('retypes a property with many values a page at a time, with the same parsing rules as a set value', async () => {
    const p = await t.app.createProject();
    const db = t.app.services.db.prisma;
    const create = async (name: string, type: string) =>
      (
        await t.app.http('POST', '/v1/transcript-property', {
          key: p.apiKey,
          body: { projectID: p.projectID, name, type },
        })
      ).body.property.id as string;
    const patch = (id: string, type: string) =>
      t.app.http('PATCH', `/v1/transcript-property/${id}`, { key: p.apiKey, body: { type } });
    const measure = await create('measure', 'string');
    const flag = await create('flag', 'string');
    // More distinct values than one page of the check (1000) and of the rewrite (500).
    const special = [' +7 ', '.25', '1E3', '-2.50e-1', '1e21', '0010', '\t42\n', '3.'];
    const texts = [...special, ...Array.from({ length: 1200 }, (_, i) => `${i}.50`)];
    const bad = ['n/a', 'n/a', 'zz'];
    const all = [...texts, ...bad];
    const environmentId = p.environments[0]!.id;
    const stamp = Date.now().toString(16).padStart(12, '0');
    const transcriptIds = all.map((_, i) => `${stamp}${i.toString(16).padStart(12, '0')}`);
    await db.transcript.createMany({
      data: transcriptIds.map((id) => ({ id, projectId: p.projectID, environmentId, sessionId: `s-${id}` })),
    });
    await db.transcriptPropertyValue.createMany({
      data: all.map((value, i) => ({ transcriptId: transcriptIds[i]!, propertyId: measure, value })),
    });

    const operations: string[] = [];
    const listener = (e: { model: string | undefined; operation: string }) => {
      if (e.model === 'TranscriptPropertyValue' || e.operation === '$executeRaw') operations.push(e.operation);
    };
    const listeners = t.app.services.db.queryListeners;
    listeners.add(listener);
    try {
      const refused = await patch(measure, 'number');
      expect(refused.status).toBe(409);
      expect(refused.body.message).toMatch(/: 3 stored values would not parse as number/);
      expect((await db.transcriptProperty.findUniqueOrThrow({ where: { id: measure } })).type).toBe('string');
      expect(
        await db.transcriptPropertyValue.count({ where: { propertyId: measure, numberValue: { not: null } } }),
      ).toBe(0);

      await db.transcriptPropertyValue.deleteMany({ where: { propertyId: measure, value: { in: bad } } });
      operations.length = 0;
      expect((await patch(measure, 'number')).status).toBe(204);
      // A statement per page, not one per distinct value (1208 of them).
      expect(operations.length).toBeLessThanOrEqual(10);
    } finally {
      listeners.delete(listener);
    }
    const stored = await db.transcriptPropertyValue.findMany({
      where: { propertyId: measure },
      orderBy: { transcriptId: 'asc' },
      select: { value: true, numberValue: true },
    });
    // Exactly what setting each value on a number property stores.
    expect(stored).toEqual(
      texts.map((text) => ({ value: String(Number(text.trim())), numberValue: Number(text.trim()) })),
    );
    expect(stored.slice(0, special.length).map((v) => v.value)).toEqual([
      '7',
      '0.25',
      '1000',
      '-0.25',
      '1e+21',
      '10',
      '42',
      '3',
    ]);

    // Back to string: the canonical text stays, the number goes.
    expect((await patch(measure, 'string')).status).toBe(204);
    expect(await db.transcriptPropertyValue.count({ where: { propertyId: measure, numberValue: { not: null } } })).toBe(
      0,
    );
    expect(await db.transcriptPropertyValue.count({ where: { propertyId: measure, value: '1e+21' } })).toBe(1);

    await db.transcriptPropertyValue.createMany({
      data: [' TRUE ', 'false', 'False\n'].map((value, i) => ({
        transcriptId: transcriptIds[i]!,
        propertyId: flag,
        value,
      })),
    });
    expect((await patch(flag, 'number')).body.message).toMatch(/: 3 stored values would not parse as number/);
    expect((await patch(flag, 'boolean')).status).toBe(204);
    const flags = await db.transcriptPropertyValue.findMany({
      where: { propertyId: flag },
      orderBy: { transcriptId: 'asc' },
      select: { value: true, numberValue: true },
    });
    expect(flags).toEqual([
      { value: 'true', numberValue: null },
      { value: 'false', numberValue: null },
      { value: 'false', numberValue: null },
    ]);
  });

  it('deleting a property removes its values from every transcript', async () => {
    const p = await t.app.createProject();
    const prop = (
      await t.app.http('POST', '/v1/transcript-property', {
        key: p.apiKey,
        body: { projectID: p.projectID, name: 'tag', type: 'string' },
      })
    ).body.property.id;
    for (let i = 0; i < 3; i++) {
      const transcriptID = await ingestTranscript(t.app, p);
      await t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { propertyID: prop, transcriptID, value: `v${i}` },
      });
    }
    const db = t.app.services.db.prisma;
    expect(await db.transcriptPropertyValue.count({ where: { propertyId: prop } })).toBe(3);
    expect((await t.app.http('DELETE', `/v1/transcript-property/${prop}`, { key: p.apiKey })).status).toBe(204);
    expect(await db.transcriptPropertyValue.count({ where: { propertyId: prop } })).toBe(0);
  });

  it('filters a search by property values with every op', async () => {
    const p = await t.app.createProject();
    const prop = async (name: string, type: string) =>
      (
        await t.app.http('POST', '/v1/transcript-property', {
          key: p.apiKey,
          body: { projectID: p.projectID, name, type },
        })
      ).body.property.id as string;
    const score = await prop('score', 'number');
    const topic = await prop('topic', 'string');
    const solved = await prop('solved', 'boolean');
    const rows: [number | null, string | null, boolean | null][] = [
      [1, 'Billing question', true],
      [5, 'refund', false],
      [10, 'other', null],
      [null, null, null],
    ];
    const ids: string[] = [];
    for (const [s, tp, sv] of rows) {
      const id = await ingestTranscript(t.app, p);
      ids.push(id);
      const set = (propertyID: string, value: string) =>
        t.app.http('POST', '/v1/transcript-property-value', {
          key: p.apiKey,
          body: { propertyID, transcriptID: id, value },
        });
      if (s !== null) await set(score, String(s));
      if (tp !== null) await set(topic, tp);
      if (sv !== null) await set(solved, String(sv));
    }
    const [a, b, c, d] = ids as [string, string, string, string];
    const search = async (...filters: unknown[]) => {
      const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
        key: p.apiKey,
        body: { filters },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.transcripts.map((x: { id: string }) => x.id).sort();
    };
    const sorted = (...x: string[]) => [...x].sort();
    expect(await search({ id: score, op: 'eq', value: 5 })).toEqual([b]);
    expect(await search({ id: score, op: 'eq', value: '5' })).toEqual([b]);
    expect(await search({ id: score, op: 'neq', value: 5 })).toEqual(sorted(a, c, d));
    expect(await search({ id: score, op: 'gt', value: 5 })).toEqual([c]);
    expect(await search({ id: score, op: 'gte', value: 5 })).toEqual(sorted(b, c));
    expect(await search({ id: score, op: 'lt', value: 5 })).toEqual([a]);
    expect(await search({ id: score, op: 'lte', value: 5 })).toEqual(sorted(a, b));
    expect(await search({ id: score, op: 'between', value: [2, 10] })).toEqual(sorted(b, c));
    expect(await search({ id: score, op: 'in', value: [1, 10] })).toEqual(sorted(a, c));
    expect(await search({ id: score, op: 'nin', value: [1, 10] })).toEqual(sorted(b, d));
    expect(await search({ id: score, op: 'exists' })).toEqual(sorted(a, b, c));
    expect(await search({ id: score, op: 'not_exists' })).toEqual([d]);
    expect(await search({ id: topic, op: 'contains', value: 'BILLING' })).toEqual([a]);
    expect(await search({ id: topic, op: 'eq', value: 'refund' })).toEqual([b]);
    expect(await search({ id: topic, op: 'gt', value: 'p' })).toEqual([b]);
    expect(await search({ id: solved, op: 'eq', value: true })).toEqual([a]);
    expect(await search({ id: solved, op: 'eq', value: 'false' })).toEqual([b]);
    expect(await search({ id: solved, op: 'neq', value: true })).toEqual(sorted(b, c, d));
    // Filters combine with AND.
    expect(await search({ id: score, op: 'lte', value: 5 }, { id: solved, op: 'eq', value: false })).toEqual([b]);

    for (const filter of [
      { id: solved, op: 'gt', value: true },
      { id: score, op: 'contains', value: '1' },
      { id: score, op: 'eq', value: 'five' },
      { id: solved, op: 'eq', value: 'maybe' },
    ]) {
      const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
        key: p.apiKey,
        body: { filters: [filter] },
      });
      expect(res.status, JSON.stringify(filter)).toBe(400);
      expect(res.body.details[0].path).toMatch(/^filters\.0\./);
    }
    // A property of another project is not one of this project's.
    const other = await t.app.createProject();
    const theirs = (
      await t.app.http('POST', '/v1/transcript-property', {
        key: other.apiKey,
        body: { projectID: other.projectID, name: 'score', type: 'number' },
      })
    ).body.property.id;
    const foreign = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      body: { filters: [{ id: theirs, op: 'exists' }] },
    });
    expect(foreign.status).toBe(400);
  });
});

describeEachDatabase('list endpoints of properties, values and evaluations', (provider) => {
  const t = useTestApp(provider);

  it('answer with one query whatever the number of items (no N+1)', async () => {
    const p = await t.app.createProject({ scopes: ['admin', 'transcripts:read', 'transcripts:write'] });
    const transcript = await ingestTranscript(t.app, p);
    for (let i = 0; i < 4; i++) {
      const prop = await t.app.http('POST', '/v1/transcript-property', {
        key: p.apiKey,
        body: { projectID: p.projectID, name: `p${i}`, type: 'string' },
      });
      await t.app.http('POST', '/v1/transcript-property-value', {
        key: p.apiKey,
        body: { propertyID: prop.body.property.id, transcriptID: transcript, value: `v${i}` },
      });
      await t.app.http('POST', '/v1/transcript-evaluation', {
        key: p.apiKey,
        body: { projectID: p.projectID, name: `e${i}`, type: 'string', prompt: 'p' },
      });
    }
    const measure = async (path: string) => {
      const operations: string[] = [];
      // The job runner's polls are the instance's own work, not this request's.
      const listener = (e: { model: string | undefined; operation: string; background: boolean }) => {
        if (!e.background) operations.push(`${e.model}.${e.operation}`);
      };
      t.app.services.db.queryListeners.add(listener);
      try {
        const res = await t.app.http('GET', path, { key: p.apiKey });
        expect(res.status).toBe(200);
        expect(Object.values(res.body as Record<string, unknown[]>)[0]).toHaveLength(4);
      } finally {
        t.app.services.db.queryListeners.delete(listener);
      }
      return requestOperations(operations);
    };
    // The key's project is cached with the key (src/auth/keys.ts): access control reads nothing.
    expect(await measure(`/v1/transcript-property/project/${p.projectID}`)).toEqual(['TranscriptProperty.findMany']);
    expect(await measure(`/v1/transcript-property-value/transcript/${transcript}`)).toEqual([
      'Transcript.findUnique',
      'TranscriptPropertyValue.findMany',
    ]);
    expect(await measure(`/v1/transcript-evaluation/project/${p.projectID}`)).toEqual(['Evaluation.findMany']);
  });
});
