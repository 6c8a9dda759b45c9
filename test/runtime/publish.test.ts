import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';

const run = promisify(execFile);

const publishMutation = `mutation($input: PublishAgentInput!) {
  publishAgent(input: $input) { created version { id number agentID } environment { alias } warnings { severity path message } }
}`;

function program(message: string, extra: Record<string, unknown> = {}) {
  return {
    name: 'Hello',
    startFlow: 'main',
    flows: [
      {
        id: 'main',
        start: 'hi',
        steps: [
          { id: 'hi', type: 'message', message, next: 'ask' },
          { id: 'ask', type: 'capture', variable: 'answer' },
        ],
      },
    ],
    variables: [{ name: 'answer' }],
    ...extra,
  };
}

describeEachDatabase('publishing agents', (provider) => {
  const t = useTestApp(provider);

  it('publishes immutable versions, reuses an identical one, deploys to another environment, and audits both', async () => {
    const p = await t.app.createProject();
    const first = await publish(t.app, p.projectID, program('v1'));
    expect(first).toMatchObject({ created: true, version: { number: 1 }, environment: { alias: 'development' } });
    const same = await publish(t.app, p.projectID, program('v1'));
    expect(same).toMatchObject({ created: false, version: { id: first.version.id, number: 1 } });
    const second = await publish(t.app, p.projectID, program('v2'));
    expect(second).toMatchObject({ created: true, version: { number: 2 } });
    expect(second.agent.id).toBe(first.agent.id);

    const say = async (environment: string) => {
      const res = await interact(
        t.app,
        p.apiKey,
        p.projectID,
        `u-${environment}`,
        { action: { type: 'launch' } },
        { environment },
      );
      return res.status === 200 ? (res.body[0]!.payload as { message: string }).message : res.body;
    };
    expect(await say('development')).toBe('v2');
    expect(await say('production')).toMatchObject({
      statusCode: 404,
      message: expect.stringContaining('"production"'),
    });

    const deployed = await t.app.gql(
      'mutation($p: ID!, $v: ID!) { deployAgentVersion(projectID: $p, versionID: $v, environment: "production") { environment { alias } version { number } deployedBy } }',
      { p: p.projectID, v: first.version.id },
    );
    expect(deployed.body.data.deployAgentVersion).toEqual({
      environment: { alias: 'production' },
      version: { number: 1 },
      deployedBy: 'operator',
    });
    expect(await say('production')).toBe('v1');

    const listed = await t.app.gql(
      'query($p: ID!) { agents(projectID: $p) { name versions { number program deployments { environment { alias } } } } agentDeployments(projectID: $p) { environment { alias } version { number } } }',
      { p: p.projectID },
    );
    expect(listed.body.data.agents).toEqual([
      {
        name: 'Hello',
        versions: [
          {
            number: 2,
            program: expect.objectContaining({ name: 'Hello' }),
            deployments: [{ environment: { alias: 'development' } }],
          },
          {
            number: 1,
            program: expect.objectContaining({ name: 'Hello' }),
            deployments: [{ environment: { alias: 'production' } }],
          },
        ],
      },
    ]);

    const audit = await t.app.services.db.prisma.auditEvent.findMany({
      where: { workspaceId: p.workspaceID, action: { startsWith: 'agent.' } },
      orderBy: { id: 'asc' },
    });
    expect(audit.map((a) => [a.action, a.actor, (a.data as { version: number }).version])).toEqual([
      ['agent.publish', 'operator', 1],
      ['agent.publish', 'operator', 1],
      ['agent.publish', 'operator', 2],
      ['agent.deploy', 'operator', 1],
    ]);
  });

  it('refuses an invalid program listing every problem, and returns warnings of a valid one', async () => {
    const p = await t.app.createProject();
    const bad = {
      name: 'Broken',
      startFlow: 'main',
      variables: [{ name: 'x' }, { name: 'x' }],
      flows: [
        {
          id: 'main',
          start: 'a',
          steps: [
            { id: 'a', type: 'message', message: 'Hi {nobody}', next: 'nowhere' },
            { id: 'a', type: 'set', assignments: [{ variable: 'y', value: 'x +' }] },
            { id: 'c', type: 'code', code: 'return (' },
          ],
        },
      ],
    };
    const res = await t.app.gql(publishMutation, { input: { projectID: p.projectID, program: bad } });
    const error = res.body.errors[0];
    expect(error.extensions).toMatchObject({ code: 'VALIDATION_FAILED', http: { status: 400 } });
    expect(error.message).toMatch(/^The agent program has \d+ problems/);
    expect(error.extensions.details).toEqual(
      expect.arrayContaining([
        { path: 'program.variables.1.name', message: 'duplicate variable "x"' },
        { path: 'program.flows.0.steps.1.id', message: expect.stringContaining('duplicate step ID "a"') },
        { path: 'program.flows.0.steps.0.next', message: 'dangling transition: no step "nowhere"' },
        { path: 'program.flows.0.steps.0.message', message: 'unknown variable "nobody"' },
        { path: 'program.flows.0.steps.1.assignments.0.value', message: expect.stringContaining('Invalid expression') },
        { path: 'program.flows.0.steps.1.assignments.0.variable', message: 'unknown variable "y"' },
      ]),
    );
    // Nothing was stored.
    expect(await t.app.services.db.prisma.agent.count({ where: { projectId: p.projectID } })).toBe(0);

    // Code is compiled (not run) in the sandbox: a syntax error is refused too.
    const syntax = await t.app.gql(publishMutation, {
      input: {
        projectID: p.projectID,
        program: {
          name: 'S',
          startFlow: 'm',
          flows: [{ id: 'm', start: 'c', steps: [{ id: 'c', type: 'code', code: 'return (' }] }],
        },
      },
    });
    expect(syntax.body.errors[0].extensions.details).toEqual([
      { path: 'program.flows.0.steps.0.code', message: expect.stringContaining('SyntaxError') },
    ]);

    const warned = await t.app.gql(publishMutation, {
      input: {
        projectID: p.projectID,
        program: program('ok', {
          flows: [
            {
              id: 'main',
              start: 'hi',
              steps: [
                { id: 'hi', type: 'message', message: 'ok' },
                { id: 'orphan', type: 'end' },
              ],
            },
          ],
        }),
      },
    });
    expect(warned.body.data.publishAgent.warnings).toEqual([
      { severity: 'warning', path: 'flows.0.steps.1', message: 'unreachable step "orphan": no transition leads to it' },
    ]);

    const checked = await t.app.gql(
      'query($p: JSONObject!) { validateAgentProgram(program: $p) { valid errors { path } warnings { path } } }',
      { p: bad },
    );
    expect(checked.body.data.validateAgentProgram.valid).toBe(false);
    expect(checked.body.data.validateAgentProgram.errors.length).toBeGreaterThanOrEqual(6);
  });

  it('needs the admin scope to publish, and a key of the project', async () => {
    const p = await t.app.createProject();
    const other = await t.app.createProject({ scopes: ['admin'] });
    const noAdmin = await t.app.gql(
      publishMutation,
      { input: { projectID: p.projectID, program: program('x') } },
      p.apiKey,
    );
    expect(noAdmin.body.errors[0].extensions).toMatchObject({ code: 'INSUFFICIENT_SCOPE' });
    const foreign = await t.app.gql(
      publishMutation,
      { input: { projectID: p.projectID, program: program('x') } },
      other.apiKey,
    );
    expect(foreign.body.errors[0].extensions).toMatchObject({ code: 'NOT_FOUND' });
    const own = await t.app.gql(
      publishMutation,
      { input: { projectID: other.projectID, program: program('x') } },
      other.apiKey,
    );
    expect(own.body.data.publishAgent.created).toBe(true);
    const actor = await t.app.services.db.prisma.auditEvent.findFirst({
      where: { workspaceId: other.workspaceID, action: 'agent.publish' },
    });
    expect(actor?.actor).toBe(`key:${other.apiKey.split('.')[1]}`);
  });

  it('starts a conversation over when a new version no longer has the step the user was at', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, program('first'));
    await interact(t.app, p.apiKey, p.projectID, 'u', { action: { type: 'launch' } });
    await publish(t.app, p.projectID, {
      name: 'Hello',
      startFlow: 'main',
      flows: [{ id: 'main', start: 'greet', steps: [{ id: 'greet', type: 'message', message: 'second' }] }],
    });
    const res = await interact(t.app, p.apiKey, p.projectID, 'u', {
      action: { type: 'text', payload: 'hi' },
      config: { excludeTypes: ['block', 'flow'] },
    });
    // The new version's flow runs out of steps: the conversation ends with an end trace.
    expect(res.body.map((tr) => tr.type)).toEqual(['debug', 'text', 'end']);
    expect(res.body[0]!.payload).toMatchObject({ type: 'version' });
    expect(res.body[1]!.payload).toMatchObject({
      message: 'second',
      slate: { content: [{ children: [{ text: 'second' }] }] },
    });
  });

  it('the CLI validates and publishes a program file, listing every problem of a bad one', async () => {
    const p = await t.app.createProject();
    const dir = mkdtempSync(join(tmpdir(), 'parley-agent-'));
    const good = join(dir, 'good.json');
    const bad = join(dir, 'bad.json');
    writeFileSync(good, JSON.stringify(program('from the CLI')));
    writeFileSync(
      bad,
      JSON.stringify({
        name: 'Bad',
        startFlow: 'nope',
        flows: [{ id: 'm', start: 'x', steps: [{ id: 'y', type: 'message', message: '{q}' }] }],
      }),
    );
    const cli = async (args: string[]) => {
      try {
        const { stdout, stderr } = await run(process.execPath, [join(projectRoot, 'bin/parley.js'), ...args], {
          env: { PATH: process.env.PATH ?? '', DATABASE_URL: t.app.database.url, LOG_LEVEL: 'warn' },
          timeout: 60_000,
        });
        return { code: 0, stdout, stderr };
      } catch (err) {
        const e = err as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    };
    const refused = await cli(['agent', 'publish', bad, '--project', p.projectID]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('3 problem(s)');
    expect(refused.stderr).toContain('startFlow: unknown flow "nope"');
    expect(refused.stderr).toContain('flows.0.start: flow "m" has no step "x"');
    expect(refused.stderr).toContain('flows.0.steps.0.message: unknown variable "q"');

    const validated = await cli(['agent', 'validate', good]);
    expect(validated.code).toBe(0);
    expect(JSON.parse(validated.stdout)).toEqual({ valid: true, errors: [], warnings: [] });

    const done = await cli(['agent', 'publish', good, '--project', p.projectID, '--environment', 'production']);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ version: 1, environment: 'production', created: true });
    const res = await interact(
      t.app,
      p.apiKey,
      p.projectID,
      'cli',
      { action: { type: 'launch' } },
      { environment: 'production' },
    );
    expect(res.body[0]!.payload).toEqual({
      message: 'from the CLI',
      slate: { id: expect.any(String), content: [{ children: [{ text: 'from the CLI' }] }] },
    });

    const missing = await cli(['agent', 'publish', good]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('needs --project ID');
  });
});
