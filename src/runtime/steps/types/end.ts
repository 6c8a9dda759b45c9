import { z } from 'zod';
import { stepIdSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({ id: stepIdSchema, type: z.literal('end'), name: z.string().max(200).optional() })
  .describe('Ends the conversation: an `end` trace; the next action starts over.');

type EndStep = z.infer<typeof schema>;

export const endStep = defineStepType<EndStep>({
  type: 'end',
  description: 'Ends the conversation with an `end` trace; the stack is cleared and the next action starts over.',
  schema,
  exits: () => [],
  async run(_step, ctx) {
    ctx.emit('end', null);
    return { kind: 'end' };
  },
});
