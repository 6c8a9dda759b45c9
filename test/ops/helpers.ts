import { afterAll, beforeAll } from 'vitest';
import type { Provider } from '../../src/db/schema-source';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { adminProject } from '../transcripts/helpers';

/**
 * A test app whose language model is the fake OpenAI-compatible server, and a project with an
 * admin key. The fake server starts first: its URL is part of the app's configuration. Read the
 * members inside tests.
 */
export function useAppWithFakeModel(
  provider: Provider,
  env: Record<string, string>,
): { app: TestApp; fake: FakeOpenAiServer; project: TestProject } {
  const holder = {} as { app: TestApp; fake: FakeOpenAiServer; project: TestProject };
  beforeAll(async () => {
    holder.fake = await startFakeOpenAiServer();
    holder.app = await startTestApp(provider, { env: { ...env, LLM_BASE_URL: holder.fake.baseUrl } });
    holder.project = await adminProject(holder.app);
  });
  afterAll(async () => {
    await holder.app?.close();
    await holder.fake?.close();
  });
  return holder;
}
