import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosineDistance } from '../../src/db/client';
import { requestEmbeddingSweep } from '../../src/kb/embeddings';
import { type RetrievedChunk, reciprocalRankFusion } from '../../src/kb/search';
import { vectorBytes } from '../../src/kb/vectors';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { kbQuery, uploadFile } from '../helpers/kb';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, stream } from '../helpers/runtime';
import { dataOf } from '../helpers/sse';

/**
 * The knowledge base with a model server: synthesis and embeddings through the fake
 * OpenAI-compatible server (real HTTP, OpenAI's wire format), hybrid ranking, the fallbacks when
 * the server fails, re-embedding after a model change, and the runtime's ai and kb steps.
 */

const llmEnv = (fake: FakeOpenAiServer, embeddingModel = 'embed-a') => ({
  LLM_BASE_URL: fake.baseUrl,
  LLM_DEFAULT_MODEL: 'gpt-default',
  EMBEDDING_MODEL: embeddingModel,
  LLM_MAX_RETRIES: '0',
  // The periodic sweep must not take scripted replies in the middle of a test; starts still sweep.
  KB_EMBED_SWEEP_MS: String(24 * 3600_000),
});

async function usageItems(app: TestApp, p: TestProject, name: string) {
  const res = await app.http('POST', '/v2/query/usage', {
    key: p.apiKey,
    body: { data: { name, filter: { projectID: p.projectID } } },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.result.items as Record<string, unknown>[];
}

describeEachDatabase('knowledge base with a model server', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;

  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, { env: llmEnv(fake) });
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  /** Uploads the three-row table whose vectors the tests script; returns its document. */
  async function uploadAnimals(project: TestProject, vectors: number[][], query: Record<string, string> = {}) {
    fake.script({ type: 'embeddings', vectors, promptTokens: 30 });
    const res = await app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: project.apiKey,
      query: { wait: 'true', ...query },
      body: {
        data: {
          name: 'topics',
          schema: { searchableFields: ['text'], metadataFields: ['topic'] },
          items: [
            { text: 'The cat sat on the mat.', topic: 'pets' },
            { text: 'Quarterly revenue grew by ten percent.', topic: 'finance' },
            { text: 'Tomorrow will be sunny and warm.', topic: 'weather' },
          ],
        },
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.status.type).toBe('SUCCESS');
    return res.body.data;
  }

  it('charges embedding tokens to the environment the document is used in', async () => {
    const q = await app.createProject();
    const [dev, prod] = ['development', 'production'].map((alias) => q.environments.find((e) => e.alias === alias)!.id);
    fake.reset();
    await uploadAnimals(
      q,
      [
        [1, 0, 0],
        [0, 1, 0],
        [0, 0, 1],
      ],
      { environment: 'production' },
    );
    fake.script({ type: 'embeddings', vectors: [[1, 0, 0]], promptTokens: 7 });
    const file = await uploadFile(app, {
      key: q.apiKey,
      filename: 'notes.txt',
      content: 'Cats like mats.',
      query: { environment: prod!, wait: 'true' },
    });
    expect(file.status, file.text).toBe(200);
    const embedTokens = async () =>
      (await usageItems(app, q, 'credit_usage'))
        .filter((c) => c.model === 'embed-a')
        .map((c) => [c.environmentID, c.count]);
    expect(await embedTokens()).toEqual([[prod, 37]]);
    // An unknown environment is a 404 and stores nothing; without one, development pays.
    const unknown = await app.http('POST', '/v1/knowledge-base/docs/upload/table', {
      key: q.apiKey,
      query: { environment: 'staging' },
      body: { data: { name: 'x', schema: { searchableFields: ['t'], metadataFields: [] }, items: [{ t: 'x' }] } },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ errorCode: 'NOT_FOUND', message: expect.stringContaining('staging') });
    fake.script({ type: 'embeddings', vectors: [[0, 1, 0]], promptTokens: 5 });
    const plain = await uploadFile(app, {
      key: q.apiKey,
      filename: 'plain.txt',
      content: 'Revenue grew.',
      query: { wait: 'true' },
    });
    expect(plain.status, plain.text).toBe(200);
    expect((await embedTokens()).sort()).toEqual(
      [
        [dev, 5],
        [prod, 37],
      ].sort(),
    );
    const docs = await app.http('GET', '/v1/knowledge-base/docs', { key: q.apiKey });
    expect(docs.body.total).toBe(3);
  });

  it('embeds chunks when ingested and ranks by meaning where no word matches, with the filter applied', async () => {
    const q = await app.createProject();
    fake.reset();
    await uploadAnimals(q, [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ]);
    const ingestCall = fake.requests.find((r) => r.path.endsWith('/embeddings'));
    expect(ingestCall?.body).toMatchObject({
      model: 'embed-a',
      input: [
        'text: The cat sat on the mat.',
        'text: Quarterly revenue grew by ten percent.',
        'text: Tomorrow will be sunny and warm.',
      ],
    });
    const stored = await app.services.db.prisma.$queryRaw<{ model: string; dims: number | bigint }[]>`
      SELECT e."model", e."dims" FROM "kb_chunk_embedding" e JOIN "KbChunk" c ON c."seq" = e."seq" WHERE c."projectId" = ${q.projectID}`;
    expect(stored.map((r) => [r.model, Number(r.dims)])).toEqual([
      ['embed-a', 3],
      ['embed-a', 3],
      ['embed-a', 3],
    ]);

    // No word of the question is in any row: full text finds nothing, the vectors find revenue.
    fake.script({ type: 'embeddings', vectors: [[0.1, 0.9, 0.05]], promptTokens: 4 });
    const byMeaning = await kbQuery(app, q.apiKey, {
      question: 'income statement figures',
      synthesis: false,
      chunkLimit: 1,
    });
    expect(byMeaning.status, byMeaning.text).toBe(200);
    expect(byMeaning.body.chunks).toHaveLength(1);
    expect(byMeaning.body.chunks[0]).toMatchObject({ metadata: { topic: 'finance' } });

    fake.script({ type: 'embeddings', vectors: [[0.1, 0.9, 0.05]], promptTokens: 4 });
    const filtered = await kbQuery(app, q.apiKey, {
      question: 'income statement figures',
      synthesis: false,
      chunkLimit: 1,
      filters: { topic: { $ne: 'finance' } },
    });
    expect(filtered.body.chunks[0]).toMatchObject({ metadata: { topic: 'pets' } });

    // Words and meaning together: fused ranks.
    fake.script({ type: 'embeddings', vectors: [[0, 0, 1]], promptTokens: 4 });
    const both = await kbQuery(app, q.apiKey, { question: 'cat mat', synthesis: false, chunkLimit: 3 });
    const topics = both.body.chunks.map((c: { metadata: { topic: string } }) => c.metadata.topic);
    expect(topics.slice(0, 2).sort()).toEqual(['pets', 'weather']);

    // Embedding tokens are credit usage of the embedding model.
    const credit = await usageItems(app, q, 'credit_usage');
    expect(credit.filter((c) => c.model === 'embed-a').reduce((n, c) => n + Number(c.count), 0)).toBe(30 + 4 + 4 + 4);
  });

  it('synthesises through the model with the passages and settings, and counts its tokens', async () => {
    const q = await app.createProject();
    await uploadAnimals(q, [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ]);
    fake.reset();
    fake.script(
      { type: 'embeddings', vectors: [[0, 1, 0]], promptTokens: 5 },
      { type: 'chat', chunks: ['Revenue ', 'grew ', '10%.'], usage: { prompt_tokens: 120, completion_tokens: 3 } },
    );
    const res = await kbQuery(app, q.apiKey, {
      question: 'How much did revenue grow?',
      chunkLimit: 1,
      settings: { model: 'gpt-x', temperature: 0.3, system: 'Be terse.' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      output: 'Revenue grew 10%.',
      queryTokens: 120,
      answerTokens: 3,
      totalTokens: 123,
      model: 'gpt-x',
    });
    const chat = fake.requests.find((r) => r.path.endsWith('/chat/completions'));
    expect(chat?.body).toMatchObject({ model: 'gpt-x', temperature: 0.3, stream: true });
    const messages = chat?.body.messages as { role: string; content: string }[];
    expect(messages[0]).toEqual({ role: 'system', content: 'Be terse.' });
    expect(messages[1]?.content).toContain('Quarterly revenue grew by ten percent.');
    expect(messages.at(-1)).toEqual({ role: 'user', content: 'How much did revenue grow?' });

    const credit = await usageItems(app, q, 'credit_usage');
    const gpt = credit.filter((c) => c.model === 'gpt-x').map((c) => [c.type, c.count]);
    expect(gpt.sort()).toEqual([
      ['llm-input', 120],
      ['llm-output', 3],
    ]);
  });

  it('falls back to full text when the question cannot be embedded', async () => {
    const q = await app.createProject();
    await uploadAnimals(q, [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ]);
    fake.script({ type: 'error', status: 500, message: 'embedder down' });
    const res = await kbQuery(app, q.apiKey, { question: 'sunny tomorrow', synthesis: false });
    expect(res.status, res.text).toBe(200);
    expect(res.body.chunks[0]).toMatchObject({ metadata: { topic: 'weather' } });
  });

  it('stores chunks without vectors when ingestion cannot embed them, and the sweep embeds them later', async () => {
    const q = await app.createProject();
    fake.script({ type: 'error', status: 400, message: 'bad embeddings request' });
    const res = await uploadFile(app, {
      key: q.apiKey,
      filename: 'owls.txt',
      content: 'Owls hunt at night.',
      query: { wait: 'true' },
    });
    expect(res.body.data[0].status).toBe('SUCCESS');
    const vectors = () =>
      app.services.db.prisma.$queryRaw<{ n: bigint | number }[]>`
        SELECT count(*) AS n FROM "kb_chunk_embedding" e JOIN "KbChunk" c ON c."seq" = e."seq" WHERE c."projectId" = ${q.projectID}`;
    expect(Number((await vectors())[0]?.n)).toBe(0);
    expect((await kbQuery(app, q.apiKey, { question: 'owls', synthesis: false })).body.chunks).toHaveLength(1);

    await requestEmbeddingSweep(app.services, `test:${q.projectID}`);
    const deadline = Date.now() + 15_000;
    while (Number((await vectors())[0]?.n) === 0) {
      if (Date.now() > deadline) throw new Error('the sweep did not embed the chunk');
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it('runs the ai and kb steps: a streamed model answer, a search into a variable, a knowledge-base answer', async () => {
    const q = await app.createProject();
    await uploadAnimals(q, [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ]);
    await publish(app, q.projectID, {
      name: 'Helper',
      startFlow: 'main',
      variables: [{ name: 'question' }, { name: 'found' }, { name: 'answer' }],
      flows: [
        {
          id: 'main',
          start: 'welcome',
          steps: [
            { id: 'welcome', type: 'message', message: 'Ask me anything.', next: 'greet' },
            { id: 'greet', type: 'ai', prompt: 'Greet {user_id} warmly.', system: 'You are kind.', next: 'ask' },
            { id: 'ask', type: 'capture', variable: 'question', next: 'lookup' },
            {
              id: 'lookup',
              type: 'kb',
              question: '{question}',
              chunkLimit: 2,
              filters: { topic: { $in: ['weather', 'pets'] } },
              variable: 'found',
              next: 'answer',
              notFound: 'sorry',
            },
            {
              id: 'answer',
              type: 'ai',
              source: 'knowledge-base',
              prompt: '{question}',
              variable: 'answer',
              next: 'show',
            },
            { id: 'show', type: 'message', message: 'Sources: {found}' },
            { id: 'sorry', type: 'message', message: 'No idea.' },
          ],
        },
      ],
    });
    const path = `/v2beta1/interact/${q.projectID}/development/stream`;
    const session = { userID: 'ana', sessionID: 's1' };

    fake.reset();
    fake.script({ type: 'chat', chunks: ['Hello ', 'Ana!'], usage: { prompt_tokens: 12, completion_tokens: 2 } });
    const launch = await stream(app, path, { key: q.apiKey, body: { action: { type: 'launch' }, session } });
    const launchTraces = dataOf<{ trace: { type: string; payload: Record<string, unknown> } }>(
      launch.reading,
      'trace',
    ).map((d) => d.trace);
    const types = launchTraces.map((tr) => tr.type).filter((x) => x === 'text' || x.startsWith('completion'));
    expect(types).toEqual(['text', 'completion-start', 'completion-continue', 'completion-end']);
    const pieces = launchTraces.filter((tr) => tr.type.startsWith('completion')).map((tr) => tr.payload.completion);
    expect(pieces.join('')).toBe('Hello Ana!');
    expect(fake.requests[0]?.body.messages).toEqual([
      { role: 'system', content: 'You are kind.' },
      { role: 'user', content: 'Greet ana warmly.' },
    ]);

    fake.script(
      { type: 'embeddings', vectors: [[0, 0, 1]], promptTokens: 3 },
      { type: 'embeddings', vectors: [[0, 0, 1]], promptTokens: 3 },
      { type: 'chat', chunks: ['It will be sunny.'], usage: { prompt_tokens: 50, completion_tokens: 4 } },
    );
    const turn = await stream(app, path, {
      key: q.apiKey,
      body: { action: { type: 'text', payload: 'Will tomorrow be sunny?' }, session },
    });
    const traces = dataOf<{ trace: { type: string; payload: Record<string, unknown> } }>(turn.reading, 'trace').map(
      (d) => d.trace,
    );
    const texts = traces.filter((tr) => tr.type === 'text').map((tr) => tr.payload);
    expect(texts[0]).toEqual({
      message: 'It will be sunny.',
      ai: true,
      slate: { id: expect.any(String), content: [{ children: [{ text: 'It will be sunny.' }] }] },
    });
    expect(String(texts[1]?.message)).toContain('Tomorrow will be sunny and warm.');
    // The knowledge-base answer is one text trace, never completion traces (SPEC.md).
    expect(traces.some((tr) => tr.type.startsWith('completion'))).toBe(false);
    const variables = dataOf<{ state: { variables: Record<string, unknown> } }>(turn.reading, 'state')[0]?.state
      .variables;
    expect(variables?.answer).toBe('It will be sunny.');
    const found = (variables?.found ?? []) as { metadata: { topic: string } }[];
    expect(found.map((c) => c.metadata.topic)).toContain('weather');

    // Model calls of steps are credit usage of their flow and step.
    const credit = await usageItems(app, q, 'credit_usage');
    const byNode = (nodeID: string) =>
      credit.filter((c) => c.nodeID === nodeID && c.model === 'gpt-default').map((c) => [c.type, c.count, c.diagramID]);
    expect(byNode('greet').sort()).toEqual([
      ['llm-input', 12, 'main'],
      ['llm-output', 2, 'main'],
    ]);
    expect(byNode('answer').sort()).toEqual([
      ['llm-input', 50, 'main'],
      ['llm-output', 4, 'main'],
    ]);
    const docs = await usageItems(app, q, 'kb_documents');
    expect(docs.reduce((n, d) => n + Number(d.count), 0)).toBe(2);
  });
});

describeEachDatabase('knowledge base after an embedding model change', (provider) => {
  it('re-embeds every chunk with the new model, and queries use only its vectors', async () => {
    const fake = await startFakeOpenAiServer();
    const first = await startTestApp(provider, { env: llmEnv(fake, 'embed-a') });
    const p = await first.createProject();
    try {
      for (const name of ['a.txt', 'b.txt']) {
        const res = await uploadFile(first, {
          key: p.apiKey,
          filename: name,
          content: `Document ${name} about ferns and mosses.`,
          query: { wait: 'true' },
        });
        expect(res.body.data[0].status).toBe('SUCCESS');
      }
    } finally {
      await first.running.close();
    }
    // Same database, new model: the sweep runs when the instance starts.
    const second = await startTestApp(provider, { env: llmEnv(fake, 'embed-b'), database: first.database });
    try {
      const models = () =>
        second.services.db.prisma.$queryRaw<
          { model: string }[]
        >`SELECT "model" FROM "kb_chunk_embedding" ORDER BY "seq"`;
      const deadline = Date.now() + 20_000;
      while (!(await models()).every((m) => m.model === 'embed-b')) {
        if (Date.now() > deadline) throw new Error(`not re-embedded: ${JSON.stringify(await models())}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await models()).toHaveLength(2);
      const res = await kbQuery(second, p.apiKey, { question: 'ferns', synthesis: false, chunkLimit: 5 });
      expect(res.body.chunks).toHaveLength(2);
      const asked = fake.requests.filter((r) => r.path.endsWith('/embeddings')).at(-1);
      expect(asked?.body).toMatchObject({ model: 'embed-b', input: ['ferns'] });
    } finally {
      await second.close();
      await fake.close();
    }
  });
});

describe('vector helpers', () => {
  it('the JavaScript cosine distance matches sqlite-vec', () => {
    const db = new Database(':memory:');
    sqliteVec.load(db);
    const stmt = db.prepare('SELECT vec_distance_cosine(?, ?) AS d');
    for (let i = 0; i < 50; i++) {
      const a = Array.from({ length: 16 }, () => Math.random() * 2 - 1);
      const b = Array.from({ length: 16 }, () => Math.random() * 2 - 1);
      const ours = cosineDistance(vectorBytes(a), vectorBytes(b));
      const theirs = (stmt.get(Buffer.from(vectorBytes(a)), Buffer.from(vectorBytes(b))) as { d: number }).d;
      expect(ours).toBeCloseTo(theirs, 5);
    }
    db.close();
  });

  it('fuses rankings by reciprocal rank', () => {
    const chunk = (seq: number): RetrievedChunk => ({
      seq,
      chunkId: `c${seq}`,
      documentId: 'd',
      content: '',
      metadata: {},
      score: 0,
    });
    const fused = reciprocalRankFusion(
      [
        [chunk(1), chunk(2), chunk(3)],
        [chunk(3), chunk(4), chunk(1)],
      ],
      3,
    );
    // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie, lower seq first); 2: 1/62; 4: 1/62.
    expect(fused.map((c) => c.seq)).toEqual([1, 3, 2]);
    expect(fused[0]?.score).toBeCloseTo(1 / 61 + 1 / 63, 10);
  });
});
