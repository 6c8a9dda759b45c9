import { z } from 'zod';
import { granularities, isTimeZone } from '../analytics/time-buckets';
import { usageTimestampSchema } from '../analytics/validation';
import { idSchema, nameSchema, searchCriteriaSchema } from '../transcripts/validation';

/**
 * Evaluation definitions (DECISIONS.md §5), shared by the REST bodies and the GraphQL inputs.
 * A create body is a union on `type`: each type reads its own extra fields. SPEC.md closes none of
 * these bodies, so members Parley does not read (another type's fields included) are ignored.
 */

export const evaluationTypes = ['boolean', 'number', 'string'] as const;
export type EvaluationType = (typeof evaluationTypes)[number];

const promptText = z.string().trim().min(1, 'must not be empty').max(10_000, 'must be at most 10000 characters');
const shortPrompt = z.string().trim().min(1, 'must not be empty').max(2000, 'must be at most 2000 characters');
const description = z.string().max(1000, 'must be at most 1000 characters').nullish();

export const evaluationSettingsSchema = z.object({
  model: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  maxTokens: z.number().int('must be an integer').min(1).max(4000).nullish(),
});
export type EvaluationSettings = z.output<typeof evaluationSettingsSchema>;

const rangeValue = z.number().int('must be an integer').min(-1_000_000_000).max(1_000_000_000);

const common = {
  projectID: idSchema,
  name: nameSchema,
  description,
  /** Default true: a new evaluation runs when transcripts end. */
  enabled: z.boolean().nullish(),
  prompt: promptText,
  settings: evaluationSettingsSchema.nullish(),
};

/** A member Parley knows but that does not apply here: refused, never silently dropped. */
const notAllowed = (why: string) => z.undefined({ error: why }).optional();
const typeFields = {
  boolean: ['truePrompt', 'falsePrompt'],
  number: ['minimumValue', 'minimumPrompt', 'maximumValue', 'maximumPrompt'],
  string: [],
} as const;
const otherTypesFields = (type: EvaluationType) =>
  Object.fromEntries(
    evaluationTypes
      .filter((t) => t !== type)
      .flatMap((t) => typeFields[t])
      .map((field) => [field, notAllowed(`is not a field of ${type} evaluations`)]),
  );

export const createEvaluationBody = z
  .discriminatedUnion(
    'type',
    [
      z.object({
        ...common,
        ...otherTypesFields('boolean'),
        type: z.literal('boolean'),
        truePrompt: shortPrompt,
        falsePrompt: shortPrompt,
      }),
      z.object({
        ...common,
        ...otherTypesFields('number'),
        type: z.literal('number'),
        minimumValue: rangeValue,
        minimumPrompt: shortPrompt,
        maximumValue: rangeValue,
        maximumPrompt: shortPrompt,
      }),
      z.object({ ...common, ...otherTypesFields('string'), type: z.literal('string') }),
    ],
    { error: 'must be one of: "boolean", "number", "string"' },
  )
  .superRefine((input, ctx) => {
    if (input.type === 'number' && input.minimumValue >= input.maximumValue) {
      ctx.addIssue({ code: 'custom', path: ['maximumValue'], message: 'must be greater than minimumValue' });
    }
  });
export type CreateEvaluationInput = z.output<typeof createEvaluationBody>;

/** PATCH: everything but projectID, type and the numeric range may change. */
export const updateEvaluationBody = z.object({
  projectID: notAllowed('cannot be changed'),
  type: notAllowed('cannot be changed'),
  minimumValue: notAllowed('cannot be changed'),
  maximumValue: notAllowed('cannot be changed'),
  name: nameSchema.optional(),
  description,
  enabled: z.boolean().optional(),
  prompt: promptText.optional(),
  settings: evaluationSettingsSchema.nullish(),
  truePrompt: shortPrompt.optional(),
  falsePrompt: shortPrompt.optional(),
  minimumPrompt: shortPrompt.optional(),
  maximumPrompt: shortPrompt.optional(),
});
export type UpdateEvaluationInput = z.output<typeof updateEvaluationBody>;

export const runEvaluationBody = z.object({ projectID: idSchema });

export const queueEvaluationsBody = z.object({
  projectID: idSchema,
  evaluationIDs: z.array(idSchema).min(1).max(10),
  transcriptIDs: z.array(idSchema).min(1).max(100),
});

/**
 * The original's estimate body: search criteria plus `evaluationIDs`, no `projectID` (the project is
 * the evaluations'). One sent anyway must be theirs.
 */
export const estimateEvaluationsBody = searchCriteriaSchema.extend({
  projectID: idSchema.optional(),
  evaluationIDs: z.array(idSchema).min(1).max(10),
});

/** The GraphQL form of the estimate: the search criteria nested under `criteria`. */
export const estimateEvaluationsInput = z.strictObject({
  projectID: idSchema.nullish(),
  evaluationIDs: z.array(idSchema).min(1).max(10),
  criteria: searchCriteriaSchema.nullish(),
});

/** Arguments of GraphQL `transcriptEvaluationResultsOverTime`: a bounded range, a granularity and a time zone. */
export const resultsOverTimeArgsSchema = z
  .object({
    evaluationID: idSchema,
    startTime: usageTimestampSchema,
    endTime: usageTimestampSchema,
    granularity: z.enum(granularities, { error: `must be one of ${granularities.join(', ')}` }).default('day'),
    timeZone: z.string().default('UTC').refine(isTimeZone, 'must be an IANA time zone such as Europe/Berlin or UTC'),
  })
  .superRefine((a, ctx) => {
    if (a.endTime <= a.startTime)
      ctx.addIssue({ code: 'custom', path: ['endTime'], message: 'must be after startTime' });
  });
