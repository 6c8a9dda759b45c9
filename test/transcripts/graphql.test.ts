import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, ingestTranscript } from './helpers';

describeEachDatabase('transcripts over GraphQL', (provider) => {
  const t = useTestApp(provider);

  it('validates inputs with the same rules as REST', async () => {
    const p = await t.app.createProject();
    const create = (input: Record<string, unknown>) =>
      t.app.gql(
        'mutation($i: CreateTranscriptPropertyInput!) { createTranscriptProperty(input: $i) { id name } }',
        { i: input },
        p.apiKey,
      );
    for (const name of ['', ' ', 'n'.repeat(101)]) {
      const res = await create({ projectID: p.projectID, name, type: 'string' });
      expect(res.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
    }
    const padded = await create({ projectID: p.projectID, name: '  Topic  ', type: 'string' });
    expect(padded.body.data.createTranscriptProperty.name).toBe('Topic');
    const dup = await create({ projectID: p.projectID, name: 'Topic', type: 'number' });
    expect(dup.body.errors[0].extensions).toMatchObject({ code: 'CONFLICT', http: { status: 409 } });
    const wrongType = await create({ projectID: p.projectID, name: 'x', type: 'date' });
    expect(wrongType.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
    const search = await t.app.gql(
      'query($p: ID!, $c: TranscriptSearchCriteria) { transcripts(projectID: $p, criteria: $c) { totalCount } }',
      { p: p.projectID, c: { filters: [{ id: 'ffffffffffffffffffffffff', op: 'between', value: 3 }] } },
      p.apiKey,
    );
    expect(search.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('loads the logs and history of a whole page with one query each', async () => {
    const p = await adminProject(t.app);
    await t.app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'e', type: 'string', prompt: 'p' },
    });
    for (let i = 0; i < 5; i++) {
      const id = await ingestTranscript(t.app, p);
      await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
    }
    await t.app.services.jobs.drain();
    const operations: string[] = [];
    // The job runner's polls are the instance's own work, not this request's.
    const listener = (e: { model: string | undefined; operation: string; background: boolean }) => {
      if (!e.background) operations.push(`${e.model}.${e.operation}`);
    };
    t.app.services.db.queryListeners.add(listener);
    try {
      const res = await t.app.gql(
        `query($p: ID!) { transcripts(projectID: $p, first: 10) {
          totalCount
          edges { node { id history { id } logs(filterConversation: true) { type } properties { name } evaluations { name status } } }
        } }`,
        { p: p.projectID },
        p.apiKey,
      );
      expect(res.body.data.transcripts.totalCount).toBe(5);
      const nodes = res.body.data.transcripts.edges.map((e: { node: unknown }) => e.node);
      expect(nodes).toHaveLength(5);
      for (const node of nodes) {
        expect(node.logs.map((l: { type: string }) => l.type)).toEqual(['action', 'trace']);
        expect(node.history).toHaveLength(1);
        expect(node.evaluations).toEqual([{ name: 'e', status: 'skipped' }]);
      }
    } finally {
      t.app.services.db.queryListeners.delete(listener);
    }
    // The page and the count are one SQL statement each on the driver adapter (queryRows, no model).
    expect(operations.filter((o) => !o.startsWith('ApiKey.')).sort()).toEqual(
      [
        'undefined.queryRows', // totalCount
        'undefined.queryRows', // the page with its properties and evaluations
        'TranscriptLog.findMany',
        'TranscriptLog.findMany',
      ].sort(),
    );
  });
});
