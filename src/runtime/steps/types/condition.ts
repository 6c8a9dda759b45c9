import { z } from 'zod';
import { isTruthy } from '../../expressions';
import { expressionSchema, stepIdSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('condition'),
    name: z.string().max(200).optional(),
    branches: z
      .array(z.strictObject({ if: expressionSchema, next: stepIdSchema.optional() }))
      .min(1)
      .max(50)
      .describe('Tried in order: the first whose expression is true is taken (if / else if).'),
    else: stepIdSchema.optional().describe('Taken when no branch is true.'),
  })
  .describe('Branches on expressions over the variables.');

type ConditionStep = z.infer<typeof schema>;

export const conditionStep = defineStepType<ConditionStep>({
  type: 'condition',
  description:
    'If / else-if / else: takes the first branch whose JSONata expression is true. An expression that fails counts as false and is reported in a `debug` trace.',
  schema,
  exits: (step) => [
    ...step.branches.map((b, i) => ({ field: `branches.${i}.next`, target: b.next })),
    { field: 'else', target: step.else },
  ],
  references: (step) => ({ expressions: step.branches.map((b, i) => ({ field: `branches.${i}.if`, source: b.if })) }),
  async run(step, ctx) {
    for (const [i, branch] of step.branches.entries()) {
      let value: unknown = false;
      try {
        value = await ctx.evaluate(branch.if);
      } catch (err) {
        ctx.debug(
          `Condition ${i + 1} of step "${step.id}" failed and counts as false: ${(err as Error).message}`,
          'error',
        );
      }
      if (isTruthy(value)) return { kind: 'next', target: branch.next, path: `condition:${i + 1}` };
    }
    return { kind: 'next', target: step.else, path: 'condition:else' };
  },
});
