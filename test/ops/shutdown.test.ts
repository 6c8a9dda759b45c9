import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { helpedEvaluation, pausingProgram } from '../helpers/fixtures';
import { createTestDatabase, databaseLanes } from '../helpers/lanes';
import { startServeProcess, waitUntilReady, waitUntilUnready } from '../helpers/serve-process';
import { conversation } from '../transcripts/helpers';

/**
 * Shutdown under load, with a real `parley serve` and SIGTERM: a runtime stream in the middle of a
 * turn, an idle GraphQL subscription, and an evaluation job waiting on a model that never answers.
 * Readiness turns false and new connections are refused at once; the subscription completes; the
 * turn finishes and its stream gets `end`; the job goes back to the queue for another instance;
 * the process exits 0 within the grace period.
 */

const provider = databaseLanes()[0] ?? 'sqlite';

async function readAll(response: Response, onChunk?: (text: string) => void): Promise<string> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
    if (done) return text;
    text += decoder.decode(value, { stream: true });
    onChunk?.(text);
  }
}

describe(`shutdown under load [${provider}]`, () => {
  let database: ScratchDatabase;
  let fake: FakeOpenAiServer;
  beforeAll(async () => {
    database = await createTestDatabase(provider);
    fake = await startFakeOpenAiServer();
  });
  afterAll(async () => {
    await fake?.close();
    await database?.drop();
  });

  it('drains on SIGTERM: unready, refuses connections, completes subscriptions, finishes the turn, releases the job, exits 0', async () => {
    const token = 'operator-token-for-shutdown-under-load';
    const server = await startServeProcess({
      DATABASE_URL: database.url,
      ADMIN_TOKEN: token,
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '6000',
      JOB_POLL_MS: '50',
      LLM_BASE_URL: fake.baseUrl,
      LLM_DEFAULT_MODEL: 'judge',
      LLM_MAX_RETRIES: '0',
      LLM_TIMEOUT_MS: '120000',
    });
    const { url, child } = server;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: token, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    const gql = (query: string, variables: Record<string, unknown> = {}) =>
      call('POST', '/graphql', { query, variables });
    try {
      await waitUntilReady(server);
      const created = await gql('mutation { createProject(input: { name: "drain" }) { project { id } } }');
      const projectID: string = created.body.data.createProject.project.id;
      const published = await gql(
        'mutation($input: PublishAgentInput!) { publishAgent(input: $input) { version { number } } }',
        {
          input: {
            projectID,
            program: pausingProgram('Patient', { before: 'before the pause', after: 'after the pause' }),
          },
        },
      );
      expect(published.body.errors).toBeUndefined();

      // An evaluation job that will be mid-call when SIGTERM comes: the model never answers.
      fake.script({ type: 'hang' });
      const evaluation = await call('POST', '/v1/transcript-evaluation', helpedEvaluation(projectID, 'helped'));
      expect(evaluation.status).toBe(201);
      const transcript = await call('POST', '/v1/transcript', {
        projectID,
        sessionID: 's-1',
        logs: conversation('hi'),
      });
      expect(transcript.status).toBe(201);
      await call('POST', `/v1/transcript/${transcript.body.transcript.id}/project/${projectID}/end`);
      await expect.poll(() => fake.requests.length, { timeout: 15_000 }).toBe(1);

      // An idle subscription, and a turn stream paused in the middle of its turn.
      const subscription = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription { auditEvents { action } }' }),
      });
      expect(subscription.status).toBe(200);
      const turn = await fetch(`${url}/v2/project/${projectID}/user/u1/interact/stream`, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json' },
        body: JSON.stringify({ action: { type: 'launch' } }),
      });
      expect(turn.status).toBe(200);
      let sawFirstMessage: () => void = () => {};
      const firstMessage = new Promise<void>((resolve) => {
        sawFirstMessage = resolve;
      });
      const turnText = readAll(turn, (text) => {
        if (text.includes('before the pause')) sawFirstMessage();
      });
      await firstMessage;
      const subscriptionText = readAll(subscription);

      child.kill('SIGTERM');
      // No new connection is accepted (readiness is false for whoever still asks over an open one).
      await waitUntilUnready(server);
      await expect
        .poll(async () => {
          try {
            await fetch(`${url}/healthz`);
            return 'accepted';
          } catch {
            return 'refused';
          }
        })
        .toBe('refused');

      // The subscription completes; the turn runs to its end and its stream gets `end`.
      expect(await subscriptionText).toContain('event: complete');
      const text = await turnText;
      expect(text).toContain('after the pause');
      expect(text).toMatch(/event: end\nid: \d+\n\n$/);

      const [code] = await server.exited;
      expect(code, server.stderr()).toBe(0);
      expect(server.stderr()).toContain('draining');

      // The job was handed back to the queue, its attempt not counted, for another instance.
      const db = await createDb(database.url);
      try {
        const jobs = await db.prisma.job.findMany({ where: { queue: 'evaluation' } });
        // Two evaluation jobs: the ended transcript's (mid-call at SIGTERM) and the one of the turn's
        // own conversation, whose transcript its end step ended (docs/transcripts.md). Neither ran to
        // its end, and neither attempt counts.
        expect(jobs.map((j) => [j.status, j.lockedBy, j.attempts])).toEqual([
          ['queued', null, 0],
          ['queued', null, 0],
        ]);
      } finally {
        await db.close();
      }
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 90_000);
});
