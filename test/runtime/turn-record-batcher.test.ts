import { expect, it } from 'vitest';
import { TURN_RECORD_QUEUE } from '../../src/runtime/turn-outbox';
import type { TurnRecorder } from '../../src/runtime/turn-record';
import { type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';

/**
 * Group commit of turn records (src/runtime/turn-record-batcher.ts): turns that finish while a
 * batch is written are recorded together in one transaction, each exactly once and in order per
 * user; a user with an outbox entry the batcher does not hold is recorded the ordinary way, that
 * entry first.
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

/** Wraps the default recorder, keeping its batches: counts batch sizes, fails the next `failNext` calls. */
function watched() {
  const control = { batches: [] as number[], failNext: 0 };
  const failing = () => {
    if (control.failNext > 0) {
      control.failNext--;
      throw new Error('the database went away');
    }
  };
  const wrap = (base: TurnRecorder): TurnRecorder => ({
    async record(turn) {
      failing();
      await base.record(turn);
    },
    async recordBatch(tx, turns) {
      failing();
      control.batches.push(turns.length);
      return base.recordBatch!(tx, turns);
    },
  });
  return { control, wrap };
}

describeEachDatabase('group commit of turn records', (provider) => {
  const recorder = watched();
  const t = useTestApp(provider, { services: { turnRecorder: recorder.wrap } });

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

  /** The user's action logs (what was said), in log order over their transcripts. */
  async function saidBy(p: TestProject, user: string): Promise<string[]> {
    const logs = await t.app.services.db.prisma.transcriptLog.findMany({
      where: { type: 'action', transcript: { projectId: p.projectID, userId: user } },
      orderBy: [{ transcript: { createdAt: 'asc' } }, { seq: 'asc' }],
      select: { data: true },
    });
    return logs.map((l) => {
      const action = l.data as { type: string; payload?: string };
      return action.type === 'launch' ? 'launch' : String(action.payload);
    });
  }

  const interactions = (p: TestProject) =>
    t.app.services.db.prisma.usageEvent.count({ where: { projectId: p.projectID, kind: 'interaction' } });
  const outbox = (p: TestProject) =>
    t.app.services.db.prisma.job.count({ where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID } });

  it('records the turns of many users at once in shared batches, each once and in order', async () => {
    const p = await setup();
    recorder.control.batches = [];
    const users = Array.from({ length: 12 }, (_v, i) => `u${i}`);
    const script = ['launch', 'one', 'two', 'three'];
    await Promise.all(
      users.map(async (user) => {
        for (const said of script) await say(p, user, said);
      }),
    );
    for (const user of users) expect(await saidBy(p, user), user).toEqual(script);
    expect(await interactions(p)).toBe(users.length * script.length);
    expect(await outbox(p)).toBe(0);
    // Every turn went through a batch. On PostgreSQL, whose commits are round trips on a pool of
    // connections, turns finish while a batch is written and share the next one; SQLite's one
    // connection runs the turns' commits and the batches one after another, so there a batch
    // rarely finds more than one turn waiting (docs/performance.md "Turn path").
    expect(recorder.control.batches.reduce((a, b) => a + b, 0)).toBe(users.length * script.length);
    if (provider === 'postgresql') expect(Math.max(...recorder.control.batches)).toBeGreaterThan(1);
  });

  it('records an entry it does not hold before the same user’s next turn, and a failed batch turn by turn', async () => {
    const p = await setup();
    await say(p, 'ann', 'launch');
    // The batch and the three tries of the ordinary path fail: the turn stays in the outbox.
    recorder.control.failNext = 4;
    await say(p, 'ann', 'one');
    expect(recorder.control.failNext).toBe(0);
    expect(await outbox(p)).toBe(1);
    expect(await saidBy(p, 'ann')).toEqual(['launch']);

    // The next turn finds that entry, held by no batch: the user's turns are recorded in order.
    recorder.control.batches = [];
    await say(p, 'ann', 'two');
    expect(await saidBy(p, 'ann')).toEqual(['launch', 'one', 'two']);
    expect(recorder.control.batches).toEqual([]);
    expect(await outbox(p)).toBe(0);

    // A batch that fails once is recorded turn by turn, still once each.
    recorder.control.failNext = 1;
    await say(p, 'ann', 'three');
    expect(await saidBy(p, 'ann')).toEqual(['launch', 'one', 'two', 'three']);
    await say(p, 'ann', 'four');
    expect(await saidBy(p, 'ann')).toEqual(['launch', 'one', 'two', 'three', 'four']);
    expect(recorder.control.batches).toEqual([1]);
    expect(await interactions(p)).toBe(5);
    expect(await outbox(p)).toBe(0);
  });
});
