import { z } from 'zod';

/** Schemas shared by the program format and the step types. */

export const stepIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, "_" or "-"')
  .describe('A step ID, unique in the program.');

export const flowIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, "_" or "-"')
  .describe('A flow ID, unique in the program.');

export const variableNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a name of letters, digits and "_", not starting with a digit')
  .describe('A variable name.');

export const intentNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,100}$/, 'must be 1 to 100 letters, digits, ".", "_" or "-"')
  .describe('An intent name.');

export const entityNameSchema = variableNameSchema.describe(
  'An entity name; an extracted value also fills the variable of the same name.',
);

/** A JSON value, as written in a program. */
export const jsonValueSchema: z.ZodType<unknown> = z.json();

/** A JSONata expression over the variables. */
export const expressionSchema = z
  .string()
  .min(1)
  .max(5000)
  .describe('A JSONata expression over the variables, e.g. `count + 1` or `plan = "pro" and age >= 18`.');

/** Text with `{variable}` placeholders. */
export const templateSchema = z.string().max(10_000).describe('Text; `{name}` is replaced by the variable `name`.');

export const entitySpecSchema = z
  .strictObject({
    type: z.enum(['number', 'email', 'date', 'regex', 'list']),
    pattern: z.string().min(1).max(1000).optional().describe('regex: the pattern; group 1, if any, is the value.'),
    flags: z
      .string()
      .regex(/^[imsu]{0,4}$/, 'must be among the flags i, m, s, u')
      .optional(),
    values: z
      .array(
        z.strictObject({
          value: z.string().min(1).max(200),
          synonyms: z.array(z.string().min(1).max(200)).max(100).optional(),
        }),
      )
      .max(1000)
      .optional()
      .describe('list: the values the entity may take, with synonyms.'),
  })
  .describe('A typed value to find in the user’s words.');

/** A reprompt or fallback path of a waiting step. */
export const fallbackSchema = z.strictObject({
  next: stepIdSchema.optional().describe('Where to go; without it the step says a reprompt and waits again.'),
  reprompts: z
    .array(templateSchema)
    .max(20)
    .optional()
    .describe('Said (one at random) before waiting again, when there is no `next`.'),
});

export const noReplySchema = z.strictObject({
  timeout: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .optional()
    .describe('Seconds after which the client should send a `no-reply` action (sent in a `no-reply` trace).'),
  next: stepIdSchema.optional(),
  reprompts: z.array(templateSchema).max(20).optional(),
});
