import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

/**
 * GRAPHQL_JIT=true runs queries and mutations through graphql-jit; the default (false) runs them on
 * graphql-js. The whole suite passed on each (docs/performance.md, third 25 November session). This
 * file holds the two to the same answers in every run: two instances on one database, one per
 * setting, asked the same operations over HTTP (results, typed errors, coercion and validation
 * errors, defaults, nested lists and arguments).
 *
 * Known differences, left out of the comparison and the reason GRAPHQL_JIT stays off by default:
 * graphql-jit's errors carry no `locations` (graphql-js gives the line and column), and its message
 * for a variable of the wrong type is worded differently. For those refusals the status and the
 * error codes are compared (`refusedAlike`).
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

  /** Sends the operation to both instances; their statuses and bodies must be equal. */
  async function same(query: string, variables?: Record<string, unknown>) {
    const [a, b] = [await jit.gql(query, variables, project.apiKey), await plain.gql(query, variables, project.apiKey)];
    expect({ status: a.status, body: withoutResolverErrorLocations(a.body) }).toEqual({
      status: b.status,
      body: withoutResolverErrorLocations(b.body),
    });
    return b;
  }

  /** For variable coercion refusals: the same status and error codes (the messages differ in wording). */
  async function refusedAlike(query: string, variables?: Record<string, unknown>) {
    const [a, b] = [await jit.gql(query, variables, project.apiKey), await plain.gql(query, variables, project.apiKey)];
    const codes = (r: typeof a) =>
      (r.body.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code);
    expect({ status: a.status, codes: codes(a) }).toEqual({ status: b.status, codes: codes(b) });
    expect(codes(b).length).toBeGreaterThan(0);
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

    // A variable of the wrong type, a missing required variable, an unknown field.
    await refusedAlike('query ($id: ID!) { transcript(id: $id) { id } }', { id: 12.5 });
    await refusedAlike('query ($id: ID!) { transcript(id: $id) { id } }', {});
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
    await refusedAlike(make, { input: { projectID: project.projectID, name: 'x', type: 'colour' } });
    await refusedAlike(make, { input: { projectID: project.projectID, type: 'string' } });
    const listed = await same('query ($p: ID!) { transcriptProperties(projectID: $p) { name type } }', {
      p: project.projectID,
    });
    expect(listed.body.data.transcriptProperties.map((p: { name: string }) => p.name).sort()).toEqual(['plan', 'tier']);
  });
});

/** The body without the `locations` of errors that have a `path` (raised while executing a field). */
// biome-ignore lint/suspicious/noExplicitAny: a GraphQL response body.
function withoutResolverErrorLocations(body: any): unknown {
  if (!body?.errors) return body;
  return {
    ...body,
    errors: body.errors.map((e: { path?: unknown; locations?: unknown }) => {
      if (!e.path) return e;
      const { locations: _locations, ...rest } = e;
      return rest;
    }),
  };
}
