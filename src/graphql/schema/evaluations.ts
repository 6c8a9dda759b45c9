import { evaluationResultsOverTime, type ResultsOverTime } from '../../evaluations/results-over-time';
import {
  createEvaluation,
  deleteEvaluation,
  estimateEvaluations,
  projectOfEvaluations,
  type QueueOutcome,
  type QueueQuotaWarning,
  queueEvaluations,
  runEvaluationNow,
  updateEvaluation,
} from '../../evaluations/service';
import {
  createEvaluationBody,
  estimateEvaluationsInput,
  evaluationTypes,
  queueEvaluationsBody,
  resultsOverTimeArgsSchema,
  updateEvaluationBody,
} from '../../evaluations/validation';
import { requireOwned, requireProject } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';
import { TranscriptEventType, TranscriptSearchCriteriaInput } from './transcripts';
import { UsageGranularityEnum } from './usage';

/**
 * Evaluation definitions and results (DECISIONS.md §5). Reading needs `transcripts:read`;
 * defining, changing and deleting evaluations needs `admin` (DECISIONS.md §2 lists evaluations
 * among what admin manages); running and queueing them needs `transcripts:write`.
 */

const TranscriptEvaluationTypeEnum = builder.enumType('TranscriptEvaluationType', { values: evaluationTypes });

const evaluationDeps = (ctx: Context) => ({
  db: ctx.services.db,
  pubsub: ctx.services.pubsub,
  llm: ctx.services.llm,
  logger: ctx.services.logger.child({ component: 'evaluations' }),
});

export const TranscriptEvaluationType = builder.prismaObject('Evaluation', {
  name: 'TranscriptEvaluation',
  description: 'An evaluation: a question a language model answers about each ended transcript.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectID: t.exposeID('projectId'),
    name: t.exposeString('name'),
    description: t.exposeString('description', { nullable: true }),
    default: t.boolean({ resolve: () => false }),
    enabled: t.exposeBoolean('enabled'),
    averageCost: t.exposeFloat('averageCost', {
      nullable: true,
      description: 'Average cost of its finished runs; null before the first.',
    }),
    prompt: t.exposeString('prompt'),
    settings: t.expose('settings', { type: 'JSON', description: '{model?, temperature?, maxTokens?}' }),
    type: t.exposeString('type', { description: 'boolean, number or string.' }),
    truePrompt: t.exposeString('truePrompt', { nullable: true }),
    falsePrompt: t.exposeString('falsePrompt', { nullable: true }),
    minimumValue: t.exposeInt('minimumValue', { nullable: true }),
    minimumPrompt: t.exposeString('minimumPrompt', { nullable: true }),
    maximumValue: t.exposeInt('maximumValue', { nullable: true }),
    maximumPrompt: t.exposeString('maximumPrompt', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const TranscriptEvaluationResultType = builder.prismaObject('EvaluationResult', {
  name: 'TranscriptEvaluationResult',
  description: "An evaluation's result on a transcript, with the evaluation's name and type.",
  // What the result shows of its evaluation comes with every result (a join on the evaluation's
  // key), so those fields read it as plain resolvers: as per-field selections each was wrapped by
  // plugin-prisma, which looked up its loader mapping on every row (five lookups per result).
  include: {
    evaluation: {
      select: { name: true, description: true, type: true, minimumValue: true, maximumValue: true },
    },
  },
  fields: (t) => ({
    id: t.exposeID('evaluationId', { description: "The evaluation's ID." }),
    evaluationID: t.exposeID('evaluationId'),
    transcriptID: t.exposeID('transcriptId'),
    name: t.string({ resolve: (r) => r.evaluation.name }),
    description: t.string({ nullable: true, resolve: (r) => r.evaluation.description }),
    default: t.boolean({ resolve: () => false }),
    type: t.string({ resolve: (r) => r.evaluation.type }),
    minimumValue: t.int({ nullable: true, resolve: (r) => r.evaluation.minimumValue }),
    maximumValue: t.int({ nullable: true, resolve: (r) => r.evaluation.maximumValue }),
    // Scalars: every row carries them (the type's rows are loaded with all their columns).
    value: t.field({
      type: 'JSON',
      nullable: true,
      description: 'A boolean, number or string by the evaluation type; null unless status is done.',
      resolve: (r) => r.valueBoolean ?? r.valueNumber ?? r.valueString ?? null,
    }),
    reason: t.exposeString('reason', { nullable: true }),
    cost: t.exposeFloat('cost', { nullable: true }),
    status: t.exposeString('status', { description: 'pending, done, failed or skipped.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why a failed run failed.' }),
    model: t.exposeString('model', { nullable: true, description: 'The judge model of the run.' }),
    inputTokens: t.exposeInt('inputTokens', { nullable: true }),
    outputTokens: t.exposeInt('outputTokens', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

builder.objectField(TranscriptEventType, 'result', (t) =>
  t.prismaField({
    type: TranscriptEvaluationResultType,
    nullable: true,
    description: 'For kind result: the stored result.',
    resolve: (query, event, _args, ctx) => {
      // Spread before the null path too: plugin-prisma counts a query never read as unused
      // (onUnusedQuery 'error' outside production), which failed every `logs` event.
      const selection = { ...query };
      return event.evaluationId
        ? ctx.services.db.prisma.evaluationResult.findUnique({
            ...selection,
            where: {
              evaluationId_transcriptId: { evaluationId: event.evaluationId, transcriptId: event.transcriptId },
            },
          })
        : null;
    },
  }),
);

const EvaluationSettingsInput = builder.inputType('TranscriptEvaluationSettingsInput', {
  fields: (t) => ({
    model: t.string({ description: "Default: the provider's default model." }),
    temperature: t.float({ description: 'Default 0.' }),
    maxTokens: t.int({ description: 'Default 400.' }),
  }),
});

const CreateEvaluationInput = builder.inputType('CreateTranscriptEvaluationInput', {
  description: 'boolean evaluations need truePrompt and falsePrompt; number ones the four range fields.',
  fields: (t) => ({
    projectID: t.id({ required: true }),
    name: t.string({ required: true }),
    description: t.string(),
    enabled: t.boolean({ description: 'Default true.' }),
    type: t.field({ type: TranscriptEvaluationTypeEnum, required: true }),
    prompt: t.string({ required: true }),
    settings: t.field({ type: EvaluationSettingsInput }),
    truePrompt: t.string(),
    falsePrompt: t.string(),
    minimumValue: t.int(),
    minimumPrompt: t.string(),
    maximumValue: t.int(),
    maximumPrompt: t.string(),
  }),
});

const UpdateEvaluationInput = builder.inputType('UpdateTranscriptEvaluationInput', {
  description: 'Everything but projectID, type and the numeric range may change.',
  fields: (t) => ({
    name: t.string(),
    description: t.string(),
    enabled: t.boolean(),
    prompt: t.string(),
    settings: t.field({ type: EvaluationSettingsInput }),
    truePrompt: t.string(),
    falsePrompt: t.string(),
    minimumPrompt: t.string(),
    maximumPrompt: t.string(),
  }),
});

const QueueEvaluationsInput = builder.inputType('QueueTranscriptEvaluationsInput', {
  fields: (t) => ({
    projectID: t.id({ required: true }),
    evaluationIDs: t.idList({ required: true, description: '1 to 10.' }),
    transcriptIDs: t.idList({ required: true, description: '1 to 100.' }),
  }),
});

const EstimateEvaluationsInput = builder.inputType('EstimateTranscriptEvaluationsInput', {
  fields: (t) => ({
    projectID: t.id({ description: "Optional: the evaluations' project (all must belong to one)." }),
    evaluationIDs: t.idList({ required: true }),
    criteria: t.field({ type: TranscriptSearchCriteriaInput, description: 'Which transcripts, as in a search.' }),
  }),
});

const QueueQuotaWarningType = builder.objectRef<QueueQuotaWarning>('QueueTranscriptEvaluationsWarning').implement({
  description: "Part of the request did not fit in the project's evaluation queue (the original's quota_exceeded).",
  fields: (t) => ({
    type: t.exposeString('type', { description: 'quota_exceeded.' }),
    message: t.exposeString('message'),
    skippedTranscriptIDs: t.exposeIDList('skippedTranscriptIDs', { description: 'Transcripts not queued.' }),
  }),
});

const QueueEvaluationsPayload = builder.objectRef<QueueOutcome>('QueueTranscriptEvaluationsPayload').implement({
  fields: (t) => ({
    transcriptCount: t.exposeInt('transcriptCount', { description: 'Transcripts queued.' }),
    evaluationCount: t.exposeInt('evaluationCount', { description: 'Evaluation runs queued, across all transcripts.' }),
    warning: t.field({ type: QueueQuotaWarningType, nullable: true, resolve: (p) => p.warning }),
    notes: t.exposeStringList('notes', {
      description: 'Other things worth knowing: disabled evaluations, transcripts not yet ended.',
    }),
  }),
});

const EstimateShape = builder
  .objectRef<{ totalCost: number; transcriptCount: number; evaluations: { id: string; cost: number }[] }>(
    'TranscriptEvaluationEstimate',
  )
  .implement({
    fields: (t) => ({
      totalCost: t.exposeFloat('totalCost'),
      transcriptCount: t.exposeInt('transcriptCount'),
      evaluations: t.field({
        type: [
          builder.objectRef<{ id: string; cost: number }>('TranscriptEvaluationCostEstimate').implement({
            fields: (f) => ({ id: f.exposeID('id'), cost: f.exposeFloat('cost') }),
          }),
        ],
        resolve: (e) => e.evaluations,
      }),
    }),
  });

const ResultsPointType = builder
  .objectRef<ResultsOverTime['points'][number]>('TranscriptEvaluationResultsPoint')
  .implement({
    description: 'The finished results of the conversations that started in one bucket.',
    fields: (t) => ({
      start: t.expose('start', { type: 'DateTime' }),
      end: t.expose('end', { type: 'DateTime' }),
      count: t.exposeInt('count'),
      trueCount: t.exposeInt('trueCount', { description: 'Results whose value is true (boolean evaluations).' }),
      average: t.exposeFloat('average', {
        nullable: true,
        description:
          'Number evaluations: the mean value; boolean: the share of true, 0 to 1; null without results or for string evaluations.',
      }),
    }),
  });

const ResultsValueCountType = builder
  .objectRef<ResultsOverTime['values'][number]>('TranscriptEvaluationValueCount')
  .implement({
    fields: (t) => ({
      value: t.field({ type: 'JSON', nullable: true, resolve: (v) => v.value }),
      count: t.exposeInt('count'),
    }),
  });

const ResultsOverTimeType = builder
  .objectRef<ResultsOverTime & { evaluationID: string; type: string; granularity: string; timeZone: string }>(
    'TranscriptEvaluationResultsOverTime',
  )
  .implement({
    fields: (t) => ({
      evaluationID: t.exposeID('evaluationID'),
      type: t.field({ type: TranscriptEvaluationTypeEnum, resolve: (r) => r.type as 'boolean' }),
      granularity: t.field({ type: UsageGranularityEnum, resolve: (r) => r.granularity as 'day' }),
      timeZone: t.exposeString('timeZone'),
      total: t.exposeInt('total', { description: 'Finished results of the conversations of the range.' }),
      points: t.field({
        type: [ResultsPointType],
        description: 'Every bucket of the range, oldest first, zero where nothing was judged.',
        resolve: (r) => r.points,
      }),
      values: t.field({
        type: [ResultsValueCountType],
        description: 'Each value of the range with its count, most frequent first (at most 50).',
        resolve: (r) => r.values,
      }),
    }),
  });

builder.queryFields((t) => ({
  transcriptEvaluations: t.prismaField({
    type: [TranscriptEvaluationType],
    description: 'The evaluations of a project, oldest first.',
    authScopes: { scope: 'transcripts:read' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return ctx.services.db.prisma.evaluation.findMany({
        ...query,
        where: { projectId: project.id },
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      });
    },
  }),
  transcriptEvaluationResultsOverTime: t.field({
    type: ResultsOverTimeType,
    description:
      "An evaluation's finished results by when the conversations started, from startTime to endTime: per bucket (hour, or local day, week or month in timeZone) the count, the trues and the average, and the count of each value over the range. Aggregated over every transcript of the range.",
    authScopes: { scope: 'transcripts:read' },
    args: t.validate(
      {
        evaluationID: t.arg.id({ required: true }),
        startTime: t.arg.string({ required: true }),
        endTime: t.arg.string({ required: true }),
        granularity: t.arg({ type: UsageGranularityEnum, defaultValue: 'day' }),
        timeZone: t.arg.string({ defaultValue: 'UTC', description: 'An IANA time zone, e.g. Europe/Berlin.' }),
      },
      resultsOverTimeArgsSchema,
    ),
    resolve: async (_root, args, ctx) => {
      await requireOwned(ctx, 'Evaluation', args.evaluationID);
      const evaluation = await ctx.services.db.prisma.evaluation.findUniqueOrThrow({
        where: { id: args.evaluationID },
        select: { type: true },
      });
      const result = await evaluationResultsOverTime(ctx.services.db, evaluation.type, {
        evaluationId: args.evaluationID,
        start: args.startTime,
        end: args.endTime,
        granularity: args.granularity,
        timeZone: args.timeZone,
      });
      return {
        ...result,
        evaluationID: args.evaluationID,
        type: evaluation.type,
        granularity: args.granularity,
        timeZone: args.timeZone,
      };
    },
  }),
  transcriptEvaluation: t.prismaField({
    type: TranscriptEvaluationType,
    authScopes: { scope: 'transcripts:read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      await requireOwned(ctx, 'Evaluation', String(args.id));
      return ctx.services.db.prisma.evaluation.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  transcriptEvaluationEstimate: t.field({
    type: EstimateShape,
    description: "What running evaluations on the transcripts matching criteria would cost, from each one's average.",
    authScopes: { scope: 'transcripts:read' },
    args: {
      input: t.arg({ type: EstimateEvaluationsInput, required: true }).validate(estimateEvaluationsInput),
    },
    resolve: async (_root, { input }, ctx) => {
      // The original's estimate names no project: it is the evaluations' (a key that does not reach it sees 404).
      const projectID = input.projectID ?? (await projectOfEvaluations(ctx.services.db, input.evaluationIDs));
      const project = await requireProject(ctx, projectID);
      return estimateEvaluations(ctx.services.db, {
        projectId: project.id,
        criteria: input.criteria ?? {},
        evaluationIds: input.evaluationIDs,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  createTranscriptEvaluation: t.prismaField({
    type: TranscriptEvaluationType,
    description: 'Defines an evaluation (admin scope). Names are unique per project.',
    authScopes: { scope: 'admin' },
    args: { input: t.arg({ type: CreateEvaluationInput, required: true }).validate(createEvaluationBody) },
    resolve: async (query, _root, { input }, ctx) => {
      await requireProject(ctx, input.projectID);
      const created = await createEvaluation(ctx.services.db, input);
      return ctx.services.db.prisma.evaluation.findUniqueOrThrow({ ...query, where: { id: created.id } });
    },
  }),
  updateTranscriptEvaluation: t.prismaField({
    type: TranscriptEvaluationType,
    authScopes: { scope: 'admin' },
    args: {
      id: t.arg.id({ required: true }),
      input: t.arg({ type: UpdateEvaluationInput, required: true }).validate(updateEvaluationBody),
    },
    resolve: async (query, _root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Evaluation', String(args.id));
      await updateEvaluation(ctx.services.db, { projectId, evaluationId: String(args.id), patch: args.input });
      return ctx.services.db.prisma.evaluation.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  deleteTranscriptEvaluation: t.id({
    description: 'Deletes an evaluation and its results. Returns its ID.',
    authScopes: { scope: 'admin' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Evaluation', String(args.id));
      await deleteEvaluation(ctx.services.db, { projectId, evaluationId: String(args.id) });
      return String(args.id);
    },
  }),
  runTranscriptEvaluation: t.prismaField({
    type: TranscriptEvaluationResultType,
    description: 'Runs an evaluation on a transcript now and returns the stored result.',
    authScopes: { scope: 'transcripts:write' },
    args: {
      projectID: t.arg.id({ required: true }),
      evaluationID: t.arg.id({ required: true }),
      transcriptID: t.arg.id({ required: true }),
    },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const done = await runEvaluationNow(evaluationDeps(ctx), {
        projectId: project.id,
        evaluationId: String(args.evaluationID),
        transcriptId: String(args.transcriptID),
      });
      return ctx.services.db.prisma.evaluationResult.findUniqueOrThrow({
        ...query,
        where: { evaluationId_transcriptId: { evaluationId: done.evaluationId, transcriptId: done.transcriptId } },
      });
    },
  }),
  queueTranscriptEvaluations: t.field({
    type: QueueEvaluationsPayload,
    description: "Queues evaluation runs on transcripts; 429 with Retry-After when the project's queue is full.",
    authScopes: { scope: 'transcripts:write' },
    args: { input: t.arg({ type: QueueEvaluationsInput, required: true }).validate(queueEvaluationsBody) },
    resolve: async (_root, { input }, ctx) => {
      const project = await requireProject(ctx, input.projectID);
      return queueEvaluations(evaluationDeps(ctx), {
        projectId: project.id,
        evaluationIds: input.evaluationIDs,
        transcriptIds: input.transcriptIDs,
        limit: ctx.services.config.EVALUATION_QUEUE_LIMIT,
      });
    },
  }),
}));
