import { z } from 'zod';
import { stepIdSchema, templateSchema } from '../../program/common';
import { pickRandom } from '../shared';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('message'),
    name: z.string().max(200).optional(),
    message: z
      .union([templateSchema.min(1), z.array(templateSchema.min(1)).min(1).max(20)], {
        error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string or an array of strings'),
      })
      .describe('The text, or variants of which one is said at random.'),
    delay: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .optional()
      .describe('Milliseconds the client should wait before showing it.'),
    next: stepIdSchema.optional(),
  })
  .describe('Says a message: a `text` trace.');

type MessageStep = z.infer<typeof schema>;

const variants = (step: MessageStep) => (Array.isArray(step.message) ? step.message : [step.message]);

export const messageStep = defineStepType<MessageStep>({
  type: 'message',
  description: 'Says a message (one of its variants at random), with `{variable}` placeholders filled in.',
  schema,
  exits: (step) => [{ field: 'next', target: step.next }],
  references: (step) => ({
    templates: variants(step).map((text, i) => ({
      field: Array.isArray(step.message) ? `message.${i}` : 'message',
      text,
    })),
  }),
  async run(step, ctx) {
    const variant = pickRandom(variants(step), () => ctx.random()) ?? '';
    ctx.emit('text', { message: ctx.interpolate(variant), ...(step.delay !== undefined ? { delay: step.delay } : {}) });
    return { kind: 'next', target: step.next };
  },
});
