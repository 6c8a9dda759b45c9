import { expect, it } from 'vitest';
import { z } from 'zod';
import { defineStepType } from '../../src/runtime/steps/step-type';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { interact, publish } from '../helpers/runtime';
import { usageRest } from '../helpers/usage';

/**
 * `integrations` usage has its producer ready in the runtime: a step records each integration tool
 * call with `ctx.recordIntegrationCall`, and the turn's usage recorder writes one `integration_call`
 * event per call (docs/usage.md). The agent step's tool calls will use it; here a test step stands in.
 */
const toolStep = defineStepType<{
  id: string;
  type: 'crm-tools';
  calls: { tool: string; ok: boolean }[];
  next?: string;
}>({
  type: 'crm-tools',
  description: 'test: calls integration tools',
  schema: z.strictObject({
    id: z.string(),
    type: z.literal('crm-tools'),
    calls: z.array(z.strictObject({ tool: z.string(), ok: z.boolean() })),
    next: z.string().optional(),
  }),
  exits: (step) => [{ field: 'next', target: step.next }],
  async run(step, ctx) {
    for (const call of step.calls) {
      ctx.recordIntegrationCall({
        integrationToolName: call.tool,
        success: call.ok,
        durationMs: 1,
        ...(call.ok ? {} : { error: 'the service said no' }),
      });
    }
    return { kind: 'next', target: step.next };
  },
});

describeEachDatabase('integration tool calls in usage', (provider) => {
  const t = useTestApp(provider, { services: { extraStepTypes: [toolStep] } });

  it('counts each integration tool call of a turn under integrations, with its successes', async () => {
    const p = await t.app.createProject();
    await publish(t.app, p.projectID, {
      name: 'CRM',
      startFlow: 'main',
      flows: [
        {
          id: 'main',
          name: 'Main',
          start: 'tools',
          steps: [
            {
              id: 'tools',
              type: 'crm-tools',
              calls: [
                { tool: 'hubspot', ok: true },
                { tool: 'hubspot', ok: false },
                { tool: 'google-calendar', ok: true },
              ],
              next: 'done',
            },
            { id: 'done', type: 'message', message: 'Looked it up.' },
          ],
        },
      ],
    });
    const turn = await interact(t.app, p.apiKey, p.projectID, 'ann', { action: { type: 'launch' } });
    expect(turn.status).toBe(200);
    const res = await usageRest(t.app, p.apiKey, { name: 'integrations', filter: { projectID: p.projectID } });
    expect(res.status).toBe(200);
    const items = res.body.result.items as { integrationToolName: string; count: number; successCount: number }[];
    expect(items.map((i) => [i.integrationToolName, i.count, i.successCount])).toEqual([
      ['google-calendar', 1, 1],
      ['hubspot', 2, 1],
    ]);
    expect(items[0]).toMatchObject({ projectID: p.projectID, environmentID: p.environments[0]!.id });
  });
});
