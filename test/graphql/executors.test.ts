import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, v2StreamPath } from '../helpers/runtime';

/**
 * GRAPHQL_JIT=true runs queries, mutations and subscription events through graphql-jit,
 * GRAPHQL_JIT=false on Yoga's executor (graphql-js semantics). This file holds the two to the same
 * answers, whole bodies with messages and locations: two instances on one database, one per setting, asked the same
 * operations over HTTP (results, typed errors located through fragments and aliases, non-null
 * bubbling, variable coercion refusals, defaults, nested lists and arguments, a turn streamed by the
 * v2 interact route and one refused by its subscription). The differences left are pinned in
 * test/graphql/compiled-execution.test.ts.
 */
describeEachDatabase('the two executors give the same answers', (provider) => {
  let jit: TestApp;
  let plain: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    jit = await startTestApp(provider, { env: { GRAPHQL_JIT: 'true' } });
    plain = await startTestApp(provider, { env: { GRAPHQL_JIT: 'false' }, database: jit.database });
    expect(jit.config.GRAPHQL_JIT).toBe(true);
    expect(plain.config.GRAPHQL_JIT).toBe(false);
    project = await jit.createProject();
  });
  afterAll(async () => {
    await plain?.close();
    await jit?.close();
  });

  /** Sends the operation to both instances; their statuses and whole bodies must be equal. */
  async function same(query: string, variables?: Record<string, unknown>) {
    const [a, b] = [await jit.gql(query, variables, project.apiKey), await plain.gql(query, variables, project.apiKey)];
    expect({ status: a.status, body: a.body }).toEqual({ status: b.status, body: b.body });
    return b;
  }

  it('answers queries, nested fields with arguments and defaults, and typed errors alike', async () => {
    const created = await jit.gql(
      `mutation ($input: CreateTranscriptInput!) { createTranscript(input: $input) { id } }`,
      {
        input: {
          projectID: project.projectID,
          sessionID: 'executors',
          userID: 'u1',
          logs: [
            { type: 'action', data: { type: 'text', payload: 'hello' }, createdAt: '2026-11-25T10:00:00.000Z' },
            { type: 'trace', data: { type: 'text', payload: { message: 'Hi! Call me at +1 415 555 0100' } } },
          ],
        },
      },
      project.apiKey,
    );
    expect(created.status).toBe(200);
    const id: string = created.body.data.createTranscript.id;

    const viewer = await same('{ viewer { kind projectID } }');
    expect(viewer.body.data.viewer.projectID).toBe(project.projectID);

    const transcript = await same(
      `query ($id: ID!) {
        transcript(id: $id) {
          id sessionID projectID createdAt endedAt
          all: logs { type data createdAt }
          conversation: logs(filterConversation: true) { type }
          history { __typename }
          properties { __typename }
          evaluations { __typename }
        }
      }`,
      { id },
    );
    expect(transcript.body.data.transcript.all).toHaveLength(2);
    // Redaction ran on ingestion; both executors read the stored, redacted text.
    expect(JSON.stringify(transcript.body.data.transcript.all)).not.toContain('555 0100');

    // A typed not-found error, with its extensions.
    const missing = await same('query ($id: ID!) { transcript(id: $id) { id } }', { id: 'no-such-transcript' });
    expect(missing.body.errors[0].extensions.code).toBeTruthy();

    expect(missing.body.errors[0].locations).toEqual([{ line: 1, column: 20 }]);

    // Through aliases and fragments: the first NOT_FOUND (a non-null field) nulls `data`; more
    // errors in one answer are compared in compiled-execution.test.ts.
    const several = await same(
      `query ($id: ID!, $gone: ID!) {
        first: transcript(id: $gone) { id }
        found: transcript(id: $id) { ...T }
        ...Q
      }
      fragment T on Transcript { id sessionID }
      fragment Q on Query { second: transcript(id: $gone) { ...T } viewer { kind } }`,
      { id, gone: 'no-such-transcript' },
    );
    expect(several.body.errors.map((e: { path: string[] }) => e.path)).toEqual([['first']]);
    expect(several.body.errors[0].locations).toEqual([{ line: 2, column: 9 }]);
    expect(several.body.data).toBeNull();
    const found = await same(
      `query ($id: ID!) { found: transcript(id: $id) { ...T } ...Q }
      fragment T on Transcript { id sessionID logs { type } }
      fragment Q on Query { again: transcript(id: $id) { ...T } viewer { kind } }`,
      { id },
    );
    expect(found.body.data.again).toEqual(found.body.data.found);
    // A non-null root field that fails: the null reaches `data`.
    const bubbled = await same('query ($p: ID!) { viewer { kind } project(id: $p) { id name } }', {
      p: 'no-such-project',
    });
    expect(bubbled.body.data).toBeNull();

    // A variable of the wrong type, a missing required variable, null for a non-null one, an unknown field.
    const refused = await same('query ($id: ID!) { transcript(id: $id) { id } }', { id: 12.5 });
    expect(refused.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
    await same('query ($id: ID!) { transcript(id: $id) { id } }', {});
    await same('query ($id: ID!) { transcript(id: $id) { id } }', { id: null });
    expect((await same('{ viewer { nope } }')).body.errors).toHaveLength(1);
  });

  it('answers mutations with input objects and their refusals alike', async () => {
    const make = `mutation ($input: CreateTranscriptPropertyInput!) {
      createTranscriptProperty(input: $input) { name type projectID }
    }`;
    // Two names, one per instance, so each mutation succeeds once; then the same refusals.
    const a = await jit.gql(
      make,
      { input: { projectID: project.projectID, name: 'tier', type: 'string' } },
      project.apiKey,
    );
    const b = await plain.gql(
      make,
      { input: { projectID: project.projectID, name: 'plan', type: 'string' } },
      project.apiKey,
    );
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect({ ...b.body.data.createTranscriptProperty, name: 'tier' }).toEqual(a.body.data.createTranscriptProperty);
    // A duplicate name, an enum value that does not exist, a missing input member.
    await same(make, { input: { projectID: project.projectID, name: 'tier', type: 'string' } });
    await same(make, { input: { projectID: project.projectID, name: 'x', type: 'colour' } });
    await same(make, { input: { projectID: project.projectID, type: 'string' } });
    await same(make, { input: { projectID: project.projectID, name: 'x', type: 'string', extra: 1 } });
    await same(make, { input: 'not an object' });
    await same(make, {});
    const listed = await same('query ($p: ID!) { transcriptProperties(projectID: $p) { name type } }', {
      p: project.projectID,
    });
    expect(listed.body.data.transcriptProperties.map((p: { name: string }) => p.name).sort()).toEqual(['plan', 'tier']);
  });

  it('streams a turn (the interact subscription) and refuses one alike', async () => {
    await publish(jit, project.projectID, {
      name: 'Executors',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          name: 'Main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'Hi!', next: 'bye' },
            { id: 'bye', type: 'message', message: 'Bye.' },
          ],
        },
      ],
    });
    const turn = (app: TestApp, userID: string, body: unknown) =>
      app.http('POST', v2StreamPath(project.projectID, userID), { key: project.apiKey, body });
    for (const body of [{ action: { type: 'launch' } }, { action: { type: 42 } }]) {
      // A user per instance and body: each turn starts from a new user's state.
      const [a, b] = [
        await turn(jit, `jit-${body.action.type}`, body),
        await turn(plain, `plain-${body.action.type}`, body),
      ];
      // The same bytes but the traces' times and generated slate IDs.
      const stable = (text: string) =>
        text.replace(/"time":\d+/g, '"time":0').replace(/"id":"[0-9a-f]{24}"/g, '"id":""');
      expect({ status: a.status, text: stable(a.text) }).toEqual({ status: b.status, text: stable(b.text) });
    }
    // Refused by the subscription's resolver (a project the key cannot reach): an ordinary error.
    const elsewhere = (app: TestApp) =>
      app.http('POST', v2StreamPath('no-such-project', 'u'), {
        key: project.apiKey,
        body: { action: { type: 'launch' } },
      });
    const [a, b] = [await elsewhere(jit), await elsewhere(plain)];
    expect(b.status).toBeGreaterThanOrEqual(400);
    expect({ status: a.status, text: a.text }).toEqual({ status: b.status, text: b.text });
    const streamed = await turn(plain, 'plain-again', { action: { type: 'launch' } });
    expect(streamed.text).toContain('Bye.');
    expect(streamed.text).toContain('event: end');
  });
});
