import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { expressionSchema, stepIdSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const maxWaitMs = 600_000;

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('wait'),
    name: z.string().max(200).optional(),
    ms: z
      .union([z.number().int().min(0).max(maxWaitMs), expressionSchema], {
        error: (issue) =>
          issue.input === undefined ? 'is required' : `must be milliseconds (0 to ${maxWaitMs}) or an expression`,
      })
      .describe('Milliseconds, or an expression giving them.'),
    next: stepIdSchema.optional(),
  })
  .describe('Pauses the flow (within the turn’s time limit).');

type WaitStep = z.infer<typeof schema>;

export const waitStep = defineStepType<WaitStep>({
  type: 'wait',
  description: 'Pauses the flow for a number of milliseconds (at most the turn’s time limit allows), then goes on.',
  schema,
  exits: (step) => [{ field: 'next', target: step.next }],
  references: (step) => (typeof step.ms === 'string' ? { expressions: [{ field: 'ms', source: step.ms }] } : {}),
  async run(step, ctx) {
    let ms = 0;
    if (typeof step.ms === 'number') ms = step.ms;
    else {
      try {
        const value = Number(await ctx.evaluate(step.ms));
        if (Number.isFinite(value) && value > 0) ms = Math.min(value, maxWaitMs);
      } catch (err) {
        ctx.debug(`Wait step "${step.id}": ${(err as Error).message}; not waiting`, 'error');
      }
    }
    if (ms > 0) await sleep(ms, undefined, { signal: ctx.signal });
    return { kind: 'next', target: step.next };
  },
});
