import { expect, it } from 'vitest';
import { newId } from '../../src/lib/ids';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSqlStatements, tableOf } from '../helpers/sql-statements';
import { adminProject, ingestTranscript } from './helpers';

/**
 * Transcript search loads a page with its property values and evaluation results in a fixed
 * number of statements: the same statements for a page of 1, 5 or 25, never one per transcript.
 */
describeEachDatabase('transcript search statements', (provider) => {
  // No job runner: its polls would be recorded beside the request's statements.
  const t = useTestApp(provider, { env: { JOBS_ENABLED: 'false' } });

  it('reads a page of any size with the same statements (no query per transcript)', async () => {
    const p = await adminProject(t.app);
    const { prisma } = t.app.services.db;
    const score = await prisma.transcriptProperty.create({
      data: { id: newId(), projectId: p.projectID, name: 'score', type: 'number' },
    });
    const topic = await prisma.transcriptProperty.create({
      data: { id: newId(), projectId: p.projectID, name: 'topic', type: 'string' },
    });
    const resolved = await prisma.evaluation.create({
      data: {
        id: newId(),
        projectId: p.projectID,
        name: 'resolved',
        type: 'boolean',
        prompt: 'Resolved?',
        truePrompt: 'yes',
        falsePrompt: 'no',
        settings: {},
      },
    });
    for (let i = 0; i < 30; i++) {
      const transcriptId = await ingestTranscript(t.app, p, { userID: `user-${i}` });
      await prisma.transcriptPropertyValue.createMany({
        data: [
          { transcriptId, propertyId: score.id, value: String(i), numberValue: i },
          { transcriptId, propertyId: topic.id, value: `topic ${i % 3}` },
        ],
      });
      await prisma.evaluationResult.create({
        data: {
          id: newId(),
          evaluationId: resolved.id,
          transcriptId,
          status: 'done',
          runId: newId(),
          valueBoolean: i % 2 === 0,
          reason: 'because',
          cost: 0.001,
        },
      });
    }
    const search = async (take: number) => {
      const operations: string[] = [];
      const listener = (e: { model: string | undefined; operation: string }) => {
        operations.push(`${e.model}.${e.operation}`);
      };
      t.app.services.db.queryListeners.add(listener);
      let body: { transcripts: { properties: unknown[]; evaluations: unknown[] }[] } | undefined;
      const statements = await recordSqlStatements(async () => {
        const res = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
          key: p.apiKey,
          query: { take: String(take) },
          body: { filters: [{ id: score.id, op: 'gte', value: 0 }] },
        });
        expect(res.status).toBe(200);
        body = res.body;
      }).finally(() => t.app.services.db.queryListeners.delete(listener));
      expect(body!.transcripts).toHaveLength(take);
      for (const transcript of body!.transcripts) {
        expect(transcript.properties).toHaveLength(2);
        expect(transcript.evaluations).toHaveLength(1);
      }
      // The key's lookup (with its project: a second SELECT, on "Project") and last-used stamp are
      // the authenticator's, not the search's: its cache entry may expire between two searches on a
      // slow machine, so they are left out.
      const ofSearch = statements.filter((s) => !/\bApiKey\b/.test(s));
      if (statements.some((s) => /^\s*SELECT\b/i.test(s) && /\bApiKey\b/.test(s))) {
        const keysProject = ofSearch.findIndex((s) => /^\s*SELECT\b/i.test(s) && tableOf(s) === 'Project');
        if (keysProject >= 0) ofSearch.splice(keysProject, 1);
      }
      const reads = ofSearch.filter((s) => /^\s*(SELECT|WITH)\b/i.test(s)).map(tableOf);
      return {
        operations: operations.filter((o) => !o.startsWith('ApiKey.')).sort(),
        reads: reads.sort(),
        statements: ofSearch.length,
      };
    };
    await search(25); // warm: the key and the project are looked up once and cached
    const [one, five, page] = [await search(1), await search(5), await search(25)];
    // The filter's ID looked up among the project's properties and evaluations (once per search, not
    // per row); then one raw statement (no model) for the page. Access control reads nothing: the
    // key's project is cached with the key (src/auth/keys.ts).
    expect(page.operations).toEqual(['Evaluation.findMany', 'TranscriptProperty.findMany', 'undefined.queryRows']);
    // Its statements: the page with its property values and evaluation results in one statement
    // (src/transcripts/search-page.ts), which reads the relations for the page's rows only.
    expect(page.reads).toEqual(
      [
        'Evaluation', // the filter's ID
        'TranscriptProperty', // the filter's ID
        'Transcript', // the page, its property values and evaluation results
      ].sort(),
    );
    expect(page.statements).toBe(3);
    for (const smaller of [one, five]) {
      expect(smaller.operations).toEqual(page.operations);
      expect(smaller.reads).toEqual(page.reads);
      expect(smaller.statements).toBe(page.statements);
    }
  });
});
