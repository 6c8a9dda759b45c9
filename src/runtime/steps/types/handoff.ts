import { z } from 'zod';
import { jsonValueSchema, stepIdSchema, templateSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('handoff'),
    name: z.string().max(200).optional(),
    message: templateSchema.min(1).optional().describe('Said first, as a `text` trace.'),
    data: z
      .record(z.string(), jsonValueSchema)
      .optional()
      .describe('The handoff details for the client (queue, reason, …); strings are templates.'),
  })
  .describe('Hands the conversation to a person: a `live-agent-handoff` trace; the conversation ends.');

type HandoffStep = z.infer<typeof schema>;

export const handoffStep = defineStepType<HandoffStep>({
  type: 'handoff',
  description:
    'Hands the conversation to a person: an optional message, then a `live-agent-handoff` trace carrying `data`; the conversation ends here.',
  schema,
  exits: () => [],
  references: (step) => ({
    templates: step.message ? [{ field: 'message', text: step.message }] : [],
    jsonTemplates: step.data ? [{ field: 'data', value: step.data }] : [],
  }),
  async run(step, ctx) {
    if (step.message) ctx.emit('text', { message: ctx.interpolate(step.message) });
    ctx.emit('live-agent-handoff', ctx.interpolateJson(step.data ?? {}));
    return { kind: 'end' };
  },
});
