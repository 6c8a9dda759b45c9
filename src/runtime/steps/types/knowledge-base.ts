import { z } from 'zod';
import { jsonValueSchema, stepIdSchema, templateSchema, variableNameSchema } from '../../program/common';
import { defineStepType } from '../step-type';

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('kb'),
    name: z.string().max(200).optional(),
    question: templateSchema
      .min(1)
      .optional()
      .describe('What to look up; default `{last_utterance}` (the user’s last words).'),
    chunkLimit: z.number().int().min(1).max(10).optional().describe('Chunks to retrieve (default 3).'),
    filters: jsonValueSchema
      .optional()
      .describe('A metadata filter (docs/knowledge-base-filters.md); its strings may hold `{variable}` placeholders.'),
    variable: variableNameSchema.describe(
      'Receives the chunks found: [{content, score, documentID, chunkID, metadata, source}], best first.',
    ),
    next: stepIdSchema.optional().describe('When at least one chunk was found.'),
    notFound: stepIdSchema.optional().describe('When nothing was found (or the search failed).'),
  })
  .describe('Searches the project’s knowledge base and stores the chunks found in a variable.');

type KnowledgeBaseStep = z.infer<typeof schema>;

export const knowledgeBaseStep = defineStepType<KnowledgeBaseStep>({
  type: 'kb',
  description:
    'Searches the knowledge base (full text, plus embeddings when configured) with an optional metadata filter; stores the chunks found in a variable; `path` `kb:found` / `kb:not-found`.',
  schema,
  exits: (step) => [
    { field: 'next', target: step.next },
    { field: 'notFound', target: step.notFound },
  ],
  references: (step) => ({
    templates: step.question ? [{ field: 'question', text: step.question }] : [],
    jsonTemplates: step.filters === undefined ? [] : [{ field: 'filters', value: step.filters }],
    writes: [{ field: 'variable', name: step.variable }],
  }),
  async run(step, ctx) {
    const ask = ctx.services.askKnowledgeBase;
    const question = ctx.interpolate(step.question ?? '{last_utterance}').trim();
    const notFound = () => ({ kind: 'next' as const, target: step.notFound, path: 'kb:not-found' });
    if (!ask) {
      ctx.debug('This runtime has no knowledge base.', 'kb');
      ctx.variables.set(step.variable, []);
      return notFound();
    }
    if (!question) {
      ctx.debug('The knowledge-base question is empty.', 'kb');
      ctx.variables.set(step.variable, []);
      return notFound();
    }
    try {
      const answer = await ask({
        question,
        chunkLimit: step.chunkLimit ?? 3,
        filters: step.filters === undefined ? undefined : ctx.interpolateJson(step.filters),
        synthesis: false,
        stepId: step.id,
        flowId: ctx.flowId,
        signal: ctx.signal,
      });
      ctx.variables.set(step.variable, answer.chunks);
      ctx.debug(`Knowledge base: ${answer.chunks.length} chunk(s) found for "${question}".`, 'kb');
      return answer.chunks.length ? { kind: 'next', target: step.next, path: 'kb:found' } : notFound();
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      ctx.debug(`The knowledge-base search failed: ${(err as Error).message}`, 'error');
      ctx.variables.set(step.variable, []);
      return notFound();
    }
  },
});
