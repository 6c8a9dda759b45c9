import { z } from 'zod';
import { checkEntitySpec, extractEntity } from '../../nlu/entities';
import {
  entityNameSchema,
  entitySpecSchema,
  fallbackSchema,
  noReplySchema,
  stepIdSchema,
  variableNameSchema,
} from '../../program/common';
import { defaultNoMatchReprompt, followFallback } from '../shared';
import { defineStepType, type StepContext, type StepProblem, type StepResult } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('capture'),
    name: z.string().max(200).optional(),
    variable: variableNameSchema.describe('Where the captured value goes.'),
    entity: z
      .union([entityNameSchema, entitySpecSchema], {
        error: () => 'must be the name of an entity or an entity such as {"type": "email"}',
      })
      .optional()
      .describe('An entity of the program (by name) or an inline one; without it the whole utterance is captured.'),
    listenForTriggers: z
      .boolean()
      .optional()
      .describe('Let global triggers (e.g. "talk to a person") interrupt the capture (default false).'),
    next: stepIdSchema.optional(),
    noMatch: fallbackSchema.optional(),
    noReply: noReplySchema.optional(),
  })
  .describe('Waits for the user’s words and stores them, or a value found in them, in a variable.');

type CaptureStep = z.infer<typeof schema>;

function ask(step: CaptureStep, ctx: StepContext): StepResult {
  if (step.noReply?.timeout) ctx.emit('no-reply', { timeout: step.noReply.timeout });
  return { kind: 'wait' };
}

export const captureStep = defineStepType<CaptureStep>({
  type: 'capture',
  description:
    'Waits for the user’s words and stores them, or the number, e-mail address, date, pattern or list value found in them.',
  schema,
  exits: (step) => [
    { field: 'next', target: step.next },
    { field: 'noMatch.next', target: step.noMatch?.next },
    { field: 'noReply.next', target: step.noReply?.next },
  ],
  references: (step) => ({
    writes: [{ field: 'variable', name: step.variable }],
    entities: typeof step.entity === 'string' ? [{ field: 'entity', name: step.entity }] : [],
    templates: [
      ...(step.noMatch?.reprompts ?? []).map((text, i) => ({ field: `noMatch.reprompts.${i}`, text })),
      ...(step.noReply?.reprompts ?? []).map((text, i) => ({ field: `noReply.reprompts.${i}`, text })),
    ],
  }),
  validate: (step) => {
    if (typeof step.entity !== 'object') return [];
    const problems: StepProblem[] = [];
    if (step.entity.type === 'regex' && !step.entity.pattern) {
      problems.push({ severity: 'error', field: 'entity.pattern', message: 'a regex entity needs a pattern' });
    }
    if (step.entity.type === 'list' && !step.entity.values?.length) {
      problems.push({ severity: 'error', field: 'entity.values', message: 'a list entity needs values' });
    }
    const invalid = checkEntitySpec(step.entity);
    if (invalid) problems.push({ severity: 'error', field: 'entity.pattern', message: invalid });
    return problems;
  },
  async run(step, ctx) {
    return ask(step, ctx);
  },
  async resume(step, ctx, input) {
    if (input.kind === 'no-reply')
      return followFallback(ctx, step.noReply, 'capture:no-reply', null, async () => ask(step, ctx));
    if (step.listenForTriggers) {
      const trigger = ctx.globalTrigger(input);
      if (trigger) return trigger;
    }
    let value: string | number | null = null;
    if (step.entity === undefined) {
      value = input.utterance?.trim() ? input.utterance.trim() : null;
    } else {
      const spec = ctx.resolveEntity(step.entity);
      // An intent action may carry the entity already extracted.
      const given =
        typeof step.entity === 'string' ? input.intent?.entities.find((e) => e.name === step.entity) : undefined;
      if (given) value = given.value;
      else if (spec && input.utterance)
        value = extractEntity(input.utterance, spec, new Date(ctx.now()))?.value ?? null;
    }
    if (value !== null) {
      ctx.variables.set(step.variable, value);
      return { kind: 'next', target: step.next, path: 'capture:captured' };
    }
    if (!step.listenForTriggers) {
      const trigger = ctx.globalTrigger(input);
      if (trigger) return trigger;
    }
    return followFallback(ctx, step.noMatch, 'capture:else', defaultNoMatchReprompt, async () => ask(step, ctx));
  },
});
