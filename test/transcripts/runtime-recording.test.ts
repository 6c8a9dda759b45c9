import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';
import { recordSubscription } from '../helpers/subscriptions';
import { unredactedProject } from './helpers';

const greeter = {
  name: 'Greeter',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      name: 'Main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'Hello {user_id}! Write to help@example.com.', next: 'menu' },
        {
          id: 'menu',
          type: 'choice',
          buttons: [
            { label: 'Again', next: 'hello' },
            { label: 'Stop', next: 'stop' },
          ],
        },
        { id: 'stop', type: 'end' },
      ],
    },
  ],
};

describeEachDatabase("the runtime's turns in transcripts", (provider) => {
  const t = useTestApp(provider);

  it('records each turn of a session into its transcript, redacted, with one history entry per turn', async () => {
    const p = await unredactedProject(t.app);
    await publish(t.app, p.projectID, greeter);
    const launch = await interact(t.app, p.apiKey, p.projectID, 'ann', { action: { type: 'launch' } });
    expect(launch.status).toBe(200);
    const choice = (launch.body as { type: string; payload: { buttons: { name: string; request: unknown }[] } }[]).find(
      (trace) => trace.type === 'choice',
    )!;
    const stop = choice.payload.buttons.find((b) => b.name === 'Stop')!.request;
    expect((await interact(t.app, p.apiKey, p.projectID, 'ann', { action: stop })).status).toBe(200);
    await interact(t.app, p.apiKey, p.projectID, 'bob', { action: { type: 'launch' } });

    const search = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      body: { userID: 'ann' },
    });
    expect(search.body.transcripts).toHaveLength(1);
    const got = await t.app.http('GET', `/v1/transcript/${search.body.transcripts[0].id}`, {
      key: p.apiKey,
      query: { filterConversation: 'true', customTraceTypes: 'choice' },
    });
    const transcript = got.body.transcript;
    expect(transcript).toMatchObject({
      userID: 'ann',
      environmentID: p.environments.find((e) => e.alias === 'development')!.id,
    });
    expect(transcript.history).toHaveLength(2);
    const shown = transcript.logs.map((l: { type: string; data: { type: string; payload: { message?: string } } }) =>
      l.type === 'action' ? `action:${l.data.type}` : `${l.data.type}:${l.data.payload?.message ?? ''}`,
    );
    expect(shown).toEqual([
      'action:launch',
      'text:Hello ann! Write to [email].',
      'choice:',
      expect.stringMatching(/^action:/),
    ]);
    // Without the filter the end of the conversation is there too.
    const all = await t.app.http('GET', `/v1/transcript/${transcript.id}`, { key: p.apiKey });
    expect(all.body.transcript.logs.at(-1).type).toBe('end');
    const original = await t.app.http('GET', `/v1/transcript/${transcript.id}`, {
      key: p.apiKey,
      query: { unredacted: 'true' },
    });
    expect(JSON.stringify(original.body.transcript.logs)).toContain('help@example.com');

    const everyone = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, { key: p.apiKey });
    expect(everyone.body.transcripts.map((x: { userID: string }) => x.userID).sort()).toEqual(['ann', 'bob']);
  });
  it('shows a live transcript growing, turn by turn, to a GraphQL subscriber', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, greeter);
    expect((await interact(t.app, p.apiKey, p.projectID, 'cy', { action: { type: 'launch' } })).status).toBe(200);
    const found = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      body: { userID: 'cy' },
    });
    const transcriptID = found.body.transcripts[0].id;
    interface Event {
      data?: {
        transcriptEvents: { kind: string; logs: { type: string; data: { type: string } }[]; result: unknown };
      };
      errors?: unknown[];
    }
    const sub = recordSubscription<Event>(t.app, {
      // `result` is asked too: a `logs` event answers it null, without an error.
      query:
        'subscription($id: ID!) { transcriptEvents(transcriptID: $id) { kind logs { type data } result { id cost } } }',
      variables: { id: transcriptID },
      key: p.apiKey,
      singleConnection: true,
    });
    try {
      // Every turn (a word the choice step does not understand) appends its action and traces.
      const say = () => interact(t.app, p.apiKey, p.projectID, 'cy', { action: { type: 'text', payload: 'hmm' } });
      await sub.prime(say);
      const before = sub.events.length;
      await say();
      const events = await sub.waitFor((e) => e.length > before);
      expect(events.at(-1)!.errors).toBeUndefined();
      const last = events.at(-1)!.data!.transcriptEvents;
      expect(last.kind).toBe('logs');
      expect(last.result).toBeNull();
      expect(last.logs[0]).toMatchObject({ type: 'action', data: { type: 'text' } });
      expect(last.logs.slice(1).every((l) => l.type === 'trace')).toBe(true);
    } finally {
      sub.close();
    }
  });
});
