import { z } from 'zod';
import { jsonValueSchema, stepIdSchema, templateSchema, variableNameSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('ai'),
    name: z.string().max(200).optional(),
    prompt: templateSchema.min(1).describe('What the model is asked, with `{variable}` placeholders.'),
    system: templateSchema.optional().describe('Instructions for the model.'),
    source: z
      .enum(['model', 'knowledge-base'])
      .optional()
      .describe(
        '`model` (default): the model answers the prompt. `knowledge-base`: the prompt is a question answered from the project’s knowledge base.',
      ),
    knowledgeBase: z
      .strictObject({
        chunkLimit: z.number().int().min(1).max(10).optional(),
        filters: jsonValueSchema.optional(),
      })
      .optional()
      .describe('For `source: knowledge-base`: chunks to retrieve (default 3) and a metadata filter.'),
    model: z.string().min(1).max(200).optional().describe('Default: the server’s default model.'),
    temperature: z.number().min(0).max(2).optional(),
    maxTokens: z.number().int().min(1).max(16_000).optional(),
    variable: variableNameSchema.optional().describe('Also stores the answer here (it is always in `last_response`).'),
    next: stepIdSchema.optional(),
    failure: stepIdSchema
      .optional()
      .describe('When the model or the knowledge base fails (default: report and go on).'),
    notFound: stepIdSchema
      .optional()
      .describe('For `source: knowledge-base`: when nothing relevant was found (default: `next`).'),
  })
  .describe('Has a language model answer: streamed as completion traces, or from the knowledge base as one text.');

type AiStep = z.infer<typeof schema>;

export const aiStep = defineStepType<AiStep>({
  type: 'ai',
  description:
    'A response written by the language model (streamed in pieces: `completion` traces, or one `text` with `ai: true`), or an answer from the knowledge base (one `text` with `ai: true`); `path` `ai:answered` / `ai:not-found` / `ai:failure`.',
  schema,
  exits: (step) => [
    { field: 'next', target: step.next },
    { field: 'failure', target: step.failure },
    { field: 'notFound', target: step.notFound },
  ],
  references: (step) => ({
    templates: [
      { field: 'prompt', text: step.prompt },
      ...(step.system ? [{ field: 'system', text: step.system }] : []),
    ],
    jsonTemplates:
      step.knowledgeBase?.filters === undefined
        ? []
        : [{ field: 'knowledgeBase.filters', value: step.knowledgeBase.filters }],
    writes: step.variable ? [{ field: 'variable', name: step.variable }] : [],
  }),
  validate: (step) =>
    step.knowledgeBase && step.source !== 'knowledge-base'
      ? [{ severity: 'warning', field: 'knowledgeBase', message: 'is only used with source "knowledge-base"' }]
      : [],
  async run(step, ctx) {
    const prompt = ctx.interpolate(step.prompt);
    const system = step.system ? ctx.interpolate(step.system) : undefined;
    const failed = (message: string) => {
      ctx.debug(message, 'error');
      return { kind: 'next' as const, target: step.failure ?? step.next, path: 'ai:failure' };
    };

    if (step.source === 'knowledge-base') {
      const ask = ctx.services.askKnowledgeBase;
      if (!ask) return failed('This runtime has no knowledge base.');
      try {
        const answer = await ask({
          question: prompt,
          chunkLimit: step.knowledgeBase?.chunkLimit ?? 3,
          filters:
            step.knowledgeBase?.filters === undefined ? undefined : ctx.interpolateJson(step.knowledgeBase.filters),
          synthesis: true,
          settings: { model: step.model, temperature: step.temperature, system, maxTokens: step.maxTokens },
          stepId: step.id,
          flowId: ctx.flowId,
          signal: ctx.signal,
        });
        if (answer.output === null) {
          return { kind: 'next', target: step.notFound ?? step.next, path: 'ai:not-found' };
        }
        // SPEC.md: completion traces are for model answers, the knowledge-base data source excluded.
        ctx.emit('text', { message: answer.output, ai: true });
        ctx.variables.set('last_response', answer.output);
        if (step.variable) ctx.variables.set(step.variable, answer.output);
        return { kind: 'next', target: step.next, path: 'ai:answered' };
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        return failed(`The knowledge-base answer failed: ${(err as Error).message}`);
      }
    }

    const llm = ctx.services.llm;
    if (!llm) return failed('This runtime has no language model.');
    const messages = [
      ...(system ? [{ role: 'system' as const, content: system }] : []),
      { role: 'user' as const, content: prompt },
    ];
    const answer = ctx.completion({ model: step.model ?? llm.info.defaultModel });
    let text = '';
    try {
      for await (const event of llm.stream({
        messages,
        model: step.model,
        temperature: step.temperature,
        maxTokens: step.maxTokens,
        signal: ctx.signal,
      })) {
        if (event.type === 'delta') {
          text += event.text;
          answer.content(event.text);
          continue;
        }
        const { accounting } = event.result;
        answer.end({
          query: accounting.inputTokens,
          answer: accounting.outputTokens,
          total: accounting.inputTokens + accounting.outputTokens,
        });
        await ctx.services.recordCredit?.(
          { model: accounting.model, inputTokens: accounting.inputTokens, outputTokens: accounting.outputTokens },
          { stepId: step.id, flowId: ctx.flowId },
        );
      }
    } catch (err) {
      answer.end();
      if (ctx.signal.aborted) throw err;
      return failed(`The language model failed: ${(err as Error).message}`);
    }
    if (step.variable) ctx.variables.set(step.variable, text);
    return { kind: 'next', target: step.next, path: 'ai:answered' };
  },
});
