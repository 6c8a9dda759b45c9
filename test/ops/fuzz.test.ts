import { createHash, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, expect, it } from 'vitest';
import { scopes } from '../../src/auth/keys';
import type { PrismaDb } from '../../src/db/client';
import { routes } from '../../src/rest/routes';
import { type TestApp, type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish } from '../helpers/runtime';
import { conversation, ingestTranscript } from '../transcripts/helpers';

/**
 * Property-based fuzzing of every REST route and every GraphQL operation of the route table
 * (so routes added later are fuzzed too): random and malformed path parameters, query strings,
 * bodies, content types and Authorization headers, and random variables and broken documents
 * for GraphQL. Whatever comes in: no 5xx, every REST error has exactly the body of DECISIONS.md
 * §3, every GraphQL error has extensions.code, and a second project that no request is allowed
 * to touch is unchanged, row for row.
 *
 * Deterministic per seed: PARLEY_FUZZ_SEED=<n> replays a run (the seed is printed);
 * PARLEY_FUZZ_RUNS scales the number of requests.
 */

const seed = Number(process.env.PARLEY_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const runs = Number(process.env.PARLEY_FUZZ_RUNS ?? 1);
console.log(`fuzz seed: ${seed} (replay with PARLEY_FUZZ_SEED=${seed})`);

interface Seeded {
  project: TestProject;
  transcriptID: string;
  propertyID: string;
  evaluationID: string;
  documentID: string;
}

/** Rows of one project in every table that holds project data, with their full contents. */
async function snapshot(
  prisma: PrismaDb,
  projectId: string,
): Promise<{ counts: Record<string, number>; hash: string }> {
  const byProject = { where: { projectId }, orderBy: { id: 'asc' as const } };
  const transcripts = await prisma.transcript.findMany(byProject);
  const transcriptIds = transcripts.map((t) => t.id);
  const byTranscript = { where: { transcriptId: { in: transcriptIds } } };
  const environments = await prisma.environment.findMany(byProject);
  const tables: Record<string, unknown[]> = {
    project: await prisma.project.findMany({ where: { id: projectId } }),
    environment: environments,
    apiKey: (await prisma.apiKey.findMany(byProject)).map(({ lastUsedAt: _used, ...key }) => key),
    agent: await prisma.agent.findMany(byProject),
    agentVersion: await prisma.agentVersion.findMany(byProject),
    agentDeployment: await prisma.agentDeployment.findMany({
      where: { environmentId: { in: environments.map((e) => e.id) } },
      orderBy: { environmentId: 'asc' },
    }),
    runtimeState: await prisma.runtimeState.findMany({ where: { projectId }, orderBy: { userId: 'asc' } }),
    transcript: transcripts,
    transcriptLog: await prisma.transcriptLog.findMany({ ...byTranscript, orderBy: { id: 'asc' } }),
    transcriptProperty: await prisma.transcriptProperty.findMany(byProject),
    transcriptPropertyValue: await prisma.transcriptPropertyValue.findMany({
      ...byTranscript,
      orderBy: [{ transcriptId: 'asc' }, { propertyId: 'asc' }],
    }),
    transcriptRedactionPattern: await prisma.transcriptRedactionPattern.findMany(byProject),
    evaluation: await prisma.evaluation.findMany(byProject),
    evaluationResult: await prisma.evaluationResult.findMany({
      ...byTranscript,
      orderBy: [{ transcriptId: 'asc' }, { evaluationId: 'asc' }],
    }),
    usageEvent: await prisma.usageEvent.findMany(byProject),
    kbDocument: await prisma.kbDocument.findMany(byProject),
    kbChunk: await prisma.kbChunk.findMany({ where: { projectId }, orderBy: { seq: 'asc' } }),
  };
  const counts = Object.fromEntries(Object.entries(tables).map(([name, rows]) => [name, rows.length]));
  const json = JSON.stringify(tables, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  return { counts, hash: createHash('sha256').update(json).digest('hex') };
}

async function seedProject(app: TestApp, name: string): Promise<Seeded> {
  const project = await app.createProject({
    name,
    scopes: [...scopes],
  });
  const transcriptID = await ingestTranscript(app, project, { logs: conversation('hello') });
  const property = await app.http('POST', '/v1/transcript-property', {
    key: project.apiKey,
    body: { projectID: project.projectID, name: 'score', type: 'number' },
  });
  await app.http('POST', '/v1/transcript-property-value', {
    key: project.apiKey,
    body: { propertyID: property.body.property.id, transcriptID, value: '7' },
  });
  const evaluation = await app.http('POST', '/v1/transcript-evaluation', {
    key: project.apiKey,
    body: { projectID: project.projectID, name: 'helped', enabled: false, type: 'string', prompt: 'Was it good?' },
  });
  await publish(app, project.projectID, {
    name: 'Fuzz',
    startFlow: 'main',
    flows: [
      { id: 'main', name: 'Main', start: 'a', steps: [{ id: 'a', type: 'message', message: 'hi {last_utterance}' }] },
    ],
  });
  const document = await app.http('POST', '/v1/knowledge-base/docs/upload/table', {
    key: project.apiKey,
    query: { wait: 'true' },
    body: {
      data: {
        name: 'faq',
        schema: { searchableFields: ['q'], metadataFields: ['topic'] },
        items: [{ q: 'How do refunds work?', topic: 'billing' }],
      },
    },
  });
  return {
    project,
    transcriptID,
    propertyID: property.body.property.id,
    evaluationID: evaluation.body.evaluation.id,
    documentID: document.body.data.documentID,
  };
}

const errorKeys = ['errorCode', 'message', 'statusCode', 'statusText'];

function checkRestError(status: number, contentType: string | null, text: string, what: string): void {
  expect(status, what).toBeLessThan(500);
  if (status < 400) return;
  expect(contentType, what).toMatch(/^application\/json/);
  const body = JSON.parse(text) as Record<string, unknown>;
  const keys = Object.keys(body).sort();
  expect(
    keys.filter((k) => k !== 'details'),
    `${what}: ${text}`,
  ).toEqual(errorKeys);
  expect(body.statusCode, what).toBe(status);
  expect(typeof body.statusText, what).toBe('string');
  expect(typeof body.errorCode, what).toBe('string');
  expect(typeof body.message, what).toBe('string');
  if ('details' in body) expect(Array.isArray(body.details), what).toBe(true);
}

describeEachDatabase('fuzzing the REST and GraphQL surface', (provider) => {
  const t = useTestApp(provider, {
    env: { RATE_LIMIT_ENABLED: 'false', RUNTIME_TURN_TIMEOUT_MS: '3000', KB_WAIT_TIMEOUT_MS: '2000' },
  });
  let target: Seeded;
  let bystander: Seeded;
  /** A third project whose full key is fuzzed (the bystander's own key would rightly change it). */
  let outsider: TestProject;
  let before: Awaited<ReturnType<typeof snapshot>>;

  beforeAll(async () => {
    target = await seedProject(t.app, 'target');
    bystander = await seedProject(t.app, 'bystander');
    outsider = await t.app.createProject({ name: 'outsider', scopes: [...scopes] });
    before = await snapshot(t.app.services.db.prisma, bystander.project.projectID);
  });

  /**
   * Authorization headers. No request carries the bystander's key: routes that take the project
   * from the key (the Dialog Manager API, the knowledge base) would rightly change it. A third
   * project's full key tries every route against the target's and the bystander's IDs instead.
   */
  const auth = fc.constantFrom('target', 'outsider', 'none', 'garbage', 'made-up');
  const headerFor = (who: string): Record<string, string> => {
    switch (who) {
      case 'target':
        return { authorization: target.project.apiKey };
      case 'outsider':
        return { authorization: `Bearer ${outsider.apiKey}` };
      case 'garbage':
        return { authorization: 'Basic \u00ff\u00fe==' };
      case 'made-up':
        return { authorization: `ak.${'ab'.repeat(12)}.${'x'.repeat(43)}` };
      default:
        return {};
    }
  };
  const idsOf = (s: Seeded) => [
    s.project.projectID,
    s.transcriptID,
    s.propertyID,
    s.evaluationID,
    s.documentID,
    ...s.project.environments.map((e) => e.id),
  ];
  const junk = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.stringMatching(/^[0-9a-f]{24}$/),
    fc.constantFrom('..', '%2e%2e', 'null', '-1', '1e999', 'development', 'production', '%00', ' ', 'x'.repeat(300)),
  );
  const idFor = () =>
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...idsOf(target)) },
      { weight: 2, arbitrary: fc.constantFrom(...idsOf(bystander)) },
      { weight: 2, arbitrary: junk },
    );
  const scalar = () =>
    fc.oneof(idFor(), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.constant(1e308));
  /** Objects shaped like the API's bodies (known member names with wrong or right values), and pure noise. */
  const memberNames = [
    'projectID',
    'name',
    'type',
    'value',
    'metadata',
    'transcriptID',
    'propertyID',
    'evaluationIDs',
    'transcriptIDs',
    'action',
    'data',
    'filter',
    'events',
    'logs',
    'sessionID',
    'alias',
    'enabled',
    'prompt',
    'patterns',
    'variables',
    'state',
    'question',
    'filters',
    'chunkLimit',
    'synthesis',
    'url',
    'schema',
    'items',
  ];
  const jsonBody = () =>
    fc.oneof(
      fc.dictionary(fc.constantFrom(...memberNames), fc.oneof(scalar(), fc.jsonValue({ maxDepth: 3 })), {
        maxKeys: 6,
      }),
      fc.jsonValue({ maxDepth: 4 }),
      fc.constant({ action: { type: 'launch' } }),
      fc.constant({ data: { name: 'interactions', filter: { projectID: target.project.projectID } } }),
    );
  /** A body as sent: JSON, broken JSON, deep nesting, or not JSON at all. */
  const rawBody = () =>
    fc.oneof(
      { weight: 5, arbitrary: jsonBody().map((b) => ({ text: JSON.stringify(b), type: 'application/json' })) },
      {
        weight: 1,
        arbitrary: jsonBody().map((b) => ({ text: JSON.stringify(b).slice(0, -1), type: 'application/json' })),
      },
      {
        weight: 1,
        arbitrary: fc.integer({ min: 50, max: 5000 }).map((n) => ({
          text: `${'['.repeat(n)}${']'.repeat(n)}`,
          type: 'application/json',
        })),
      },
      { weight: 1, arbitrary: fc.string().map((s) => ({ text: s, type: 'text/plain' })) },
      {
        // Multipart forms, well made or not: a file part with a random name, random metadata, a
        // boundary that does not match, or no closing boundary.
        weight: 1,
        arbitrary: fc
          .record({
            filename: fc.oneof(fc.constantFrom('a.txt', 'b.pdf', 'c.exe', '', 'd.md'), fc.string({ maxLength: 20 })),
            metadata: fc.oneof(
              fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
              fc.string({ maxLength: 30 }),
            ),
            content: fc.string({ maxLength: 200 }),
            close: fc.boolean(),
            boundary: fc.constantFrom('fuzzboundary', 'other'),
          })
          .map((f) => ({
            text: `--fuzzboundary\r\nContent-Disposition: form-data; name="file"; filename="${f.filename.replace(/["\r\n]/g, '')}"\r\n\r\n${f.content}\r\n--fuzzboundary\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n${f.metadata}\r\n${f.close ? '--fuzzboundary--\r\n' : ''}`,
            type: `multipart/form-data; boundary=${f.boundary}`,
          })),
      },
      { weight: 1, arbitrary: fc.constant({ text: '{"projectID": 1e400}', type: 'application/json; charset=utf-16' }) },
      { weight: 1, arbitrary: fc.constant(null) },
    );
  const queryKeys = [
    'take',
    'skip',
    'order',
    'encode',
    'environment',
    'unredacted',
    'filterConversation',
    'wait',
    'overwrite',
    'maxChunkSize',
    'page',
    'limit',
    'projectID',
  ];
  const queryString = fc.dictionary(
    fc.oneof(fc.constantFrom(...queryKeys), fc.string({ maxLength: 10 })),
    fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('-1', '0', '101', 'true', 'ASC', '1e9', '')),
    { maxKeys: 4 },
  );

  const restRequest = fc
    .record({ route: fc.integer({ min: 0, max: routes.length - 1 }), who: auth })
    .chain(({ route, who }) =>
      fc.record({
        route: fc.constant(routes[route]!),
        who: fc.constant(who),
        params: fc.array(idFor(), { minLength: 3, maxLength: 3 }),
        query: queryString,
        body: rawBody(),
      }),
    );

  it('answers every malformed REST request with a documented error, never a 5xx, and touches no other project', async () => {
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(restRequest, async ({ route, who, params, query, body }) => {
        let i = 0;
        const path = route.path.replace(/:[A-Za-z]+/g, () => encodeURIComponent(String(params[i++ % params.length])));
        const url = new URL(path, t.app.url);
        for (const [k, v] of Object.entries(query)) url.searchParams.append(k, v);
        const headers: Record<string, string> = { ...headerFor(who) };
        if (body) headers['content-type'] = body.type;
        const what = `${route.method} ${url.pathname}${url.search} as ${who} with ${body?.text.slice(0, 200)}`;
        const res = await fetch(url, {
          method: route.method,
          headers,
          body: body && route.method !== 'GET' ? body.text : undefined,
          signal: AbortSignal.timeout(20_000),
        });
        // Streams are read to their end, so their turn is over before the next request.
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200 && route.kind === 'stream') {
          expect(res.headers.get('content-type'), what).toBe('text/event-stream');
          expect(text, what).toMatch(/event: end\n/);
          return;
        }
        checkRestError(res.status, res.headers.get('content-type'), text, what);
      }),
      { seed, numRuns: 300 * runs, endOnFailure: true },
    );
    console.log(`REST statuses [${provider}]: ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
    // The fuzzing reached past authentication and validation, into the operations.
    expect([...statuses.keys()].some((s) => s < 300)).toBe(true);
    expect(statuses.get(404)).toBeGreaterThan(0);
    const after = await snapshot(t.app.services.db.prisma, bystander.project.projectID);
    expect(after.counts).toEqual(before.counts);
    expect(after.hash).toBe(before.hash);
  }, 120_000);

  const variables = () =>
    fc.dictionary(
      fc.constantFrom(
        'projectID',
        'transcriptID',
        'propertyID',
        'evaluationID',
        'id',
        'userID',
        'environment',
        'input',
        'filter',
        'name',
        'request',
        'events',
        'criteria',
        'first',
        'take',
        'skip',
        'value',
      ),
      fc.oneof(scalar(), jsonBody()),
      { maxKeys: 6 },
    );
  const graphqlRequest = fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .record({ route: fc.integer({ min: 0, max: routes.length - 1 }), who: auth })
        .chain(({ route, who }) =>
          fc.record({
            query: fc.constant(routes[route]!.operation),
            who: fc.constant(who),
            variables: variables(),
          }),
        ),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        query: fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.constantFrom('{', '{ viewer { kind ', 'query { __typename @skip }', 'mutation { deleteTranscript }'),
          fc.integer({ min: 1, max: 400 }).map((n) => `{ ${'viewer { '.repeat(n)}kind${' }'.repeat(n)} }`),
        ),
        who: auth,
        variables: fc.constant({}),
      }),
    },
  );

  it('answers random variables and broken documents over GraphQL with coded errors, never a 5xx, touching no other project', async () => {
    await fc.assert(
      fc.asyncProperty(graphqlRequest, async ({ query, who, variables: vars }) => {
        const what = `${query.slice(0, 80)} as ${who} with ${JSON.stringify(vars).slice(0, 200)}`;
        const isSubscription = /^\s*subscription/.test(query);
        const res = await fetch(new URL('/graphql', t.app.url), {
          method: 'POST',
          headers: {
            ...headerFor(who),
            'content-type': 'application/json',
            accept: isSubscription ? 'text/event-stream' : 'application/json',
          },
          body: JSON.stringify({ query, variables: vars }),
          signal: AbortSignal.timeout(20_000),
        });
        const text = await res.text();
        expect(res.status, `${what}: ${text.slice(0, 300)}`).toBeLessThan(500);
        if (isSubscription) {
          // Each event's errors carry codes too.
          for (const line of text.split('\n').filter((l) => l.startsWith('data: {'))) {
            const data = JSON.parse(line.slice(6)) as { errors?: { extensions?: { code?: string } }[] };
            for (const e of data.errors ?? []) expect(e.extensions?.code, what).toBeTruthy();
          }
          return;
        }
        const body = JSON.parse(text) as { errors?: { extensions?: { code?: string } }[] };
        for (const e of body.errors ?? []) expect(e.extensions?.code, `${what}: ${text.slice(0, 300)}`).toBeTruthy();
      }),
      { seed: seed + 1, numRuns: 200 * runs, endOnFailure: true },
    );
    const after = await snapshot(t.app.services.db.prisma, bystander.project.projectID);
    expect(after.counts).toEqual(before.counts);
    expect(after.hash).toBe(before.hash);
  }, 120_000);

  it('keeps the bystander project readable afterwards', async () => {
    const res = await t.app.http('GET', `/v1/transcript/${bystander.transcriptID}`, { key: bystander.project.apiKey });
    expect(res.status).toBe(200);
    expect(randomBytes(1)).toHaveLength(1);
  });
});
