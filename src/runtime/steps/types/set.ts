import { z } from 'zod';
import { expressionSchema, stepIdSchema, variableNameSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('set'),
    name: z.string().max(200).optional(),
    assignments: z
      .array(z.strictObject({ variable: variableNameSchema, value: expressionSchema }))
      .min(1)
      .max(50)
      .describe('Evaluated in order; each sees the ones before it. Strings are quoted: `"hello"`.'),
    next: stepIdSchema.optional(),
  })
  .describe('Assigns variables from expressions.');

type SetStep = z.infer<typeof schema>;

export const setStep = defineStepType<SetStep>({
  type: 'set',
  description:
    'Assigns variables from JSONata expressions, in order. A failing expression leaves its variable unchanged and is reported in a `debug` trace.',
  schema,
  exits: (step) => [{ field: 'next', target: step.next }],
  references: (step) => ({
    expressions: step.assignments.map((a, i) => ({ field: `assignments.${i}.value`, source: a.value })),
    writes: step.assignments.map((a, i) => ({ field: `assignments.${i}.variable`, name: a.variable })),
  }),
  async run(step, ctx) {
    for (const assignment of step.assignments) {
      try {
        ctx.variables.set(assignment.variable, await ctx.evaluate(assignment.value));
      } catch (err) {
        ctx.debug(`Could not set "${assignment.variable}" in step "${step.id}": ${(err as Error).message}`, 'error');
      }
    }
    return { kind: 'next', target: step.next };
  },
});
