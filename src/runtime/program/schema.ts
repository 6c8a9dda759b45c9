import { z } from 'zod';
import type { StepRegistry } from '../steps/registry';
import type { StepBase } from '../steps/step-type';
import {
  entityNameSchema,
  entitySpecSchema,
  flowIdSchema,
  intentNameSchema,
  jsonValueSchema,
  stepIdSchema,
  variableNameSchema,
} from './common';

/**
 * The agent program format: the one source of its JSON Schema (docs/agent-program.schema.json)
 * and of the checks a program passes before it is published. The step union comes from the step
 * registry, so a new step type extends the format by being registered.
 */

export interface ProgramVariable {
  name: string;
  default?: unknown;
  description?: string;
}

export interface ProgramEntity {
  name: string;
  type: 'number' | 'email' | 'date' | 'regex' | 'list';
  pattern?: string;
  flags?: string;
  values?: { value: string; synonyms?: string[] }[];
}

export interface ProgramIntent {
  name: string;
  description?: string;
  utterances: string[];
  entities?: string[];
}

export interface ProgramTrigger {
  intent?: string;
  event?: string;
  goTo: { flow: string; step?: string };
}

export interface ProgramFlow {
  id: string;
  name?: string;
  description?: string;
  start: string;
  steps: StepBase[];
}

export interface AgentProgram {
  $schema?: string;
  name: string;
  description?: string;
  startFlow: string;
  variables?: ProgramVariable[];
  entities?: ProgramEntity[];
  intents?: ProgramIntent[];
  triggers?: ProgramTrigger[];
  nlu?: { confidenceThreshold?: number };
  flows: ProgramFlow[];
}

/** Intent matches below this confidence count as no match unless the program says otherwise. */
export const defaultConfidenceThreshold = 0.6;

export function buildProgramSchema(registry: StepRegistry): z.ZodType<AgentProgram> {
  const stepSchemas = registry.list().map((t) => t.schema) as unknown as [z.ZodObject, z.ZodObject, ...z.ZodObject[]];
  const stepSchema = z.discriminatedUnion('type', stepSchemas);

  return z
    .strictObject({
      $schema: z.string().optional(),
      name: z.string().trim().min(1).max(100).describe('The agent’s name; publishing the same name adds a version.'),
      description: z.string().max(2000).optional(),
      startFlow: flowIdSchema.describe('The flow a conversation starts in.'),
      variables: z
        .array(
          z.strictObject({
            name: variableNameSchema,
            default: jsonValueSchema.optional().describe('The value a new user starts with (default null).'),
            description: z.string().max(500).optional(),
          }),
        )
        .max(500)
        .optional(),
      entities: z
        .array(entitySpecSchema.extend({ name: entityNameSchema }))
        .max(200)
        .optional(),
      intents: z
        .array(
          z.strictObject({
            name: intentNameSchema,
            description: z.string().max(500).optional(),
            utterances: z
              .array(z.string().trim().min(1).max(500))
              .min(1)
              .max(500)
              .describe('Sample utterances; `{entity}` stands for any value of that entity.'),
            entities: z.array(entityNameSchema).max(20).optional(),
          }),
        )
        .max(500)
        .optional(),
      triggers: z
        .array(
          z
            .strictObject({
              intent: intentNameSchema.optional(),
              event: z.string().min(1).max(100).optional(),
              goTo: z.strictObject({ flow: flowIdSchema, step: stepIdSchema.optional() }),
            })
            .describe(
              'Global triggers: an intent (or event) that, from anywhere, runs a flow and then returns to where the user was.',
            ),
        )
        .max(200)
        .optional(),
      nlu: z
        .strictObject({
          confidenceThreshold: z
            .number()
            .min(0)
            .max(1)
            .optional()
            .describe(`Intent matches below this count as no match (default ${defaultConfidenceThreshold}).`),
        })
        .optional(),
      flows: z
        .array(
          z.strictObject({
            id: flowIdSchema,
            name: z.string().max(200).optional(),
            description: z.string().max(2000).optional(),
            start: stepIdSchema.describe('The step the flow starts at.'),
            steps: z.array(stepSchema).min(1).max(2000),
          }),
        )
        .min(1)
        .max(500),
    })
    .describe(
      'A Parley agent program: flows of steps, variables, intents and global triggers.',
    ) as unknown as z.ZodType<AgentProgram>;
}

/** The JSON Schema of the program format (draft 2020-12). */
export function programJsonSchema(registry: StepRegistry): Record<string, unknown> {
  const schema = z.toJSONSchema(buildProgramSchema(registry), { io: 'input', unrepresentable: 'any' });
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'Parley agent program',
    ...schema,
  };
}
