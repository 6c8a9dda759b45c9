import { z } from 'zod';
import { jsonValueSchema, stepIdSchema, templateSchema } from '../../program/common';

/** The fields of an `agent` step (docs/agent-step.md). */

export const toolNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, "_" or "-"')
  .describe('The name the model calls it by.');

const parametersSchema = z
  .record(z.string(), jsonValueSchema)
  .describe('A JSON Schema of type "object" for the arguments (checked before the tool runs).');

const description = z.string().min(1).max(2000).describe('What it does, as the model reads it.');

const headerNameSchema = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name');

export const functionToolSchema = z
  .strictObject({
    type: z.literal('function'),
    name: toolNameSchema,
    description,
    parameters: parametersSchema,
    code: z
      .string()
      .min(1)
      .max(50_000)
      .describe(
        'The body of an async JavaScript function of `args` (the checked arguments) and `variables` (a read-only copy); what it returns (JSON) is the result.',
      ),
    timeoutMs: z.number().int().min(1).max(60_000).optional().describe('Default 1000; capped by the server.'),
  })
  .describe('Program-defined code run in the code sandbox.');

export const apiToolSchema = z
  .strictObject({
    type: z.literal('api'),
    name: toolNameSchema,
    description,
    parameters: parametersSchema,
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
    url: templateSchema
      .min(1)
      .describe('`{args.name}` is an argument, `{name}` a variable; placeholders are percent-encoded.'),
    headers: z.record(headerNameSchema, templateSchema).optional(),
    query: z.record(z.string().min(1).max(200), templateSchema).optional(),
    body: jsonValueSchema.optional().describe('JSON whose strings are templates; not sent with GET.'),
    timeoutMs: z.number().int().min(1).max(120_000).optional().describe('Default 10000; capped by the server.'),
  })
  .describe('A templated HTTP request, as the `api` step, filled from the arguments.');

export const knowledgeBaseToolSchema = z
  .strictObject({
    type: z.literal('knowledge-base'),
    name: toolNameSchema,
    description,
    chunkLimit: z.number().int().min(1).max(10).optional().describe('Chunks returned (default 3).'),
    filters: jsonValueSchema.optional().describe('A metadata filter (docs/knowledge-base-filters.md), templated.'),
  })
  .describe('Searches the project’s knowledge base; the model gives `query`.');

export const integrationToolSchema = z
  .strictObject({
    type: z.literal('mcp'),
    integration: z.string().min(1).max(100).describe('The name of an MCP server registered in the project.'),
    tools: z
      .array(z.string().min(1).max(128))
      .min(1)
      .max(100)
      .optional()
      .describe('Only these of its tools (default: every tool it lists).'),
  })
  .describe('The tools of an MCP server (an integration of the project), listed when the step runs.');

export const agentToolSchema = z.discriminatedUnion('type', [
  functionToolSchema,
  apiToolSchema,
  knowledgeBaseToolSchema,
  integrationToolSchema,
]);

export type FunctionTool = z.infer<typeof functionToolSchema>;
export type ApiTool = z.infer<typeof apiToolSchema>;
export type KnowledgeBaseTool = z.infer<typeof knowledgeBaseToolSchema>;
export type IntegrationToolRef = z.infer<typeof integrationToolSchema>;
export type AgentTool = z.infer<typeof agentToolSchema>;

export const agentStepSchema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('agent'),
    name: z.string().max(200).optional().describe('The agent’s name (usage, spans; default: the step ID).'),
    instructions: templateSchema.min(1).describe('The system prompt, with `{variable}` placeholders.'),
    greeting: templateSchema
      .optional()
      .describe('Said when the step is entered (also part of the conversation); without it the step just listens.'),
    model: z.string().min(1).max(200).optional().describe('Default: the server’s default model.'),
    temperature: z.number().min(0).max(2).optional(),
    maxTokens: z.number().int().min(1).max(16_000).optional().describe('Per model call.'),
    tools: z.array(agentToolSchema).max(50).optional(),
    exits: z
      .array(
        z.strictObject({
          name: toolNameSchema,
          description: description.describe('When to leave, as the model reads it: "the user wants a person".'),
          next: stepIdSchema.optional(),
        }),
      )
      .max(20)
      .optional()
      .describe('Offered to the model as tools; calling one leaves the step by its path.'),
    limits: z
      .strictObject({
        toolRounds: z
          .number()
          .int()
          .min(1)
          .max(20)
          .optional()
          .describe('Model calls that may call tools per user turn (default 5); then it must answer.'),
        turns: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .optional()
          .describe('User turns the step answers (default 50); after the last it leaves by `turnLimit`.'),
        historyTokens: z
          .number()
          .int()
          .min(200)
          .max(200_000)
          .optional()
          .describe('Token budget of instructions plus conversation (default 8000); oldest turns are dropped.'),
      })
      .optional(),
    turnLimit: stepIdSchema.optional().describe('Where to go after the last allowed turn (default: the flow ends).'),
    failure: stepIdSchema.optional().describe('When the model fails or there is none (default: the flow ends).'),
  })
  .describe('A language model that holds the conversation, calls tools, and leaves by a named exit.');

export type AgentStep = z.infer<typeof agentStepSchema>;
