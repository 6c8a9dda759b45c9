import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact } from '../helpers/runtime';

/**
 * The example of the README: published with one CLI command, then a conversation over REST with
 * its order API running, as a newcomer would have it.
 */

const run = promisify(execFile);
const agentFile = join(projectRoot, 'examples/support-bot/agent.json');

interface TraceData {
  type: string;
  payload: Record<string, unknown> | null;
}

describeEachDatabase('the support bot example', (provider) => {
  const t = useTestApp(provider);
  let orderApi: ChildProcess;
  let orderApiUrl = '';
  beforeAll(async () => {
    orderApi = spawn(process.execPath, [join(projectRoot, 'examples/support-bot/order-api.mjs'), '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(orderApi.stdout!, 'data')) as [Buffer];
    orderApiUrl = /http:\/\/\S+/.exec(line.toString())![0];
  });
  afterAll(() => {
    orderApi?.kill();
  });

  it('publishes with one command and holds a conversation: buttons, capture, condition, API and code steps', async () => {
    const p = await t.app.createProject({ name: 'support' });
    const published = await run(
      process.execPath,
      [join(projectRoot, 'bin/parley.js'), 'agent', 'publish', agentFile, '--project', p.projectID],
      { env: { PATH: process.env.PATH ?? '', DATABASE_URL: t.app.database.url, LOG_LEVEL: 'warn' }, timeout: 60_000 },
    );
    const out = JSON.parse(published.stdout.trim());
    expect(out).toMatchObject({ version: 1, environment: 'development', created: true, warnings: [] });

    const say = async (action: unknown, extra: Record<string, unknown> = {}) => {
      const res = await interact(t.app, p.apiKey, p.projectID, 'newcomer', { action, ...extra });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const traces = res.body as unknown as TraceData[];
      return {
        traces,
        texts: traces.filter((tr) => tr.type === 'text').map((tr) => tr.payload?.message),
        buttons: (traces.find((tr) => tr.type === 'choice')?.payload?.buttons ?? []) as {
          name: string;
          request: { type: string; payload: unknown };
        }[],
      };
    };

    const hello = await say({ type: 'launch' }, { variables: { order_api: orderApiUrl } });
    expect(["Hi! I'm the support bot.", 'Hello! Support bot here.']).toContain(hello.texts[0]);
    expect(hello.buttons.map((b) => b.name)).toEqual(['Track an order', 'Report a problem', 'Talk to a person']);

    const tracked = await say({ type: 'text', payload: 'where is order 12345?' });
    expect(tracked.texts).toEqual(['Order 12345 has shipped and should arrive on 2026-12-02.']);

    const again = await say(tracked.buttons[0]!.request);
    expect(again.buttons.map((b) => b.name)).toEqual(['Track an order', 'Report a problem', 'Talk to a person']);
    await say(again.buttons[0]!.request);
    const unknown = await say({ type: 'text', payload: 'it is 99999' });
    expect(unknown.texts).toEqual(["I couldn't find order 99999 (or the order system did not answer)."]);

    await say(unknown.buttons[0]!.request);
    const report = await say({ type: 'text', payload: 'Report a problem' });
    expect(report.texts).toEqual(["Sorry to hear that. What's your e-mail address?"]);
    expect((await say({ type: 'text', payload: 'not sure' })).texts).toEqual([
      "That doesn't look like an e-mail address. Try again?",
    ]);
    await say({ type: 'text', payload: 'sam@example.com' });
    const filed = await say({ type: 'text', payload: 'The app shows a blank page' });
    expect(filed.texts).toEqual(["Thanks! Ticket T-1001 is filed (normal priority). We'll write to sam@example.com."]);

    await say(filed.buttons[0]!.request);
    await say({ type: 'text', payload: 'Report a problem' });
    await say({ type: 'text', payload: 'sam@example.com' });
    const urgent = await say({ type: 'text', payload: 'I was charged twice and want a refund' });
    expect(urgent.texts).toEqual(['Ticket T-1002 is filed with high priority.', "I'm connecting you to a person now."]);
    expect(urgent.traces.find((tr) => tr.type === 'live-agent-handoff')?.payload).toEqual({
      queue: 'support',
      email: 'sam@example.com',
      ticket: 'T-1002',
      reason: 'I was charged twice and want a refund',
    });
  });
});
