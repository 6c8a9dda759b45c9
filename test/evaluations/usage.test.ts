import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { usageRest } from '../helpers/usage';
import { adminProject, ingestTranscript } from '../transcripts/helpers';

/** Transcripts and the judge's tokens in usage analytics (DECISIONS.md §4). */
describeEachDatabase('transcripts and evaluations in usage analytics', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, {
      env: { LLM_BASE_URL: fake.baseUrl, LLM_DEFAULT_MODEL: 'judge-model', LLM_MAX_RETRIES: '0' },
    });
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  it('counts created transcripts, and the judge call as llm-input and llm-output credit', async () => {
    const p = await adminProject(app);
    const first = await ingestTranscript(app, p, { userID: 'u1' });
    await ingestTranscript(app, p, { userID: 'u2', environment: 'production' });
    // A refused duplicate session does not count.
    const dup = await app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'same', logs: [] },
    });
    expect(dup.status).toBe(201);
    const again = await app.http('POST', '/v1/transcript', {
      key: p.apiKey,
      body: { projectID: p.projectID, sessionID: 'same', logs: [] },
    });
    expect(again.status).toBe(409);

    const evaluation = await app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: {
        projectID: p.projectID,
        name: 'Resolved',
        type: 'boolean',
        prompt: 'Was it solved?',
        truePrompt: 'yes',
        falsePrompt: 'no',
      },
    });
    expect(evaluation.status).toBe(201);
    fake.script({
      type: 'chat',
      chunks: ['{"value": true, ', '"reason": "ok"}'],
      usage: { prompt_tokens: 321, completion_tokens: 12 },
    });
    const run = await app.http(
      'POST',
      `/v1/transcript-evaluation/${evaluation.body.evaluation.id}/transcript/${first}`,
      {
        key: p.apiKey,
        body: { projectID: p.projectID },
      },
    );
    expect(run.status, run.text).toBe(201);

    const transcripts = await usageRest(app, p.apiKey, { name: 'transcripts', filter: { projectID: p.projectID } });
    expect(transcripts.status).toBe(200);
    const byEnv = (items: { environmentID: string; count: number }[], alias: string) => {
      const env = p.environments.find((e) => e.alias === alias)!.id;
      return items.filter((i) => i.environmentID === env).reduce((n, i) => n + i.count, 0);
    };
    expect(byEnv(transcripts.body.result.items, 'development')).toBe(2);
    expect(byEnv(transcripts.body.result.items, 'production')).toBe(1);

    const credit = await usageRest(app, p.apiKey, { name: 'credit_usage', filter: { projectID: p.projectID } });
    const items = credit.body.result.items as {
      type: string;
      model: string;
      count: number;
      diagramID: string;
      nodeID: string;
    }[];
    expect(
      items
        .map(({ type, model, count, diagramID, nodeID }) => ({ type, model, count, diagramID, nodeID }))
        .sort((a, b) => a.type.localeCompare(b.type)),
    ).toEqual([
      { type: 'llm-input', model: 'judge-model', count: 321, diagramID: '', nodeID: '' },
      { type: 'llm-output', model: 'judge-model', count: 12, diagramID: '', nodeID: '' },
    ]);
  });
});
