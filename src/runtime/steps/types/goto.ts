import { z } from 'zod';
import { flowIdSchema, stepIdSchema } from '../../program/common';
import { defineStepType, type StepProblem } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('goto'),
    name: z.string().max(200).optional(),
    flow: flowIdSchema.optional().describe('Run this flow, then come back to `next`.'),
    step: stepIdSchema.optional().describe('With `flow`: where to start in it. Without: a step of this flow to go to.'),
    next: stepIdSchema.optional().describe('With `flow`: where to continue when that flow ends.'),
  })
  .describe('Goes to another step, or runs another flow and returns (a call stack).');

type GotoStep = z.infer<typeof schema>;

export const gotoStep = defineStepType<GotoStep>({
  type: 'goto',
  description:
    'Goes to another step of the flow, or runs another flow (from its start or a given step) and, when that flow ends, continues at `next`.',
  schema,
  exits: (step) => (step.flow ? [{ field: 'next', target: step.next }] : [{ field: 'step', target: step.step }]),
  references: (step) => (step.flow ? { flows: [{ field: 'flow', flow: step.flow, step: step.step }] } : {}),
  validate: (step) => {
    const problems: StepProblem[] = [];
    if (!step.flow && !step.step)
      problems.push({ severity: 'error', field: '', message: 'a goto needs a flow or a step' });
    if (!step.flow && step.next) {
      problems.push({
        severity: 'error',
        field: 'next',
        message: 'next is where a called flow returns; it needs flow',
      });
    }
    return problems;
  },
  async run(step) {
    if (step.flow) return { kind: 'call', flow: step.flow, step: step.step, returnTo: step.next };
    return { kind: 'next', target: step.step };
  },
});
