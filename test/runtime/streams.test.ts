import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { defineStepType } from '../../src/runtime/steps/step-type';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { type LocalApi, publish, recordingRecorder, startLocalApi, stream, v2StreamPath } from '../helpers/runtime';
import { dataOf } from '../helpers/sse';
import { recordSubscription } from '../helpers/subscriptions';

/**
 * The wire format of the runtime streams (SPEC.md "Streaming interaction", DECISIONS.md §6),
 * through real HTTP and a real SSE parser, and what a turn does when it fails, loops, runs out of
 * time or loses its client.
 */

/** A stand-in for the AI steps of a later issue: streams a model answer through ctx.completion. */
const fakeAiStep = defineStepType<{ id: string; type: 'fake-ai'; pieces: string[]; next?: string }>({
  type: 'fake-ai',
  description: 'test: streams a fixed answer in pieces',
  schema: z.strictObject({
    id: z.string(),
    type: z.literal('fake-ai'),
    pieces: z.array(z.string()),
    next: z.string().optional(),
  }),
  exits: (step) => [{ field: 'next', target: step.next }],
  async run(step, ctx) {
    const answer = ctx.completion({ model: 'fake-model-1' });
    for (const piece of step.pieces) {
      answer.content(piece);
      await sleep(2);
    }
    answer.end({ answer: 7, query: 3, total: 10 });
    return { kind: 'next', target: step.next };
  },
});

/** A step that fails the way a bug would. */
const boomStep = defineStepType<{ id: string; type: 'boom' }>({
  type: 'boom',
  description: 'test: throws',
  schema: z.strictObject({ id: z.string(), type: z.literal('boom') }),
  exits: () => [],
  async run() {
    throw new Error('kaboom: internal detail');
  },
});

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface TraceData {
  type: string;
  payload: Record<string, unknown> | null;
  time?: number;
}

/**
 * A client-facing trace as the turn record keeps it: text traces without the `slate` the
 * outputs add (checked to be the message's rich text).
 */
function withoutSlate(trace: TraceData): TraceData {
  if (trace.type !== 'text' || !trace.payload) return trace;
  const { slate, ...payload } = trace.payload as {
    slate?: { content: { children: { text: string }[] }[] };
    message?: string;
  };
  expect(slate?.content.map((p) => p.children.map((c) => c.text).join('')).join('\n')).toBe(payload.message);
  return { ...trace, payload };
}

describeEachDatabase('runtime streams', (provider) => {
  const recorder = recordingRecorder();
  const t = useTestApp(provider, {
    env: { SSE_KEEPALIVE_MS: '100', RUNTIME_TURN_TIMEOUT_MS: '4000', RUNTIME_STEP_LIMIT: '50' },
    services: { turnRecorder: recorder, extraStepTypes: [fakeAiStep, boomStep] },
  });
  let api: LocalApi;
  beforeAll(async () => {
    api = await startLocalApi((req) =>
      req.url.startsWith('/slow')
        ? { status: 200, body: { ok: true, status: 'shipped' }, delayMs: 2000 }
        : { status: 200, body: { ok: true } },
    );
  });
  afterAll(async () => {
    await api?.close();
  });

  async function projectWith(program: Record<string, unknown>) {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, program);
    return p;
  }

  const greeter = {
    name: 'Greeter',
    startFlow: 'main',
    variables: [{ name: 'visits', default: 0 }],
    flows: [
      {
        id: 'main',
        name: 'Main',
        start: 'hello',
        steps: [
          { id: 'hello', type: 'message', message: 'Hello {user_id}!', next: 'count' },
          { id: 'count', type: 'set', assignments: [{ variable: 'visits', value: 'visits + 1' }], next: 'second' },
          { id: 'second', type: 'message', message: 'Visit number {visits}.', next: 'menu' },
          { id: 'menu', type: 'choice', buttons: [{ label: 'Again', next: 'hello' }] },
        ],
      },
    ],
  };

  it('v2: event-stream headers, traces with ids 1..n as each step runs, then end with the next id and no data', async () => {
    const p = await projectWith(greeter);
    const { response, reading } = await stream(t.app, v2StreamPath(p.projectID, 'ann'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('cache-control')).toBe('no-cache');
    expect(response.headers.get('x-accel-buffering')).toBe('no');

    const { frames } = reading;
    const last = frames.at(-1)!;
    expect(last).toMatchObject({ event: 'end', id: String(frames.length), data: undefined });
    const traces = frames.slice(0, -1);
    expect(traces.map((f) => f.id)).toEqual(traces.map((_f, i) => String(i + 1)));
    expect(traces.every((f) => f.event === 'trace')).toBe(true);
    // eventsource-parser dispatches every trace; the data-less end is beyond it (see helpers/sse.ts).
    expect(reading.dispatched.map((m) => m.id)).toEqual(traces.map((f) => f.id));

    const data = dataOf<TraceData>(reading, 'trace');
    for (const trace of data) {
      expect(Object.keys(trace).sort()).toEqual(['payload', 'time', 'type']);
      expect(typeof trace.time).toBe('number');
    }
    expect(data.filter((d) => d.type === 'text').map((d) => d.payload?.message)).toEqual([
      'Hello ann!',
      'Visit number 1.',
    ]);
    expect(data.map((d) => d.type)).toEqual(['flow', 'block', 'text', 'block', 'block', 'text', 'block', 'choice']);
    expect(data[0]).toMatchObject({ type: 'flow', payload: { diagramID: 'main', name: 'Main' } });
    const choice = data.at(-1)!;
    expect(choice.payload).toEqual({
      buttons: [
        { name: 'Again', request: { type: expect.stringMatching(/^path-[0-9a-f]{10}$/), payload: { label: 'Again' } } },
      ],
    });
    // Times never go backwards.
    const times = data.map((d) => d.time!);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it('v2 with state=true sends the user state (after the turn) before end, in the id sequence', async () => {
    const p = await projectWith(greeter);
    await stream(t.app, v2StreamPath(p.projectID, 'bea'), { key: p.apiKey, body: { action: { type: 'launch' } } });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'bea'), {
      key: p.apiKey,
      body: { action: { type: 'text', payload: 'again' } },
      query: { state: 'true' },
    });
    const { frames } = reading;
    const [state, end] = frames.slice(-2);
    expect(state!.event).toBe('state');
    expect(state!.id).toBe(String(frames.length - 1));
    expect(end).toMatchObject({ event: 'end', id: String(frames.length), data: undefined });
    const body = JSON.parse(state!.data!);
    expect(body.variables).toMatchObject({ visits: 2, user_id: 'bea', last_utterance: 'again', sessions: 1 });
    expect(body.stack).toEqual([
      { programID: 'main', diagramID: 'main', nodeID: 'menu', variables: {}, storage: { waiting: true } },
    ]);
  });

  it('beta: a retry line, UUID ids, wrapped traces without time, then state and end', async () => {
    const p = await projectWith(greeter);
    const { response, reading } = await stream(t.app, `/v2beta1/interact/${p.projectID}/development/stream`, {
      key: p.apiKey,
      body: { action: { type: 'launch' }, session: { userID: 'cleo', sessionID: 'session-1' } },
    });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    expect(reading.retries).toEqual([3000]);
    const { frames } = reading;
    expect(frames.every((f) => uuid.test(f.id ?? ''))).toBe(true);
    expect(new Set(frames.map((f) => f.id)).size).toBe(frames.length);
    expect(frames.map((f) => f.event)).toEqual([...Array(frames.length - 2).fill('trace'), 'state', 'end']);
    const traces = dataOf<{ type: string; trace: TraceData }>(reading, 'trace');
    for (const d of traces) {
      expect(d.type).toBe('trace');
      expect(Object.keys(d.trace).sort()).toEqual(['payload', 'type']);
    }
    expect(traces.filter((d) => d.trace.type === 'text').map((d) => d.trace.payload?.message)).toEqual([
      'Hello cleo!',
      'Visit number 1.',
    ]);
    const state = dataOf<{ type: string; state: { variables: Record<string, unknown> } }>(reading, 'state')[0]!;
    expect(state.type).toBe('state');
    expect(state.state.variables.visits).toBe(1);
    expect(dataOf(reading, 'end')).toEqual([{ type: 'end' }]);
  });

  it('streams a model answer as completion events: merged text (v2), completion traces, beta completion-*, merged (non-stream)', async () => {
    const p = await projectWith({
      name: 'AI',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'answer',
          steps: [
            { id: 'answer', type: 'fake-ai', pieces: ['Hel', 'lo ', 'there'], next: 'after' },
            { id: 'after', type: 'message', message: 'You said it: {last_response}' },
          ],
        },
      ],
    });
    const launch = { action: { type: 'launch' } };
    const plain = dataOf<TraceData>(
      (await stream(t.app, v2StreamPath(p.projectID, 'ai1'), { key: p.apiKey, body: launch })).reading,
      'trace',
    );
    expect(plain.filter((d) => d.type === 'text').map((d) => withoutSlate(d).payload)).toEqual([
      { message: 'Hello there', ai: true },
      { message: 'You said it: Hello there' },
    ]);
    expect(plain.some((d) => d.type === 'completion')).toBe(false);

    const events = dataOf<TraceData>(
      (
        await stream(t.app, v2StreamPath(p.projectID, 'ai2'), {
          key: p.apiKey,
          body: launch,
          query: { completion_events: 'true' },
        })
      ).reading,
      'trace',
    ).filter((d) => d.type === 'completion');
    expect(events.map((d) => d.payload)).toEqual([
      { state: 'start' },
      { state: 'content', content: 'Hel' },
      { state: 'content', content: 'lo ' },
      { state: 'content', content: 'there' },
      { state: 'end', tokens: { answer: 7, query: 3, total: 10 } },
    ]);

    const beta = dataOf<{ trace: TraceData }>(
      (
        await stream(t.app, `/v2beta1/interact/${p.projectID}/development/stream`, {
          key: p.apiKey,
          body: { ...launch, session: { userID: 'ai3', sessionID: 's' } },
        })
      ).reading,
      'trace',
    )
      .map((d) => d.trace)
      .filter((tr) => tr.type.startsWith('completion'));
    expect(beta).toEqual([
      {
        type: 'completion-start',
        payload: { completion: 'Hel', type: 'text', tokens: { model: 'fake-model-1', answer: 0, query: 0, total: 0 } },
      },
      { type: 'completion-continue', payload: { completion: 'lo ', tokens: { answer: 0, query: 0, total: 0 } } },
      { type: 'completion-continue', payload: { completion: 'there', tokens: { answer: 0, query: 0, total: 0 } } },
      { type: 'completion-end', payload: { completion: '', tokens: { answer: 7, query: 3, total: 10 } } },
    ]);

    const nonStream = await t.app.http('POST', `/v2/project/${p.projectID}/user/ai4/interact`, {
      key: p.apiKey,
      body: launch,
    });
    expect(nonStream.status).toBe(200);
    expect(
      nonStream.body.filter((d: TraceData) => d.type === 'text').map((d: TraceData) => withoutSlate(d).payload),
    ).toEqual([{ message: 'Hello there', ai: true }, { message: 'You said it: Hello there' }]);
  });

  it('sends a message the moment its step runs: it arrives before a slow API step has its answer', async () => {
    const p = await projectWith({
      name: 'Slow',
      startFlow: 'main',
      variables: [
        { name: 'api', default: api.url },
        { name: 'status', default: null },
      ],
      flows: [
        {
          id: 'main',
          start: 'first',
          steps: [
            { id: 'first', type: 'message', message: 'Let me check…', next: 'call' },
            {
              id: 'call',
              type: 'api',
              method: 'GET',
              url: '{api}/slow/order',
              responseMappings: [{ variable: 'status', path: 'status' }],
              next: 'done',
            },
            { id: 'done', type: 'message', message: 'It is {status}.' },
          ],
        },
      ],
    });
    const before = api.requests.length;
    let firstTextAt: number | null = null;
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'dan'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
      onFrame: (frame) => {
        if (firstTextAt === null && frame.data && JSON.parse(frame.data).type === 'text')
          firstTextAt = frame.receivedAt;
      },
    });
    const call = api.requests[before]!;
    expect(call.url).toBe('/slow/order');
    expect(firstTextAt).not.toBeNull();
    expect(call.answeredAt).not.toBeNull();
    // Ordering, not speed: the client held the first message before the API had answered.
    expect(firstTextAt!).toBeLessThan(call.answeredAt!);
    const data = dataOf<TraceData>(reading, 'trace');
    expect(data.filter((d) => d.type === 'text').map((d) => d.payload?.message)).toEqual([
      'Let me check…',
      'It is shipped.',
    ]);
    expect(data.find((d) => d.type === 'debug')?.payload).toMatchObject({
      type: 'api',
      message: expect.stringContaining(`GET ${api.url}/slow/order answered 200`),
    });
    expect(data.find((d) => d.type === 'path')?.payload).toEqual({ path: 'api:success' });
  });

  it('writes the messages of in-memory steps before the turn settles: a client reads them before the end', async () => {
    const p = await projectWith({
      name: 'Quick',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'one',
          steps: [
            { id: 'one', type: 'message', message: 'One.', next: 'two' },
            { id: 'two', type: 'message', message: 'Two.' },
          ],
        },
      ],
    });
    // The raw socket reads of a client in this process: before the turn settles (saves the state,
    // records the turn) the runtime lets the event loop read sockets, so the traces arrive in a
    // read of their own, and the end in a later one. Ordering, not speed.
    const reads = await new Promise<string[]>((resolve, reject) => {
      const target = new URL(v2StreamPath(p.projectID, 'quick'), t.app.url);
      const req = request(target, {
        method: 'POST',
        headers: { authorization: p.apiKey, 'content-type': 'application/json' },
      });
      const pieces: string[] = [];
      // Each 'data' of the socket is one read (the response's own 'data' is one per chunk).
      req.on('socket', (socket) => socket.on('data', (raw: Buffer) => pieces.push(raw.toString('utf8'))));
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(pieces));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ action: { type: 'launch' } }));
    });
    const firstTrace = reads.findIndex((r) => r.includes('event: trace'));
    const end = reads.findIndex((r) => r.includes('event: end\n'));
    expect(firstTrace).toBeGreaterThanOrEqual(0);
    expect(reads[firstTrace], JSON.stringify(reads)).toContain('One.');
    expect(reads[firstTrace]).toContain('Two.');
    expect(end, JSON.stringify(reads)).toBeGreaterThan(firstTrace);
  });

  it('keeps an idle stream open with comment lines', async () => {
    const p = await projectWith({
      name: 'Idle',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'pause',
          steps: [
            { id: 'pause', type: 'wait', ms: 450, next: 'done' },
            { id: 'done', type: 'message', message: 'ok' },
          ],
        },
      ],
    });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'eve'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    expect(reading.comments.length).toBeGreaterThanOrEqual(1);
    expect(reading.frames.at(-1)?.event).toBe('end');
  });

  it('ends a turn that fails after the stream started with a debug error trace and end; the state is unchanged', async () => {
    const p = await projectWith({
      name: 'Broken',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'before', next: 'bad' },
            { id: 'bad', type: 'boom' },
          ],
        },
      ],
    });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'fay'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    const data = dataOf<TraceData>(reading, 'trace');
    expect(withoutSlate(data.find((d) => d.type === 'text')!).payload).toEqual({ message: 'before' });
    const error = data.at(-1)!;
    expect(error.type).toBe('debug');
    expect(error.payload).toMatchObject({ type: 'error', message: expect.stringContaining('kaboom') });
    expect(reading.frames.at(-1)).toMatchObject({ event: 'end', id: String(reading.frames.length), data: undefined });
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/fay/state`, { key: p.apiKey });
    expect(state.status).toBe(404);
    const record = await recorder.waitFor((r) => r.projectID === p.projectID);
    expect(record).toMatchObject({
      outcome: 'failed',
      success: false,
      stateSaved: false,
      error: expect.stringContaining('kaboom'),
    });
  });

  it('stops an endless loop at the step limit with a debug trace, and keeps the state as it was', async () => {
    const p = await projectWith({
      name: 'Loop',
      startFlow: 'main',
      variables: [{ name: 'n', default: 0 }],
      flows: [
        {
          id: 'main',
          start: 'ask',
          steps: [
            { id: 'ask', type: 'choice', buttons: [{ label: 'Loop', next: 'a' }] },
            { id: 'a', type: 'set', assignments: [{ variable: 'n', value: 'n + 1' }], next: 'b' },
            { id: 'b', type: 'goto', step: 'a' },
          ],
        },
      ],
    });
    await stream(t.app, v2StreamPath(p.projectID, 'gil'), { key: p.apiKey, body: { action: { type: 'launch' } } });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'gil'), {
      key: p.apiKey,
      body: { action: { type: 'text', payload: 'Loop' } },
    });
    const data = dataOf<TraceData>(reading, 'trace');
    expect(data.at(-1)).toMatchObject({
      type: 'debug',
      payload: { type: 'error', message: expect.stringContaining('Stopped after 50 steps') },
    });
    expect(reading.frames.at(-1)?.event).toBe('end');
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/gil/state`, { key: p.apiKey });
    expect(state.body.variables.n).toBe(0);
    expect(state.body.stack[0]).toMatchObject({ nodeID: 'ask', storage: { waiting: true } });
    const record = await recorder.waitFor((r) => r.projectID === p.projectID && r.outcome !== 'completed');
    expect(record).toMatchObject({ outcome: 'step-limit', stepsRun: 50, stateSaved: false });
  });

  it('ends a turn that runs past the time limit with a debug timeout trace and end', async () => {
    const p = await projectWith({
      name: 'Sleepy',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'zzz', next: 'nap' },
            { id: 'nap', type: 'wait', ms: 60_000 },
          ],
        },
      ],
    });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'hal'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    const data = dataOf<TraceData>(reading, 'trace');
    expect(data.at(-1)).toMatchObject({
      type: 'debug',
      payload: { type: 'timeout', message: expect.stringContaining('4000 ms') },
    });
    expect(reading.frames.at(-1)?.event).toBe('end');
    const record = await recorder.waitFor((r) => r.projectID === p.projectID);
    expect(record.outcome).toBe('timeout');
  });

  it('answers errors before the stream starts as ordinary JSON errors', async () => {
    const p = await projectWith(greeter);
    const other = await t.app.createProject();
    const unpublished = await t.app.createProject();
    const path = v2StreamPath(p.projectID, 'ivy');
    const post = (key: string | undefined, body: unknown, target = path, query?: Record<string, string>) =>
      t.app.http('POST', target, { key, body, query, headers: { accept: 'text/event-stream' } });

    const noKey = await post(undefined, { action: { type: 'launch' } });
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get('content-type')).toMatch(/^application\/json/);
    expect(noKey.body).toMatchObject({ statusCode: 401, errorCode: 'UNAUTHENTICATED' });

    const foreign = await post(other.apiKey, { action: { type: 'launch' } });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ errorCode: 'NOT_FOUND' });

    // SPEC.md does not close this body: an unknown member is ignored, a bad action is not.
    const badBody = await post(p.apiKey, { action: { type: 'text', payload: 42 }, extra: 1 });
    expect(badBody.status).toBe(400);
    expect(badBody.body.details).toEqual([{ path: 'action.payload', message: expect.any(String) }]);

    const none = await post(
      unpublished.apiKey,
      { action: { type: 'launch' } },
      v2StreamPath(unpublished.projectID, 'x'),
    );
    expect(none.status).toBe(404);
    expect(none.body.message).toMatch(/No agent is published to the environment "development"/);

    const noEnv = await post(p.apiKey, { action: { type: 'launch' } }, path, { environment: 'staging' });
    expect(noEnv.status).toBe(404);
    expect(noEnv.body.message).toBe('Environment "staging" not found');

    const noScope = await t.app.createProject({ scopes: ['analytics:read'] });
    const scoped = await post(noScope.apiKey, { action: { type: 'launch' } }, v2StreamPath(noScope.projectID, 'x'));
    expect(scoped.status).toBe(401);
    expect(scoped.body).toMatchObject({
      errorCode: 'INSUFFICIENT_SCOPE',
      message: expect.stringContaining('runtime:interact'),
    });

    const beta = await post(
      p.apiKey,
      { action: { type: 'launch' }, session: { userID: 'x' } },
      `/v2beta1/interact/${p.projectID}/development/stream`,
    );
    expect(beta.status).toBe(400);
    expect(beta.body.details).toEqual([{ path: 'session.sessionID', message: 'is required' }]);
  });

  it('finishes and saves a turn whose client disconnected mid-turn', async () => {
    const p = await projectWith({
      name: 'Leaver',
      startFlow: 'main',
      variables: [{ name: 'finished', default: false }],
      flows: [
        {
          id: 'main',
          start: 'hi',
          steps: [
            { id: 'hi', type: 'message', message: 'one moment', next: 'pause' },
            { id: 'pause', type: 'wait', ms: 600, next: 'mark' },
            { id: 'mark', type: 'set', assignments: [{ variable: 'finished', value: 'true' }], next: 'ask' },
            { id: 'ask', type: 'capture', variable: 'finished' },
          ],
        },
      ],
    });
    const controller = new AbortController();
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'jo'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
      signal: controller.signal,
      // Leave as soon as the first message is in.
      until: (frame) => Boolean(frame.data && JSON.parse(frame.data).type === 'text'),
    });
    controller.abort();
    expect(reading.frames.some((f) => f.event === 'end')).toBe(false);
    const record = await recorder.waitFor((r) => r.projectID === p.projectID);
    expect(record).toMatchObject({ outcome: 'completed', stateSaved: true, clientDisconnected: true });
    const state = await t.app.http('GET', `/v2/project/${p.projectID}/user/jo/state`, { key: p.apiKey });
    expect(state.status).toBe(200);
    expect(state.body.variables.finished).toBe(true);
    expect(state.body.stack[0]).toMatchObject({ nodeID: 'ask', storage: { waiting: true } });
  });

  it('hands the TurnRecorder a complete record of each turn before the stream ends', async () => {
    const p = await projectWith(greeter);
    const launch = await stream(t.app, v2StreamPath(p.projectID, 'lee'), {
      key: p.apiKey,
      body: { action: { type: 'launch' }, variables: { visits: 10 } },
    });
    // Recorded before `end` was sent: no waiting needed.
    const first = recorder.records.find((r) => r.projectID === p.projectID)!;
    expect(first).toMatchObject({
      projectID: p.projectID,
      environmentID: p.environments.find((e) => e.alias === 'development')!.id,
      environmentAlias: 'development',
      userID: 'lee',
      sessionID: expect.stringMatching(/^[0-9a-f]{24}$/),
      sessionStarted: true,
      agent: { agentID: expect.any(String), name: 'Greeter', versionID: expect.any(String), versionNumber: 1 },
      action: { type: 'launch' },
      interactionType: 'launch',
      requestVariables: { visits: 10 },
      outcome: 'completed',
      success: true,
      error: null,
      stateSaved: true,
      conversationEnded: false,
      clientDisconnected: false,
      stepsRun: 4,
    });
    // Every trace in order with its time: the same ones the client got, nothing filtered.
    expect(first.traces).toEqual(dataOf<TraceData>(launch.reading, 'trace').map(withoutSlate));
    expect(first.finishedAt.getTime()).toBeGreaterThanOrEqual(first.startedAt.getTime());

    const choice = dataOf<TraceData>(launch.reading, 'trace').at(-1)!;
    const button = (choice.payload!.buttons as { request: unknown }[])[0]!.request;
    await stream(t.app, v2StreamPath(p.projectID, 'lee'), { key: p.apiKey, body: { action: button } });
    const second = recorder.records.filter((r) => r.projectID === p.projectID)[1]!;
    expect(second).toMatchObject({ interactionType: 'button', sessionID: first.sessionID, sessionStarted: false });
  });

  it('serves the interact subscription to graphql-sse clients directly', async () => {
    const p = await projectWith(greeter);
    const sub = recordSubscription<{ data?: { interact: { event: string; trace: TraceData | null; turnID: string } } }>(
      t.app,
      {
        query: `subscription($p: ID!, $r: InteractRequestInput!) {
        interact(projectID: $p, userID: "kim", request: $r) { event turnID trace outcome }
      }`,
        variables: { p: p.projectID, r: { action: { type: 'launch' } } },
        key: p.apiKey,
      },
    );
    try {
      const events = await sub.waitFor((e) => e.some((x) => x.data?.interact.event === 'end'));
      const interact = events.map((e) => e.data!.interact);
      expect(interact.at(-1)).toMatchObject({ event: 'end', outcome: 'completed', trace: null });
      expect(interact.filter((e) => e.trace?.type === 'text').map((e) => e.trace!.payload?.message)).toEqual([
        'Hello kim!',
        'Visit number 1.',
      ]);
      expect(new Set(interact.map((e) => e.turnID)).size).toBe(1);
    } finally {
      sub.close();
    }
  });
});
