import { expect, it } from 'vitest';
import { TURN_RECORD_QUEUE } from '../../src/runtime/turn-outbox';
import type { TurnRecorder } from '../../src/runtime/turn-record';
import { type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';
import { usageRest } from '../helpers/usage';

/**
 * A turn's transcript logs and usage events survive a recorder that fails (audit finding 5): the
 * turn is recorded again (the recorders are idempotent per turn), or stays in the turn outbox, from
 * which the user's next turn or the job runner records it, always before the user's later turns.
 */

const greeter = {
  name: 'Greeter',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'Hello!', next: 'menu' },
        {
          id: 'menu',
          type: 'choice',
          buttons: [{ label: 'Again', next: 'hello' }],
          noMatch: { reprompts: ['Pick a button.'] },
        },
      ],
    },
  ],
};

/** Wraps the default recorder: fails the next `failNext` calls, and every call while `down`. */
function flaky() {
  const control = {
    failNext: 0,
    down: false,
    /** Fail after the default recorder has written everything (a lost reply), instead of before. */
    afterWriting: false,
    calls: 0,
    failures: 0,
  };
  const wrap = (base: TurnRecorder): TurnRecorder => ({
    async record(turn) {
      control.calls++;
      const fail = control.down || control.failNext > 0;
      if (control.failNext > 0) control.failNext--;
      if (fail && !control.afterWriting) {
        control.failures++;
        throw new Error('the database went away');
      }
      await base.record(turn);
      if (fail) {
        control.failures++;
        throw new Error('the connection dropped before the commit was acknowledged');
      }
    },
  });
  return { control, wrap };
}

describeEachDatabase('recording turns durably and in order', (provider) => {
  const recorder = flaky();
  const t = useTestApp(provider, { env: { JOB_POLL_MS: '50' }, services: { turnRecorder: recorder.wrap } });

  async function setup(): Promise<TestProject> {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, greeter);
    return p;
  }

  const say = async (p: TestProject, user: string, payload: string) => {
    const action = payload === 'launch' ? { type: 'launch' } : { type: 'text', payload };
    const res = await interact(t.app, p.apiKey, p.projectID, user, { action });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  /** The user's transcript as `action:<what was said>` and `trace:<type>` lines, in log order. */
  async function transcriptOf(p: TestProject, user: string): Promise<string[]> {
    const found = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: p.apiKey,
      body: { userID: user },
    });
    if (found.body.transcripts.length === 0) return [];
    const got = await t.app.http('GET', `/v1/transcript/${found.body.transcripts[0].id}`, {
      key: p.apiKey,
      query: { filterConversation: 'true', customTraceTypes: 'choice' },
    });
    return got.body.transcript.logs.map((l: { type: string; data: { type: string; payload?: unknown } }) =>
      l.type === 'action' ? `action:${l.data.payload ?? l.data.type}` : `trace:${l.data.type}`,
    );
  }

  /** What one turn of the greeter shows: its action, then its text and choice traces. */
  const turn = (said: string) => [`action:${said}`, 'trace:text', 'trace:choice'];

  const outbox = (p: TestProject) =>
    t.app.services.db.prisma.job.findMany({
      where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID },
      orderBy: { createdAt: 'asc' },
    });

  async function interactions(p: TestProject): Promise<number> {
    const res = await usageRest(t.app, p.apiKey, { name: 'interactions', filter: { projectID: p.projectID } });
    return (res.body.result.items as { count: number }[]).reduce((n, i) => n + i.count, 0);
  }

  it('records a turn whose first write failed, and one whose write succeeded but reported a failure, once each', async () => {
    const p = await setup();
    recorder.control.failNext = 1;
    const failuresBefore = recorder.control.failures;
    await say(p, 'ann', 'launch');
    expect(recorder.control.failures).toBe(failuresBefore + 1);
    expect(await transcriptOf(p, 'ann')).toEqual(turn('launch'));

    recorder.control.failNext = 1;
    recorder.control.afterWriting = true;
    try {
      await say(p, 'ann', 'one');
    } finally {
      recorder.control.afterWriting = false;
    }
    expect(recorder.control.failures).toBe(failuresBefore + 2);
    await say(p, 'ann', 'two');
    expect(await transcriptOf(p, 'ann')).toEqual([
      ...turn('launch'),
      'action:one',
      'trace:text',
      'trace:choice',
      'action:two',
      'trace:text',
      'trace:choice',
    ]);
    // Usage counted each turn once, the one recorded twice included; nothing is left in the outbox.
    expect(await interactions(p)).toBe(3);
    expect(await outbox(p)).toEqual([]);
  });

  it('keeps a turn it cannot record in the outbox, and records it before the same user’s next turn', async () => {
    const p = await setup();
    await say(p, 'bo', 'launch');
    recorder.control.down = true;
    try {
      await say(p, 'bo', 'one');
      // The client had its answer; the turn waits in the outbox, its transcript logs not written.
      expect(await transcriptOf(p, 'bo')).toEqual(turn('launch'));
      const waiting = await outbox(p);
      expect(waiting).toHaveLength(1);
      expect(waiting[0]!.status).toBe('queued');
    } finally {
      recorder.control.down = false;
    }
    await say(p, 'bo', 'two');
    expect(await transcriptOf(p, 'bo')).toEqual([
      ...turn('launch'),
      ...['action:one', 'trace:text', 'trace:choice'],
      ...['action:two', 'trace:text', 'trace:choice'],
    ]);
    expect(await interactions(p)).toBe(3);
    expect(await outbox(p)).toEqual([]);
  });

  it('records turns left in the outbox from the job runner, in order, when no next turn comes', async () => {
    const p = await setup();
    recorder.control.down = true;
    try {
      await say(p, 'cy', 'launch');
      await say(p, 'cy', 'one');
      await say(p, 'cy', 'two');
    } finally {
      recorder.control.down = false;
    }
    expect(await transcriptOf(p, 'cy')).toEqual([]);
    const waiting = await outbox(p);
    expect(waiting).toHaveLength(3);
    // As if the process that ran the turns had died: the runner takes the entries over (now,
    // rather than after the grace period), two at a time, the later ones first.
    const db = t.app.services.db.prisma;
    for (const [i, job] of [...waiting].reverse().entries()) {
      await db.job.update({ where: { id: job.id }, data: { runAt: new Date(Date.now() - 1000 * (3 - i)) } });
    }
    t.app.services.jobs.wake();
    await expect.poll(() => transcriptOf(p, 'cy'), { timeout: 20_000 }).toHaveLength(9);
    expect(await transcriptOf(p, 'cy')).toEqual([...turn('launch'), ...turn('one'), ...turn('two')]);
    await t.app.services.jobs.drain();
    expect(await interactions(p)).toBe(3);
    expect((await outbox(p)).filter((j) => j.status !== 'done')).toEqual([]);
  });
});
