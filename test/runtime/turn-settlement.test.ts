import { expect, it } from 'vitest';
import { z } from 'zod';
import { defineStepType } from '../../src/runtime/steps/step-type';
import { TURN_RECORD_QUEUE } from '../../src/runtime/turn-outbox';
import type { TurnRecord } from '../../src/runtime/turn-record';
import { type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, recordingRecorder, stream, v2StreamPath } from '../helpers/runtime';
import { dataOf } from '../helpers/sse';

/**
 * How a turn settles on each of its failure paths (src/runtime/turn-settlement.ts), through real
 * HTTP turns: a step throws, the state commit fails, the client goes away, the time limit, the
 * wait for another turn's lease. On every path the client gets its traces and `end`, the turn is
 * recorded exactly once with what happened, nothing is left in the turn outbox, the user's lease
 * is free (the next turn runs), and the state is the committed one or the one from before.
 */

/** A step that fails the way a bug would. */
const boomStep = defineStepType<{ id: string; type: 'boom'; next?: string }>({
  type: 'boom',
  description: 'test: throws',
  schema: z.strictObject({ id: z.string(), type: z.literal('boom'), next: z.string().optional() }),
  exits: (step) => [{ field: 'next', target: step.next }],
  async run() {
    throw new Error('kaboom: a step went wrong');
  },
});

/** Counts the turns that reached `menu`; "Boom" throws, "Nap" sleeps past the time limit, "Slow" says a word first. */
const program = {
  name: 'Settler',
  startFlow: 'main',
  variables: [{ name: 'n', default: 0 }],
  flows: [
    {
      id: 'main',
      start: 'count',
      steps: [
        { id: 'count', type: 'set', assignments: [{ variable: 'n', value: 'n + 1' }], next: 'hello' },
        { id: 'hello', type: 'message', message: 'Hello!', next: 'menu' },
        {
          id: 'menu',
          type: 'choice',
          buttons: [
            { label: 'Again', next: 'count' },
            { label: 'Boom', next: 'bad' },
            { label: 'Nap', next: 'nap' },
            { label: 'Slow', next: 'wait-a-moment' },
          ],
        },
        { id: 'bad', type: 'boom', next: 'count' },
        { id: 'nap', type: 'wait', ms: 120_000, next: 'count' },
        { id: 'wait-a-moment', type: 'message', message: 'One moment…', next: 'pause' },
        { id: 'pause', type: 'wait', ms: 600, next: 'count' },
      ],
    },
  ],
};

/** Refuses (in the database itself) any state write that holds this marker: a commit that fails. */
const poison = 'poison-marker-7f3a';

interface TraceData {
  type: string;
  payload: { type?: string; message?: string } | null;
}

describeEachDatabase('settling a turn', (provider) => {
  const recorder = recordingRecorder();
  const t = useTestApp(provider, {
    env: { RUNTIME_TURN_TIMEOUT_MS: '3000', RUNTIME_LOCK_WAIT_MS: '300' },
    services: { turnRecorder: recorder, extraStepTypes: [boomStep] },
  });

  async function setup(): Promise<TestProject> {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, program);
    return p;
  }

  const say = (p: TestProject, user: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    stream(t.app, v2StreamPath(p.projectID, user), {
      key: p.apiKey,
      body,
      signal,
      ...(signal ? { until: (frame) => Boolean(frame.data && JSON.parse(frame.data).type === 'text') } : {}),
    });

  const launch = async (p: TestProject, user: string) => {
    const { reading } = await say(p, user, { action: { type: 'launch' } });
    expect(reading.frames.at(-1)?.event).toBe('end');
  };

  const stateOf = async (p: TestProject, user: string) => {
    const res = await t.app.http('GET', `/v2/project/${p.projectID}/user/${user}/state`, { key: p.apiKey });
    expect(res.status).toBe(200);
    return res.body as { variables: Record<string, unknown>; stack: { nodeID: string }[] };
  };

  const recordsOf = (p: TestProject, user: string): TurnRecord[] =>
    recorder.records.filter((r) => r.projectID === p.projectID && r.userID === user);

  /** Polls `check` until it holds (a turn whose client left settles after the client is gone). */
  async function eventually(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`not settled in ${ms} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Every settled turn: recorded once, no outbox entry left, the user's lease free. */
  async function expectSettled(p: TestProject, user: string, turns: number): Promise<TurnRecord> {
    const { prisma } = t.app.services.db;
    const outboxEntries = () => prisma.job.count({ where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID } });
    const row = () => prisma.runtimeState.findFirst({ where: { projectId: p.projectID, userId: user } });
    await eventually(async () => recordsOf(p, user).length >= turns, 'recorded');
    await eventually(async () => (await outboxEntries()) === 0, 'the outbox drained');
    await eventually(async () => ((await row())?.lockToken ?? null) === null, 'the lease freed');
    expect(recordsOf(p, user)).toHaveLength(turns);
    return recordsOf(p, user).at(-1)!;
  }

  /** The lease is free for real: the user's next turn runs and saves. */
  async function expectNextTurnRuns(p: TestProject, user: string, turns: number) {
    const before = (await stateOf(p, user)).variables.n as number;
    await say(p, user, { action: { type: 'text', payload: 'Again' } });
    const next = await expectSettled(p, user, turns + 1);
    expect(next).toMatchObject({ outcome: 'completed', stateSaved: true });
    expect((await stateOf(p, user)).variables.n).toBe(before + 1);
  }

  it('a step throws: the state stays as it was, the error goes to the client and the record', async () => {
    const p = await setup();
    await launch(p, 'ann');
    const before = await stateOf(p, 'ann');
    const { reading } = await say(p, 'ann', { action: { type: 'text', payload: 'Boom' } });
    const traces = dataOf<TraceData>(reading, 'trace');
    expect(traces.at(-1)).toMatchObject({
      type: 'debug',
      payload: { type: 'error', message: expect.stringContaining('kaboom') },
    });
    expect(reading.frames.at(-1)?.event).toBe('end');
    const record = await expectSettled(p, 'ann', 2);
    expect(record).toMatchObject({
      outcome: 'failed',
      success: false,
      stateSaved: false,
      clientDisconnected: false,
      error: expect.stringContaining('kaboom'),
    });
    expect(record.traces.at(-1)).toMatchObject({ type: 'debug', payload: { type: 'error' } });
    expect(await stateOf(p, 'ann')).toEqual(before);
    await expectNextTurnRuns(p, 'ann', 2);
  });

  it('the state commit fails: nothing of the turn is saved, the turn is recorded as failed, the lease is freed', async () => {
    const p = await setup();
    const { prisma } = t.app.services.db;
    if (provider === 'postgresql') {
      await prisma.$executeRawUnsafe(`CREATE OR REPLACE FUNCTION refuse_poisoned_state() RETURNS trigger AS $$
        BEGIN
          IF NEW."state"::text LIKE '%${poison}%' THEN RAISE EXCEPTION 'state write refused by the test trigger'; END IF;
          RETURN NEW;
        END $$ LANGUAGE plpgsql`);
      await prisma.$executeRawUnsafe(`CREATE TRIGGER refuse_poisoned_state BEFORE UPDATE ON "RuntimeState"
        FOR EACH ROW EXECUTE FUNCTION refuse_poisoned_state()`);
    } else {
      await prisma.$executeRawUnsafe(`CREATE TRIGGER refuse_poisoned_state BEFORE UPDATE ON "RuntimeState"
        WHEN NEW."state" LIKE '%${poison}%'
        BEGIN SELECT RAISE(ABORT, 'state write refused by the test trigger'); END`);
    }
    try {
      await launch(p, 'bo');
      const before = await stateOf(p, 'bo');
      // The request's variables go into the new state, so its commit is refused.
      const { reading } = await say(p, 'bo', {
        action: { type: 'text', payload: 'Again' },
        variables: { mood: poison },
      });
      const traces = dataOf<TraceData>(reading, 'trace');
      expect(traces.map((d) => d.type)).toContain('text');
      expect(traces.at(-1)).toMatchObject({
        type: 'debug',
        payload: {
          type: 'error',
          message: expect.stringMatching(/^The turn failed unexpectedly; quote turn [0-9a-f]{24}/),
        },
      });
      expect(reading.frames.at(-1)?.event).toBe('end');
      const record = await expectSettled(p, 'bo', 2);
      expect(record).toMatchObject({
        outcome: 'failed',
        success: false,
        stateSaved: false,
        requestVariables: { mood: poison },
      });
      // The database's error, as the driver words it.
      expect(record.error).toMatch(/state write refused by the test trigger/);
      // Neither the state nor an outbox entry of the rolled-back transaction is there.
      expect(await stateOf(p, 'bo')).toEqual(before);
      await expectNextTurnRuns(p, 'bo', 2);
    } finally {
      await prisma.$executeRawUnsafe(
        `DROP TRIGGER IF EXISTS refuse_poisoned_state${provider === 'postgresql' ? ' ON "RuntimeState"' : ''}`,
      );
    }
  });

  it('the client goes away: the turn runs to its end, is saved and recorded as disconnected', async () => {
    const p = await setup();
    await launch(p, 'cy');
    const controller = new AbortController();
    const { reading } = await say(p, 'cy', { action: { type: 'text', payload: 'Slow' } }, controller.signal);
    controller.abort();
    expect(reading.frames.some((f) => f.event === 'end')).toBe(false);
    const record = await expectSettled(p, 'cy', 2);
    expect(record).toMatchObject({ outcome: 'completed', success: true, stateSaved: true, clientDisconnected: true });
    const state = await stateOf(p, 'cy');
    expect(state.variables.n).toBe(2);
    expect(state.stack[0]).toMatchObject({ nodeID: 'menu' });
    await expectNextTurnRuns(p, 'cy', 2);
  });

  it('the time limit stops the turn: the state stays as it was, a timeout trace and record', async () => {
    const p = await setup();
    await launch(p, 'di');
    const before = await stateOf(p, 'di');
    const { reading } = await say(p, 'di', { action: { type: 'text', payload: 'Nap' } });
    expect(dataOf<TraceData>(reading, 'trace').at(-1)).toMatchObject({
      type: 'debug',
      payload: { type: 'timeout', message: expect.stringContaining('3000 ms') },
    });
    expect(reading.frames.at(-1)?.event).toBe('end');
    const record = await expectSettled(p, 'di', 2);
    expect(record).toMatchObject({ outcome: 'timeout', success: false, stateSaved: false });
    expect(record.error).toContain('3000 ms');
    expect(await stateOf(p, 'di')).toEqual(before);
    await expectNextTurnRuns(p, 'di', 2);
  });

  it('the wait for another turn’s lease runs out: the turn fails without touching the lease it never held', async () => {
    const p = await setup();
    await launch(p, 'ed');
    const before = await stateOf(p, 'ed');
    const environmentId = p.environments.find((e) => e.alias === 'development')!.id;
    // Someone else (another turn, another instance) holds the user's lease past the wait.
    const { states } = t.app.services.runtime;
    const held = await states.acquire({ projectId: p.projectID, environmentId, userId: 'ed' });
    try {
      const { reading } = await say(p, 'ed', { action: { type: 'text', payload: 'Again' } });
      expect(dataOf<TraceData>(reading, 'trace')).toEqual([
        expect.objectContaining({
          type: 'debug',
          payload: { type: 'error', message: 'Another turn of this user is still running; try again shortly.' },
        }),
      ]);
      expect(reading.frames.at(-1)?.event).toBe('end');
      await recorder.waitFor((r) => r.projectID === p.projectID && r.userID === 'ed' && r.outcome === 'failed');
      const record = recordsOf(p, 'ed').at(-1)!;
      expect(recordsOf(p, 'ed')).toHaveLength(2);
      expect(record).toMatchObject({
        outcome: 'failed',
        stateSaved: false,
        sessionID: '',
        error: 'Another turn of this user is still running; try again shortly.',
      });
      expect(
        await t.app.services.db.prisma.job.count({ where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID } }),
      ).toBe(0);
      // The lease is still the holder's: the failed turn did not free it.
      const row = await t.app.services.db.prisma.runtimeState.findFirst({
        where: { projectId: p.projectID, userId: 'ed' },
      });
      expect(row?.lockToken).toBe(held.token);
    } finally {
      await states.release(held);
    }
    expect(await stateOf(p, 'ed')).toEqual(before);
    await expectSettled(p, 'ed', 2);
    await expectNextTurnRuns(p, 'ed', 2);
  });
});
