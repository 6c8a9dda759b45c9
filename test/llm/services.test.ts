import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';

describeEachDatabase('the instance container’s llm member', (provider) => {
  let fake: FakeOpenAiServer;
  let offline: TestApp;
  let online: TestApp | undefined;

  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    offline = await startTestApp(provider);
    online = await startTestApp(provider, {
      env: {
        LLM_BASE_URL: fake.baseUrl,
        LLM_API_KEY: 'sk-services-test',
        LLM_DEFAULT_MODEL: 'gpt-4o-mini',
        EMBEDDING_MODEL: 'text-embedding-3-small',
        LLM_PRICES: '{"gpt-4o-mini": {"input": 1, "output": 2}}',
      },
    });
  });
  afterAll(async () => {
    await offline?.close();
    await online?.close();
    await fake?.close();
  });

  it('is the built-in provider when no LLM_BASE_URL is set', async () => {
    const llm = offline.services.llm;
    expect(llm.info.provider).toBe('builtin');
    expect(llm.isLanguageModel).toBe(false);
    expect(llm.supportsEmbeddings).toBe(false);
    const result = await llm.complete({
      messages: [
        { role: 'system', content: 'Parley stores transcripts. Parley streams traces.' },
        { role: 'user', content: 'What does Parley store?' },
      ],
    });
    expect(result.text).toBe('Parley stores transcripts.');
  });

  it('is the OpenAI-compatible provider built from the settings, prices included', async () => {
    const llm = online!.services.llm;
    expect(llm.info).toMatchObject({
      provider: 'openai-compatible',
      defaultModel: 'gpt-4o-mini',
      embeddingModel: 'text-embedding-3-small',
    });
    fake.script({ type: 'chat', chunks: ['Hi'], usage: { prompt_tokens: 1000, completion_tokens: 500 } });
    const result = await llm.complete({ messages: [{ role: 'user', content: 'Hello' }] });
    expect(result.text).toBe('Hi');
    expect(result.accounting.cost).toBe(0.002);
    expect(fake.requests.at(-1)?.headers.authorization).toBe('Bearer sk-services-test');
    const embedded = await llm.embed({ texts: ['one'] });
    expect(embedded.vectors).toHaveLength(1);
  });

  it('closes its connections when the instance closes', async () => {
    expect(fake.openConnections()).toBeGreaterThan(0);
    await online?.close();
    online = undefined;
    // The guard is shorter than undici's 4 s keep-alive: idle sockets left to expire would fail it.
    await fake.waitForNoConnections(3000);
    expect(fake.openConnections()).toBe(0);
  });
});
