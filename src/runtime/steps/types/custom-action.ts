import { z } from 'zod';
import { jsonValueSchema, stepIdSchema } from '../../program/common';
import { defineStepType, type StepContext, type StepProblem, type StepResult } from '../step-type';

/** Trace types of the runtime itself, which a custom action may not take. */
const reservedTraceTypes = new Set([
  'text',
  'speak',
  'choice',
  'cardV2',
  'carousel',
  'visual',
  'no-reply',
  'path',
  'debug',
  'flow',
  'block',
  'end',
  'live-agent-handoff',
  'completion',
  'completion-start',
  'completion-continue',
  'completion-end',
  'state',
  'trace',
]);

const eventTypeSchema = z
  .string()
  .regex(/^[A-Za-z0-9_:.-]{1,100}$/, 'must be 1 to 100 letters, digits, "_", ":", "." or "-"');

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('custom'),
    name: z.string().max(200).optional(),
    action: eventTypeSchema.describe('The trace type the client receives, e.g. `open_checkout`.'),
    payload: jsonValueSchema.optional().describe('The trace’s payload; strings are templates.'),
    paths: z
      .array(z.strictObject({ event: eventTypeSchema, next: stepIdSchema.optional() }))
      .min(1)
      .max(20)
      .describe('The requests that resume the conversation: the client sends `{type: event}`.'),
    defaultPath: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('Index of the path taken when the turn does not stop here.'),
  })
  .describe('Stops the turn and hands the client a trace of its own type, with the paths to resume on.');

type CustomActionStep = z.infer<typeof schema>;

function pathResult(step: CustomActionStep, index: number): StepResult {
  const path = step.paths[index]!;
  return { kind: 'next', target: path.next, path: `custom:${path.event}` };
}

function emitAction(step: CustomActionStep, ctx: StepContext): void {
  ctx.emit(step.action, ctx.interpolateJson(step.payload ?? {}), {
    paths: step.paths.map((p) => ({ event: { type: p.event } })),
    defaultPath: step.defaultPath ?? 0,
  });
}

export const customActionStep = defineStepType<CustomActionStep>({
  type: 'custom',
  description:
    'Stops the turn and gives the client a trace of the action’s own type with `paths` and `defaultPath`; the client resumes with `{type: <path event>, payload}` (the payload is stored in `last_event`).',
  schema,
  exits: (step) => step.paths.map((p, i) => ({ field: `paths.${i}.next`, target: p.next })),
  references: (step) => ({
    jsonTemplates: step.payload === undefined ? [] : [{ field: 'payload', value: step.payload }],
  }),
  validate: (step) => {
    const problems: StepProblem[] = [];
    if (reservedTraceTypes.has(step.action)) {
      problems.push({ severity: 'error', field: 'action', message: `"${step.action}" is a trace type of the runtime` });
    }
    if (step.defaultPath !== undefined && step.defaultPath >= step.paths.length) {
      problems.push({ severity: 'error', field: 'defaultPath', message: 'must be the index of one of the paths' });
    }
    return problems;
  },
  async run(step, ctx) {
    emitAction(step, ctx);
    // The non-stream endpoint's config.stopTypes / stopAll may let the turn go on along the default path.
    if (!ctx.customActionStops(step.action)) return pathResult(step, step.defaultPath ?? 0);
    return { kind: 'wait' };
  },
  async resume(step, ctx, input) {
    const index = step.paths.findIndex((p) => p.event === input.action.type);
    if (index >= 0) {
      ctx.variables.set('last_event', { type: input.action.type, payload: input.action.payload ?? null });
      return pathResult(step, index);
    }
    const trigger = ctx.globalTrigger(input);
    if (trigger) return trigger;
    return pathResult(step, step.defaultPath ?? 0);
  },
});
