import { afterAll, beforeAll, expect, it } from 'vitest';
import { defaultKeyScopes } from '../../src/auth/keys';
import { startTestApp, type TestApp, type TestProject } from '../helpers/app';
import { type FakeOpenAiServer, startFakeOpenAiServer } from '../helpers/fake-openai-server';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';
import { ingestTranscript } from './helpers';

/**
 * A conversation held through Parley's own runtime ends its transcript by itself (DECISIONS.md §5):
 * at an end or hand-off step, or when it stays idle past RUNTIME_SESSION_IDLE_MS, the idle sweep
 * ends it. Either way the enabled evaluations run, with no call from the client.
 */
const JUDGE_MODEL = 'judge-model';

const program = {
  name: 'Support',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      name: 'Main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'How can I help?', next: 'menu' },
        {
          id: 'menu',
          type: 'choice',
          buttons: [
            { label: 'Again', next: 'hello' },
            { label: 'Done', next: 'bye' },
            { label: 'Human', next: 'human' },
          ],
        },
        { id: 'bye', type: 'message', message: 'Bye!', next: 'stop' },
        { id: 'stop', type: 'end' },
        { id: 'human', type: 'handoff', message: 'A person will take over.' },
      ],
    },
  ],
};

type Trace = { type: string; payload: { buttons?: { name: string; request: unknown }[] } };

describeEachDatabase('runtime sessions end their transcripts', (provider) => {
  let fake: FakeOpenAiServer;
  let app: TestApp;
  let p: TestProject;
  beforeAll(async () => {
    fake = await startFakeOpenAiServer();
    app = await startTestApp(provider, {
      env: {
        LLM_BASE_URL: fake.baseUrl,
        LLM_DEFAULT_MODEL: JUDGE_MODEL,
        LLM_MAX_RETRIES: '0',
        JOB_POLL_MS: '50',
        TRANSCRIPT_IDLE_SWEEP_INTERVAL_MS: '1000',
      },
    });
    p = await app.createProject({ scopes: [...defaultKeyScopes, 'admin'] });
    await publish(app, p.projectID, program);
    const evaluation = await app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: {
        projectID: p.projectID,
        name: 'Resolved',
        type: 'boolean',
        enabled: true,
        prompt: "Did the agent solve the user's problem?",
        truePrompt: 'solved',
        falsePrompt: 'not solved',
      },
    });
    expect(evaluation.status).toBe(201);
  });
  afterAll(async () => {
    await app?.close();
    await fake?.close();
  });

  const judgeSays = (value: boolean, reason: string) =>
    fake.script({
      type: 'chat',
      chunks: [JSON.stringify({ value, reason })],
      usage: { prompt_tokens: 10, completion_tokens: 5 },
    });
  const transcriptsOf = async (userID: string) => {
    const res = await app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      query: { order: 'ASC' },
      body: { userID },
    });
    expect(res.status).toBe(200);
    return res.body.transcripts as { id: string; endedAt: string | null; sessionID: string }[];
  };
  const press = async (userID: string, traces: Trace[], label: string) => {
    const button = traces.find((t) => t.type === 'choice')!.payload.buttons!.find((b) => b.name === label)!;
    const res = await interact(app, p.apiKey, p.projectID, userID, { action: button.request });
    expect(res.status).toBe(200);
    return res.body as unknown as Trace[];
  };
  const launch = async (userID: string) => {
    const res = await interact(app, p.apiKey, p.projectID, userID, { action: { type: 'launch' } });
    expect(res.status).toBe(200);
    return res.body as unknown as Trace[];
  };
  /** Waits for the transcript's evaluation result, as a client polling GET /v1/transcript/{id} would. */
  const evaluatedTranscript = async (id: string) => {
    let transcript: { endedAt: string | null; evaluations: { value: unknown; reason: unknown }[] } | undefined;
    await expect
      .poll(
        async () => {
          transcript = (await app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey })).body.transcript;
          return transcript?.evaluations.find((e) => e.value !== null && e.value !== undefined)?.value;
        },
        { timeout: 20_000 },
      )
      .toBeDefined();
    return transcript!;
  };

  it('ends the transcript when the conversation reaches an end step, and runs the evaluations', async () => {
    judgeSays(true, 'The user was helped.');
    const first = await launch('ann');
    await press('ann', first, 'Done');

    const [transcript] = await transcriptsOf('ann');
    expect(transcript!.endedAt).toEqual(expect.stringMatching(/Z$/));
    const evaluated = await evaluatedTranscript(transcript!.id);
    expect(evaluated.evaluations[0]).toMatchObject({ name: 'Resolved', value: true, reason: 'The user was helped.' });
    expect(evaluated.endedAt).toBe(transcript!.endedAt);
    // The judge read the conversation, up to its end.
    expect(JSON.stringify(fake.requests.at(-1)!.body)).toContain('Bye!');

    // The next turn, even without a launch, is a new session with a new, open transcript.
    await interact(app, p.apiKey, p.projectID, 'ann', { action: { type: 'text', payload: 'hello again' } });
    const after = await transcriptsOf('ann');
    expect(after).toHaveLength(2);
    expect(after[1]!.sessionID).not.toBe(after[0]!.sessionID);
    expect(after[1]!.endedAt).toBeNull();
  });

  it('ends the transcript at a hand-off step', async () => {
    judgeSays(false, 'Handed to a person.');
    await press('hal', await launch('hal'), 'Human');
    const [transcript] = await transcriptsOf('hal');
    expect(transcript!.endedAt).not.toBeNull();
    expect((await evaluatedTranscript(transcript!.id)).evaluations[0]).toMatchObject({ value: false });
  });

  it('leaves a conversation that is still going open, and the idle sweep ends it once it is idle past the limit', async () => {
    await launch('ida');
    await press('ida', await launch('ida'), 'Again');
    const open = await transcriptsOf('ida');
    // Two launches: two sessions. Neither has reached an end.
    expect(open.map((t) => t.endedAt)).toEqual([null, null]);

    // An ingested transcript (another runtime's) is ended by its runtime, never by the sweep.
    const ingested = await ingestTranscript(app, p, { userID: 'ida' });
    // The second session goes quiet: 31 minutes since its last turn (the default limit is 30).
    const longAgo = new Date(Date.now() - 31 * 60_000);
    const db = app.services.db.prisma;
    await db.transcript.updateMany({
      where: { id: { in: [open[1]!.id, ingested] } },
      data: { updatedAt: longAgo },
    });
    judgeSays(true, 'It went quiet after the answer.');
    await expect
      .poll(async () => (await db.transcript.findUnique({ where: { id: open[1]!.id } }))?.endedAt ?? null, {
        timeout: 20_000,
      })
      .not.toBeNull();
    const evaluated = await evaluatedTranscript(open[1]!.id);
    expect(evaluated.evaluations[0]).toMatchObject({ value: true, reason: 'It went quiet after the answer.' });
    expect((await db.transcript.findUnique({ where: { id: ingested } }))!.endedAt).toBeNull();
    // The first session was not idle that long: still open.
    expect((await db.transcript.findUnique({ where: { id: open[0]!.id } }))!.endedAt).toBeNull();

    // The user comes back: a new session, with a new transcript.
    await interact(app, p.apiKey, p.projectID, 'ida', { action: { type: 'text', payload: 'back' } });
    const now = await transcriptsOf('ida');
    expect(now).toHaveLength(4); // two runtime sessions, the ingested one, the new one
    expect(now.filter((t) => t.endedAt === null).map((t) => t.id)).toContain(now.at(-1)!.id);
  });
});
