import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { expect, it } from 'vitest';
import type { TurnRecord } from '../../src/runtime/turn-record';
import { type HttpResponse, useTestApp } from '../helpers/app';
import { errorBodyJsonSchema } from '../helpers/error-body';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, recordingRecorder, stream, v2StreamPath } from '../helpers/runtime';

/**
 * The Dialog Manager API (docs/dialog-manager.md): every response, success and error, is checked
 * against the original's documented response schemas (test/fixtures/dialog-manager-api.schemas.json,
 * copied from its OpenAPI document, with the corrections listed there) and every error also against
 * DECISIONS.md's error body.
 */

interface Fixture {
  components: { schemas: Record<string, unknown> };
  responses: Record<string, Record<string, unknown | null>>;
}

const fixture = JSON.parse(
  readFileSync(new URL('../fixtures/dialog-manager-api.schemas.json', import.meta.url), 'utf8'),
) as Fixture;

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addSchema({ $id: 'dm', components: fixture.components });

const errorBodySchema = ajv.compile(errorBodyJsonSchema);

const validators = new Map<string, ValidateFunction>();
function documented(operation: string, status: number): ValidateFunction | null {
  const schema = fixture.responses[operation]?.[String(status)];
  if (schema === undefined || schema === null) return null;
  const key = `${operation} ${status}`;
  let v = validators.get(key);
  if (!v) {
    const rewritten = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"dm#/components/'));
    v = ajv.compile(rewritten);
    validators.set(key, v);
  }
  return v;
}

/** Checks a response against the documented schema of its operation and status (and errors against DECISIONS.md). */
function conforms(operation: string, res: HttpResponse, status: number) {
  expect(res.status, res.text).toBe(status);
  const v = documented(operation, status);
  if (status >= 400) {
    expect(errorBodySchema(res.body), JSON.stringify(errorBodySchema.errors)).toBe(true);
    expect(res.body.statusCode).toBe(status);
  } else if (!v && status === 200) {
    // A documented 200 without a body schema (DELETE): any JSON object.
    expect(typeof res.body).toBe('object');
  }
  if (v) expect(v(res.body), `${operation} ${status}: ${JSON.stringify(v.errors)} in ${res.text}`).toBe(true);
  return res.body;
}

const INTERACT = 'POST /state/user/{userID}/interact';
const GET = 'GET /state/user/{userID}';
const PUT = 'PUT /state/user/{userID}';
const DELETE = 'DELETE /state/user/{userID}';
const PATCH = 'PATCH /state/user/{userID}/variables';

const pizza = {
  name: 'Pizza',
  startFlow: 'main',
  variables: [{ name: 'size', default: null }],
  flows: [
    {
      id: 'main',
      name: 'Main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'Hi {size}!\nWhat size?', next: 'ask' },
        {
          id: 'ask',
          type: 'choice',
          buttons: [
            { label: 'Large', next: 'large' },
            { label: 'Small', next: 'bye' },
          ],
        },
        { id: 'large', type: 'set', assignments: [{ variable: 'size', value: '"large"' }], next: 'sure' },
        { id: 'sure', type: 'message', message: 'A {size} one.', next: 'again' },
        { id: 'again', type: 'capture', variable: 'size', next: 'bye' },
        // No next: the conversation runs out of steps.
        { id: 'bye', type: 'message', message: 'Bye.' },
      ],
    },
  ],
};

type Trace = { type: string; payload: Record<string, unknown> };

describeEachDatabase('Dialog Manager API', (provider) => {
  const recorder = recordingRecorder();
  const t = useTestApp(provider, {
    services: {
      turnRecorder: (defaults) => ({
        async record(turn: TurnRecord) {
          await defaults.record(turn);
          await recorder.record(turn);
        },
      }),
    },
  });

  const dm = (
    method: string,
    path: string,
    key: string,
    opts: { body?: unknown; headers?: Record<string, string>; query?: Record<string, string> } = {},
  ) => t.app.http(method, path, { key, ...opts });

  it('runs turns with documented traces (slate on every text trace, end when steps run out) and verbose answers', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pizza);

    const launch = conforms(
      INTERACT,
      await dm('POST', '/state/user/ann/interact', p.apiKey, {
        body: { action: { type: 'launch' }, state: { variables: { size: 'any' } } },
      }),
      200,
    ) as Trace[];
    expect(Array.isArray(launch)).toBe(true);
    const text = launch.find((tr) => tr.type === 'text')!;
    expect(text.payload.message).toBe('Hi any!\nWhat size?');
    expect(text.payload.slate).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{24}$/),
      content: [{ children: [{ text: 'Hi any!' }] }, { children: [{ text: 'What size?' }] }],
    });
    const choice = launch.find((tr) => tr.type === 'choice')!;
    const buttons = choice.payload.buttons as { name: string; request: unknown }[];
    expect(buttons.map((b) => b.name)).toEqual(['Large', 'Small']);
    // block, debug and flow are left out as documented (Config.excludeTypes default).
    expect(launch.some((tr) => ['block', 'debug', 'flow'].includes(tr.type))).toBe(false);

    const verbose = conforms(
      INTERACT,
      await dm('POST', '/state/user/ann/interact', p.apiKey, {
        body: { action: buttons[0]!.request },
        query: { verbose: 'true' },
      }),
      200,
    ) as {
      trace: Trace[];
      state: { stack: { programID: string; diagramID: string; nodeID: string }[]; variables: Record<string, unknown> };
      action: unknown;
    };
    expect(verbose.action).toEqual(buttons[0]!.request);
    expect(verbose.trace.find((tr) => tr.type === 'text')!.payload).toMatchObject({
      message: 'A large one.',
      slate: { content: [{ children: [{ text: 'A large one.' }] }] },
    });
    expect(verbose.state.stack).toEqual([
      { programID: 'main', diagramID: 'main', nodeID: 'again', variables: {}, storage: { waiting: true } },
    ]);
    expect(verbose.state.variables.size).toBe('large');

    // The next answer leads to a step without a next: the conversation ends with an end trace.
    const last = conforms(
      INTERACT,
      await dm('POST', '/state/user/ann/interact', p.apiKey, {
        body: { action: { type: 'text', payload: 'medium' }, config: { excludeTypes: [] } },
      }),
      200,
    ) as Trace[];
    expect(last.map((tr) => tr.type)).toContain('block');
    expect(last.find((tr) => tr.type === 'text')!.payload.message).toBe('Bye.');
    expect(last.at(-1)!.type).toBe('end');

    // Every text trace of the v2 stream and the v2 JSON endpoint carries the slate too.
    const v2 = await t.app.http('POST', `/v2/project/${p.projectID}/user/bo/interact`, {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    expect(v2.body.find((tr: Trace) => tr.type === 'text').payload.slate.content[0]).toEqual({
      children: [{ text: 'Hi !' }],
    });
    const { reading } = await stream(t.app, v2StreamPath(p.projectID, 'cy'), {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    const streamed = reading.dispatched.filter((e) => e.event === 'trace').map((e) => JSON.parse(e.data) as Trace);
    expect(streamed.find((tr) => tr.type === 'text')!.payload.slate).toMatchObject({
      content: [{ children: [{ text: 'Hi !' }] }, { children: [{ text: 'What size?' }] }],
    });
  });

  it('shares state, sessions and recording with the v2 routes', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pizza);
    // Started on v2 …
    const started = await t.app.http('POST', `/v2/project/${p.projectID}/user/dee/interact`, {
      key: p.apiKey,
      body: { action: { type: 'launch' } },
    });
    const button = started.body.find((tr: Trace) => tr.type === 'choice').payload.buttons[0].request;
    // … continued on the Dialog Manager API …
    const next = conforms(
      INTERACT,
      await dm('POST', '/state/user/dee/interact', p.apiKey, { body: { action: button } }),
      200,
    ) as Trace[];
    expect(next.find((tr) => tr.type === 'text')!.payload.message).toBe('A large one.');
    // … and back on v2.
    const back = await t.app.http('POST', `/v2/project/${p.projectID}/user/dee/interact`, {
      key: p.apiKey,
      body: { action: { type: 'text', payload: 'ok' } },
    });
    expect(back.body.find((tr: Trace) => tr.type === 'text').payload.message).toBe('Bye.');

    const records = recorder.records.filter((r) => r.projectID === p.projectID && r.userID === 'dee');
    expect(records).toHaveLength(3);
    expect(new Set(records.map((r) => r.sessionID)).size).toBe(1);
    expect(records.map((r) => r.sessionStarted)).toEqual([true, false, false]);

    // One transcript holds the whole conversation, and usage counted the three turns.
    const transcripts = await t.app.http('POST', `/v1/transcript/project/${p.projectID}`, {
      key: t.app.operatorToken,
      body: {},
    });
    expect(transcripts.status, transcripts.text).toBe(200);
    const listed = transcripts.body.transcripts as { sessionID: string; userID: string }[];
    expect(listed.map((tr) => [tr.sessionID, tr.userID])).toEqual([[records[0]!.sessionID, 'dee']]);
  });

  it('GET, PUT, PATCH and DELETE the state with the documented shapes; a PUT of what GET answered is accepted', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pizza);

    expect(conforms(GET, await dm('GET', '/state/user/eve', p.apiKey), 200)).toBeNull();
    const patched = conforms(
      PATCH,
      await dm('PATCH', '/state/user/eve/variables', p.apiKey, { body: { size: 'small', n: 2 } }),
      200,
    );
    expect(patched).toEqual({ stack: [], storage: {}, variables: { size: 'small', n: 2 } });

    conforms(
      INTERACT,
      await dm('POST', '/state/user/eve/interact', p.apiKey, { body: { action: { type: 'launch' } } }),
      200,
    );
    const got = conforms(GET, await dm('GET', '/state/user/eve', p.apiKey), 200) as {
      stack: Record<string, unknown>[];
    };
    expect(got.stack).toEqual([
      { programID: 'main', diagramID: 'main', nodeID: 'ask', variables: {}, storage: { waiting: true } },
    ]);

    const put = conforms(PUT, await dm('PUT', '/state/user/eve', p.apiKey, { body: got }), 200);
    expect(put).toEqual(got);
    expect(conforms(GET, await dm('GET', '/state/user/eve', p.apiKey), 200)).toEqual(got);
    // The v2 state route sees the same state.
    const v2 = await t.app.http('GET', `/v2/project/${p.projectID}/user/eve/state`, { key: p.apiKey });
    expect(v2.body).toEqual(got);

    const mismatch = conforms(
      PUT,
      await dm('PUT', '/state/user/eve', p.apiKey, {
        body: { stack: [{ programID: 'x', diagramID: 'main', nodeID: 'ask' }], storage: {}, variables: {} },
      }),
      400,
    );
    expect(mismatch.details).toEqual([
      { path: 'stack.0.programID', message: 'must equal diagramID (both name the flow)' },
    ]);
    conforms(PUT, await dm('PUT', '/state/user/eve', p.apiKey, { body: { stack: 'no' } }), 400);
    conforms(PATCH, await dm('PATCH', '/state/user/eve/variables', p.apiKey, { body: ['no'] }), 400);

    expect(conforms(DELETE, await dm('DELETE', '/state/user/eve', p.apiKey), 200)).toEqual({ deleted: true });
    expect(conforms(GET, await dm('GET', '/state/user/eve', p.apiKey), 200)).toBeNull();
    expect(conforms(DELETE, await dm('DELETE', '/state/user/eve', p.apiKey), 200)).toEqual({ deleted: false });
  });

  it('takes the environment from the versionID header: alias, environment ID or agent version', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pizza);
    const prodProgram = {
      ...pizza,
      flows: [{ ...pizza.flows[0]!, steps: [{ id: 'hello', type: 'message', message: 'Production.' }] }],
    };
    const prod = await publish(t.app, p.projectID, prodProgram, 'production');
    const production = p.environments.find((e) => e.alias === 'production')!;
    const development = p.environments.find((e) => e.alias === 'development')!;
    const say = async (headers: Record<string, string>, user: string) => {
      const traces = conforms(
        INTERACT,
        await dm('POST', `/state/user/${user}/interact`, p.apiKey, { body: { action: { type: 'launch' } }, headers }),
        200,
      ) as Trace[];
      return traces.find((tr) => tr.type === 'text')!.payload.message;
    };
    expect(await say({}, 'u1')).toBe('Hi !\nWhat size?');
    expect(await say({ versionID: 'development' }, 'u2')).toBe('Hi !\nWhat size?');
    expect(await say({ versionID: 'production' }, 'u3')).toBe('Production.');
    expect(await say({ versionID: production.id }, 'u4')).toBe('Production.');
    expect(await say({ versionID: prod.version.id }, 'u5')).toBe('Production.');
    expect(await say({ versionID: development.id }, 'u6')).toBe('Hi !\nWhat size?');
    // State is per environment.
    const prodState = conforms(
      GET,
      await dm('GET', '/state/user/u3', p.apiKey, { headers: { versionID: 'production' } }),
      200,
    );
    expect(prodState).not.toBeNull();
    expect(conforms(GET, await dm('GET', '/state/user/u3', p.apiKey), 200)).toBeNull();

    const unknown = conforms(
      INTERACT,
      await dm('POST', '/state/user/u7/interact', p.apiKey, {
        body: { action: { type: 'launch' } },
        headers: { versionID: 'staging' },
      }),
      404,
    );
    expect(unknown.message).toBe('Environment "staging" not found');
    const unknownId = conforms(
      GET,
      await dm('GET', '/state/user/u7', p.apiKey, { headers: { versionID: 'a'.repeat(24) } }),
      404,
    );
    expect(unknownId.errorCode).toBe('NOT_FOUND');
    conforms(
      INTERACT,
      await dm('POST', '/state/user/u7/interact', p.apiKey, {
        body: { action: { type: 'launch' } },
        headers: { versionID: 'x'.repeat(65) },
      }),
      400,
    );
    // A version that no environment runs.
    const old = await publish(t.app, p.projectID, { ...pizza, name: 'Unused' }, 'development');
    await publish(t.app, p.projectID, pizza, 'development');
    const notRunning = conforms(
      INTERACT,
      await dm('POST', '/state/user/u8/interact', p.apiKey, {
        body: { action: { type: 'launch' } },
        headers: { versionID: old.version.id },
      }),
      404,
    );
    expect(notRunning.message).toBe(`Agent version "${old.version.id}" is not running in any environment`);
  });

  it('refuses bad input, missing keys, keys without the scope, and never reaches another project', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, pizza);
    conforms(
      INTERACT,
      await dm('POST', '/state/user/zed/interact', p.apiKey, { body: { action: { type: 'launch' } } }),
      200,
    );

    const noKey = conforms(
      INTERACT,
      await t.app.http('POST', '/state/user/zed/interact', { body: { action: { type: 'launch' } } }),
      401,
    );
    expect(noKey.errorCode).toBe('UNAUTHENTICATED');
    conforms(GET, await t.app.http('GET', '/state/user/zed', { key: 'not-a-key' }), 401);

    const unknownMember = conforms(
      INTERACT,
      await dm('POST', '/state/user/zed/interact', p.apiKey, { body: { action: { type: 'launch' }, request: {} } }),
      400,
    );
    expect(unknownMember.details).toEqual([{ path: 'request', message: 'is not an allowed member' }]);
    const noAction = conforms(INTERACT, await dm('POST', '/state/user/zed/interact', p.apiKey, { body: {} }), 400);
    expect(noAction.details[0].path).toBe('action');
    const badState = conforms(
      INTERACT,
      await dm('POST', '/state/user/zed/interact', p.apiKey, {
        body: { action: { type: 'launch' }, state: { stack: [] } },
      }),
      400,
    );
    expect(badState.details.map((d: { path: string }) => d.path)).toContain('state.stack');
    conforms(
      INTERACT,
      await dm('POST', '/state/user/zed/interact', p.apiKey, {
        body: { action: { type: 'launch' } },
        query: { verbose: 'yes' },
      }),
      400,
    );
    const malformed = await t.app.http('POST', '/state/user/zed/interact', {
      key: p.apiKey,
      body: '{"action":',
      headers: { 'content-type': 'application/json' },
    });
    conforms(INTERACT, malformed, 400);

    // Another project's key works on its own project: the same user ID is a different user there.
    const other = await t.app.createProject();
    expect(conforms(GET, await dm('GET', '/state/user/zed', other.apiKey), 200)).toBeNull();
    const otherTurn = conforms(
      INTERACT,
      await dm('POST', '/state/user/zed/interact', other.apiKey, { body: { action: { type: 'launch' } } }),
      404,
    );
    expect(otherTurn.errorCode).toBe('NOT_FOUND');
    expect(conforms(DELETE, await dm('DELETE', '/state/user/zed', other.apiKey), 200)).toEqual({ deleted: false });
    // The first project's state is untouched; its environment IDs mean nothing to the other key.
    expect(conforms(GET, await dm('GET', '/state/user/zed', p.apiKey), 200)).not.toBeNull();
    const dev = p.environments.find((e) => e.alias === 'development')!;
    conforms(GET, await dm('GET', '/state/user/zed', other.apiKey, { headers: { versionID: dev.id } }), 404);

    // A key without runtime:interact, and a workspace key (which names no project).
    const reader = await t.app.createProject({ scopes: ['analytics:read'] });
    const noScope = conforms(GET, await dm('GET', '/state/user/zed', reader.apiKey), 401);
    expect(noScope.errorCode).toBe('INSUFFICIENT_SCOPE');
    const workspaceKey = await t.app.gql(
      `mutation($w: ID!) { createApiKey(input: {workspaceID: $w, name: "ws", scopes: ["runtime:interact"]}) { apiKey } }`,
      { w: p.workspaceID },
    );
    expect(workspaceKey.body.errors).toBeUndefined();
    const ws = conforms(GET, await dm('GET', '/state/user/zed', workspaceKey.body.data.createApiKey.apiKey), 400);
    expect(ws.errorCode).toBe('VALIDATION_FAILED');
  });
});
