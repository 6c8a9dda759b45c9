import { afterAll, beforeAll, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, type LocalApi, publish, startLocalApi } from '../helpers/runtime';
import { usageRest } from '../helpers/usage';

/** Turns feed the usage analytics (DECISIONS.md §4), read back through POST /v2/query/usage. */
describeEachDatabase('runtime turns in usage analytics', (provider) => {
  const t = useTestApp(provider);
  let api: LocalApi;
  beforeAll(async () => {
    api = await startLocalApi((req) =>
      req.url.startsWith('/ok') ? { status: 200, body: { ok: true } } : { status: 503, body: { error: 'down' } },
    );
  });
  afterAll(async () => {
    await api?.close();
  });

  it('counts interactions by type, unique users, agent invocations, intents, API and code-step calls', async () => {
    const p = await t.app.createProject();
    const published = await publish(t.app, p.projectID, {
      name: 'Billing bot',
      startFlow: 'main',
      variables: [{ name: 'base', default: api.url }, { name: 'total' }],
      intents: [
        { name: 'billing', utterances: ['question about my invoice', 'I was charged twice', 'billing problem'] },
        { name: 'goodbye', utterances: ['goodbye', 'see you later', 'bye now'] },
      ],
      flows: [
        {
          id: 'main',
          start: 'lookup',
          steps: [
            {
              id: 'lookup',
              type: 'api',
              name: 'Account lookup',
              method: 'GET',
              url: '{base}/ok',
              next: 'sync',
              failure: 'sync',
            },
            {
              id: 'sync',
              type: 'api',
              name: 'Sync',
              method: 'POST',
              url: '{base}/down',
              next: 'calc',
              failure: 'calc',
            },
            { id: 'calc', type: 'code', code: 'variables.total = 2 * 21;', next: 'menu' },
            {
              id: 'menu',
              type: 'choice',
              buttons: [{ label: 'Billing', next: 'billing', intent: 'billing' }],
              intents: [{ intent: 'goodbye', next: 'bye' }],
            },
            { id: 'billing', type: 'message', message: 'About your bill', next: 'menu' },
            { id: 'bye', type: 'message', message: 'bye' },
          ],
        },
      ],
    });
    const turn = async (user: string, action: unknown) => {
      const res = await interact(t.app, p.apiKey, p.projectID, user, { action });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    };
    await turn('alice', { type: 'launch' });
    await turn('alice', { type: 'text', payload: 'I was charged twice' });
    await turn('bob', { type: 'launch' });
    await turn('bob', { type: 'intent', payload: { intent: { name: 'goodbye' }, query: '' } });

    const query = async (name: string) => {
      const res = await usageRest(t.app, p.apiKey, { name, filter: { projectID: p.projectID } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.result;
    };
    const sum = (items: { count: number }[], pick: (i: Record<string, unknown>) => boolean = () => true) =>
      items.filter(pick).reduce((n, i) => n + i.count, 0);

    const interactions = (await query('interactions')).items as { type: string; count: number }[];
    expect(sum(interactions, (i) => i.type === 'launch')).toBe(2);
    expect(sum(interactions, (i) => i.type === 'text')).toBe(1);
    expect(sum(interactions, (i) => i.type === 'intent')).toBe(1);

    // Both users in the same hour (a turn near an hour boundary may split them over two).
    const users = (await query('unique_users')).items as { count: number }[];
    expect(sum(users)).toBeGreaterThanOrEqual(2);
    expect(sum(users)).toBeLessThanOrEqual(4);

    const agents = (await query('agent_usage')).items as {
      agentID: string;
      name: string;
      count: number;
      successCount: number;
    }[];
    expect(agents.every((a) => a.agentID === published.agent.id && a.name === 'Billing bot')).toBe(true);
    expect(sum(agents)).toBe(4);
    expect(agents.reduce((n, a) => n + a.successCount, 0)).toBe(4);

    const apis = (await query('api_calls')).items as {
      apiToolID: string;
      name: string;
      count: number;
      successCount: number;
    }[];
    const byTool = (id: string) => apis.filter((a) => a.apiToolID === id);
    expect(sum(byTool('lookup'))).toBe(2);
    expect(byTool('lookup').reduce((n, a) => n + a.successCount, 0)).toBe(2);
    expect(byTool('lookup')[0]?.name).toBe('Account lookup');
    expect(sum(byTool('sync'))).toBe(2);
    expect(byTool('sync').reduce((n, a) => n + a.successCount, 0)).toBe(0);

    const functions = (await query('function_usage')).items as {
      functionID: string;
      count: number;
      successCount: number;
    }[];
    expect(functions.map((f) => f.functionID)).toEqual(functions.map(() => 'calc'));
    expect(sum(functions)).toBe(2);

    const intents = (await query('top_intents')).intents as { name: string; count: number }[];
    expect(intents).toEqual([
      { name: 'billing', count: 1 },
      { name: 'goodbye', count: 1 },
    ]);
  });
});
