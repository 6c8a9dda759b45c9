import { z } from 'zod';
import { fallbackSchema, intentNameSchema, noReplySchema, stepIdSchema, templateSchema } from '../../program/common';
import { buttonRequestType, defaultNoMatchReprompt, followFallback, sameWords } from '../shared';
import { defineStepType, type StepContext, type StepResult } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('choice'),
    name: z.string().max(200).optional(),
    buttons: z
      .array(
        z.strictObject({
          label: templateSchema.min(1).max(200),
          next: stepIdSchema.optional(),
          intent: intentNameSchema
            .optional()
            .describe('Saying something that matches this intent also picks the button.'),
        }),
      )
      .max(20)
      .describe('Buttons the client shows; each one’s request comes back as the next action.'),
    intents: z
      .array(z.strictObject({ intent: intentNameSchema, next: stepIdSchema.optional() }))
      .max(50)
      .optional()
      .describe('Paths taken when the user’s words match an intent (without a button).'),
    noMatch: fallbackSchema.optional(),
    noReply: noReplySchema.optional(),
  })
  .describe('Offers buttons and waits: a `choice` trace.');

type ChoiceStep = z.infer<typeof schema>;

function offer(step: ChoiceStep, ctx: StepContext): StepResult {
  ctx.emit('choice', {
    buttons: step.buttons.map((button, i) => {
      const label = ctx.interpolate(button.label);
      return { name: label, request: { type: buttonRequestType(step.id, i), payload: { label } } };
    }),
  });
  if (step.noReply?.timeout) ctx.emit('no-reply', { timeout: step.noReply.timeout });
  return { kind: 'wait' };
}

export const choiceStep = defineStepType<ChoiceStep>({
  type: 'choice',
  description:
    'Shows buttons and waits. The answer is a button request, words equal to a label, or an intent; otherwise the no-match path (or a reprompt).',
  schema,
  exits: (step) => [
    ...step.buttons.map((b, i) => ({ field: `buttons.${i}.next`, target: b.next })),
    ...(step.intents ?? []).map((p, i) => ({ field: `intents.${i}.next`, target: p.next })),
    { field: 'noMatch.next', target: step.noMatch?.next },
    { field: 'noReply.next', target: step.noReply?.next },
  ],
  references: (step) => ({
    templates: [
      ...step.buttons.map((b, i) => ({ field: `buttons.${i}.label`, text: b.label })),
      ...(step.noMatch?.reprompts ?? []).map((text, i) => ({ field: `noMatch.reprompts.${i}`, text })),
      ...(step.noReply?.reprompts ?? []).map((text, i) => ({ field: `noReply.reprompts.${i}`, text })),
    ],
    intents: [
      ...step.buttons.flatMap((b, i) => (b.intent ? [{ field: `buttons.${i}.intent`, name: b.intent }] : [])),
      ...(step.intents ?? []).map((p, i) => ({ field: `intents.${i}.intent`, name: p.intent })),
    ],
  }),
  validate: (step) =>
    step.buttons.length === 0 && !step.intents?.length
      ? [{ severity: 'error', field: 'buttons', message: 'a choice needs at least one button or intent path' }]
      : [],
  async run(step, ctx) {
    return offer(step, ctx);
  },
  async resume(step, ctx, input) {
    const pick = (index: number): StepResult => ({
      kind: 'next',
      target: step.buttons[index]!.next,
      path: `choice:${index + 1}`,
    });
    if (input.kind === 'path') {
      const index = step.buttons.findIndex((_b, i) => buttonRequestType(step.id, i) === input.action.type);
      if (index >= 0) return pick(index);
    }
    if (input.utterance) {
      const index = step.buttons.findIndex((b) => sameWords(ctx.interpolate(b.label), input.utterance!));
      if (index >= 0) return pick(index);
    }
    if (input.intent) {
      const index = step.buttons.findIndex((b) => b.intent === input.intent!.name);
      if (index >= 0) return pick(index);
      const path = step.intents?.find((p) => p.intent === input.intent!.name);
      if (path) return { kind: 'next', target: path.next, path: `choice:intent:${path.intent}` };
    }
    const trigger = ctx.globalTrigger(input);
    if (trigger) return trigger;
    if (input.kind === 'no-reply')
      return followFallback(ctx, step.noReply, 'choice:no-reply', null, async () => offer(step, ctx));
    return followFallback(ctx, step.noMatch, 'choice:else', defaultNoMatchReprompt, async () => offer(step, ctx));
  },
});
