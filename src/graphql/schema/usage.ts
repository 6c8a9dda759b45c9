import { z } from 'zod';
import { type UsageRange, usageTimeSeries, usageTotals } from '../../analytics/aggregates';
import { resolveEnvironmentFilter, resolveEventEnvironments } from '../../analytics/environments';
import { parseIngestedBatch } from '../../analytics/ingest-check';
import { queryUsage, type TopIntentsResult, type UsageItemsResult, type UsageResult } from '../../analytics/query';
import { granularities } from '../../analytics/time-buckets';
import { recordUsageEvents } from '../../analytics/usage-event-writer';
import {
  type AgentUsageItem,
  type ApiCallsItem,
  type CreditUsageItem,
  type FunctionUsageItem,
  type IntegrationsItem,
  type InteractionsItem,
  type KbDocumentsItem,
  type UsageQueryName,
  usageEventKinds,
  usageQueryNames,
} from '../../analytics/usage-metrics';
import { type UsageSummary, usageSummary, usageSummaryNames } from '../../analytics/usage-summary';
import {
  type IngestedUsageEvent,
  type ParsedUsageFilter,
  toRecorderEvent,
  usageQuerySchema,
  usageRangeSchema,
  usageSeriesArgsSchema,
  usageSummaryArgsSchema,
} from '../../analytics/validation';
import { AppError } from '../../lib/errors';
import type { UsageCountersPayload } from '../../lib/pubsub';
import { requireProject } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';

// ── Types ──────────────────────────────────────────────────────────────────────────────────────

const UsageQueryNameEnum = builder.enumType('UsageQueryName', {
  description: 'The usage queries of SPEC.md; also the metric of a counter.',
  values: usageQueryNames,
});

const UsageEventKindEnum = builder.enumType('UsageEventKind', {
  description: 'What a usage event records (docs/usage.md).',
  values: usageEventKinds,
});

export const UsageGranularityEnum = builder.enumType('UsageGranularity', {
  description: 'Bucket size of a time series: UTC hours, or local days, ISO weeks (from Monday) and months.',
  values: granularities,
});

interface UsageItemShape {
  period: Date;
  projectID: string;
  environmentID: string;
  count: number;
}

const UsageItemInterface = builder.interfaceRef<UsageItemShape>('UsageItem').implement({
  description: 'What every usage item has: its UTC hour, project, environment and count.',
  fields: (t) => ({
    period: t.expose('period', { type: 'DateTime', description: 'The start of the UTC hour.' }),
    projectID: t.exposeID('projectID'),
    environmentID: t.exposeID('environmentID'),
    count: t.expose('count', { type: 'SafeInt' }),
  }),
});

const InteractionsItemType = builder.objectRef<InteractionsItem>('InteractionsUsageItem').implement({
  interfaces: [UsageItemInterface],
  fields: (t) => ({ type: t.exposeString('type', { description: 'The action type: launch, text, intent...' }) }),
});
const UniqueUsersItemType = builder.objectRef<UsageItemShape>('UniqueUsersUsageItem').implement({
  description: '`count` is the number of distinct user IDs seen in the hour.',
  interfaces: [UsageItemInterface],
  fields: () => ({}),
});
const CreditUsageItemType = builder.objectRef<CreditUsageItem>('CreditUsageItem').implement({
  description: '`count` is tokens.',
  interfaces: [UsageItemInterface],
  fields: (t) => ({
    diagramID: t.exposeString('diagramID', { description: "'' when not called from a flow." }),
    nodeID: t.exposeString('nodeID', { description: "'' when not called from a flow." }),
    model: t.exposeString('model'),
    type: t.exposeString('type', { description: 'llm-input or llm-output.' }),
  }),
});
const FunctionUsageItemType = builder.objectRef<FunctionUsageItem>('FunctionUsageItem').implement({
  interfaces: [UsageItemInterface],
  fields: (t) => ({
    functionID: t.exposeString('functionID'),
    name: t.exposeString('name'),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});
const ApiCallsItemType = builder.objectRef<ApiCallsItem>('ApiCallsUsageItem').implement({
  interfaces: [UsageItemInterface],
  fields: (t) => ({
    apiToolID: t.exposeString('apiToolID'),
    name: t.exposeString('name'),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});
const KbDocumentsItemType = builder.objectRef<KbDocumentsItem>('KbDocumentsUsageItem').implement({
  description: '`count` is how often the document was retrieved.',
  interfaces: [UsageItemInterface],
  fields: (t) => ({ documentID: t.exposeString('documentID') }),
});
const IntegrationsItemType = builder.objectRef<IntegrationsItem>('IntegrationsUsageItem').implement({
  interfaces: [UsageItemInterface],
  fields: (t) => ({
    integrationToolName: t.exposeString('integrationToolName'),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});
const TranscriptsItemType = builder.objectRef<UsageItemShape>('TranscriptsUsageItem').implement({
  description: '`count` is the number of transcripts created in the hour.',
  interfaces: [UsageItemInterface],
  fields: () => ({}),
});
const AgentUsageItemType = builder.objectRef<AgentUsageItem>('AgentUsageItem').implement({
  description: '`count` is agent turns; `successCount` those that finished without error.',
  interfaces: [UsageItemInterface],
  fields: (t) => ({
    agentID: t.exposeString('agentID'),
    name: t.exposeString('name'),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});

const cursorDescription =
  'Present when more items exist: send it back as filter.cursor for the next page. Opaque; it stays valid while data for closed hours does not change.';

type ItemsResultOf<N extends UsageItemsResult['name']> = Extract<UsageItemsResult, { name: N }>;

/** One result type per items query: `items` of that query's item type, plus `cursor`. */
function itemsResultType<N extends UsageItemsResult['name']>(
  typeName: string,
  // biome-ignore lint/suspicious/noExplicitAny: any object ref whose shape is the query's item; checked by ItemsResultOf.
  itemType: any,
) {
  return builder.objectRef<ItemsResultOf<N>>(typeName).implement({
    fields: (t) => ({
      items: t.field({ type: [itemType], resolve: (r) => r.items }),
      cursor: t.field({ type: 'SafeInt', nullable: true, description: cursorDescription, resolve: (r) => r.cursor }),
    }),
  });
}

const TopIntentType = builder.objectRef<TopIntentsResult['intents'][number]>('TopIntent').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    count: t.expose('count', { type: 'SafeInt', description: 'Times the intent was matched in the range.' }),
  }),
});

const resultTypes = {
  interactions: itemsResultType<'interactions'>('InteractionsUsage', InteractionsItemType),
  top_intents: builder.objectRef<TopIntentsResult>('TopIntentsUsage').implement({
    fields: (t) => ({ intents: t.field({ type: [TopIntentType], resolve: (r) => r.intents }) }),
  }),
  unique_users: itemsResultType<'unique_users'>('UniqueUsersUsage', UniqueUsersItemType),
  credit_usage: itemsResultType<'credit_usage'>('CreditUsage', CreditUsageItemType),
  function_usage: itemsResultType<'function_usage'>('FunctionUsage', FunctionUsageItemType),
  api_calls: itemsResultType<'api_calls'>('ApiCallsUsage', ApiCallsItemType),
  kb_documents: itemsResultType<'kb_documents'>('KbDocumentsUsage', KbDocumentsItemType),
  integrations: itemsResultType<'integrations'>('IntegrationsUsage', IntegrationsItemType),
  transcripts: itemsResultType<'transcripts'>('TranscriptsUsage', TranscriptsItemType),
  agent_usage: itemsResultType<'agent_usage'>('AgentUsage', AgentUsageItemType),
} satisfies Record<UsageQueryName, unknown>;

const typeNameOf: Record<UsageQueryName, string> = {
  interactions: 'InteractionsUsage',
  top_intents: 'TopIntentsUsage',
  unique_users: 'UniqueUsersUsage',
  credit_usage: 'CreditUsage',
  function_usage: 'FunctionUsage',
  api_calls: 'ApiCallsUsage',
  kb_documents: 'KbDocumentsUsage',
  integrations: 'IntegrationsUsage',
  transcripts: 'TranscriptsUsage',
  agent_usage: 'AgentUsage',
};

const UsageResultUnion = builder.unionType('UsageResult', {
  description: 'The result of a usage query; its type follows the query name.',
  types: Object.values(resultTypes),
  resolveType: (result: UsageResult) => typeNameOf[result.name],
});

const UsageFilterInput = builder.inputType('UsageFilterInput', {
  description:
    'SPEC.md "Usage filter". Every query but top_intents takes cursor. Timestamps are ISO 8601 with a zone designator. A member sent as null counts as absent.',
  fields: (t) => ({
    projectID: t.string({ required: true }),
    startTime: t.string({ description: 'Items whose period is at or after this instant.' }),
    endTime: t.string({ description: 'Items whose period is before this instant.' }),
    projectEnvironmentIDOrAlias: t.stringList({
      description: 'Environment IDs or aliases (a single string is accepted as a list of one); absent: all.',
    }),
    limit: t.int({ description: 'Items wanted: 1 to 500, default 100.' }),
    cursor: t.field({ type: 'SafeInt', description: 'The cursor of the previous page.' }),
  }),
});

const UsageRangeInput = builder.inputType('UsageRangeInput', {
  description: "A range of a project's usage; time series need both startTime and endTime.",
  fields: (t) => ({
    projectID: t.string({ required: true }),
    startTime: t.string(),
    endTime: t.string(),
    projectEnvironmentIDOrAlias: t.stringList(),
  }),
});

const UsageCallTotalType = builder.objectRef<{ count: number; successCount: number }>('UsageCallTotal').implement({
  fields: (t) => ({
    count: t.expose('count', { type: 'SafeInt' }),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});

type Totals = Awaited<ReturnType<typeof usageTotals>>;

const UsageTotalsType = builder.objectRef<Totals>('UsageTotals').implement({
  description: 'Totals over a range, across the selected environments.',
  fields: (t) => ({
    interactions: t.field({ type: 'SafeInt', resolve: (r) => r.interactions.count }),
    uniqueUsers: t.field({
      type: 'SafeInt',
      description: 'Distinct user IDs over the whole range and all selected environments.',
      resolve: (r) => r.unique_users.count,
    }),
    creditUsage: t.field({ type: 'SafeInt', description: 'Tokens.', resolve: (r) => r.credit_usage.count }),
    functionUsage: t.field({ type: UsageCallTotalType, resolve: (r) => r.function_usage }),
    apiCalls: t.field({ type: UsageCallTotalType, resolve: (r) => r.api_calls }),
    kbDocuments: t.field({ type: 'SafeInt', resolve: (r) => r.kb_documents.count }),
    integrations: t.field({ type: UsageCallTotalType, resolve: (r) => r.integrations }),
    transcripts: t.field({ type: 'SafeInt', resolve: (r) => r.transcripts.count }),
    agentUsage: t.field({ type: UsageCallTotalType, resolve: (r) => r.agent_usage }),
    intents: t.field({ type: 'SafeInt', description: 'Intent matches.', resolve: (r) => r.top_intents.count }),
  }),
});

const UsageSummaryNameEnum = builder.enumType('UsageSummaryName', {
  description:
    'The v1 usage queries Parley answers (POST /v1/query/usage). The original also names top_slots and understood_messages, which Parley does not record.',
  values: usageSummaryNames,
});

const UsageSummaryFilterInput = builder.inputType('UsageSummaryFilterInput', {
  description:
    'A range of one or more projects (all their environments). Timestamps are ISO 8601 with a zone designator.',
  fields: (t) => ({
    projectID: t.stringList({
      required: true,
      description:
        'Project IDs (a single string is a list of one), at most 20; every one must be reachable by the key.',
    }),
    startTime: t.string({ description: 'Usage in hours starting at or after this instant.' }),
    endTime: t.string({ description: 'Usage in hours starting before this instant.' }),
    limit: t.int({ description: 'top_intents: intents wanted, 1 to 500, default 10.' }),
    offset: t.int({ description: 'top_intents: intents skipped first, default 0.' }),
  }),
});

const UsageSummaryQueryInput = builder.inputType('UsageSummaryQueryInput', {
  fields: (t) => ({
    name: t.field({ type: UsageSummaryNameEnum, required: true }),
    filter: t.field({ type: UsageSummaryFilterInput, required: true }),
  }),
});

const TokenUsageType = builder.objectRef<{ model: string; count: number }>('UsageModelTokens').implement({
  fields: (t) => ({
    model: t.exposeString('model'),
    count: t.expose('count', { type: 'SafeInt', description: 'Tokens, input and output.' }),
  }),
});

const UsageSummaryType = builder.objectRef<UsageSummary>('UsageSummary').implement({
  description: 'The answer to one v1 usage query: count, intents or tokens, after its name.',
  fields: (t) => ({
    name: t.expose('name', { type: UsageSummaryNameEnum }),
    count: t.expose('count', {
      type: 'SafeInt',
      nullable: true,
      description:
        'interactions: turns; sessions: conversation sessions (transcripts created); unique_users: distinct user IDs per project.',
    }),
    intents: t.expose('intents', { type: [TopIntentType], nullable: true, description: 'top_intents.' }),
    tokens: t.expose('tokens', {
      type: [TokenUsageType],
      nullable: true,
      description: 'token_usage: tokens per model, most first.',
    }),
  }),
});

interface SeriesShape {
  name: UsageQueryName;
  granularity: (typeof granularities)[number];
  timeZone: string;
  points: { start: Date; end: Date; count: number; successCount: number }[];
}

const UsageTimePointType = builder.objectRef<SeriesShape['points'][number]>('UsageTimePoint').implement({
  fields: (t) => ({
    start: t.expose('start', { type: 'DateTime' }),
    end: t.expose('end', { type: 'DateTime' }),
    count: t.expose('count', { type: 'SafeInt' }),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});

const UsageTimeSeriesType = builder.objectRef<SeriesShape>('UsageTimeSeries').implement({
  fields: (t) => ({
    name: t.expose('name', { type: UsageQueryNameEnum }),
    granularity: t.expose('granularity', { type: UsageGranularityEnum }),
    timeZone: t.exposeString('timeZone'),
    points: t.field({
      type: [UsageTimePointType],
      description: 'Every bucket of the range, oldest first, zero where nothing happened.',
      resolve: (s) => s.points,
    }),
  }),
});

const UsageEventInput = builder.inputType('UsageEventInput', {
  description:
    'One usage event (docs/usage.md). Besides kind, projectID, environment and the optional timestamp, userID and eventID, give the members of its kind only.',
  fields: (t) => ({
    kind: t.field({ type: UsageEventKindEnum, required: true }),
    projectID: t.string({ required: true }),
    environment: t.string({ required: true, description: 'An environment ID or alias of the project.' }),
    timestamp: t.string({ description: 'When it happened (ISO 8601 with zone); default now.' }),
    userID: t.string({ description: 'The end user; counts towards unique_users.' }),
    eventID: t.string({ description: 'Your ID of the event: sent again, it is not counted twice.' }),
    type: t.string({ description: 'interaction: the action type; credit: llm-input or llm-output.' }),
    model: t.string({ description: 'credit' }),
    tokens: t.int({ description: 'credit' }),
    diagramID: t.string({ description: 'credit (optional)' }),
    nodeID: t.string({ description: 'credit (optional)' }),
    functionID: t.string({ description: 'function_call' }),
    apiToolID: t.string({ description: 'api_call' }),
    integrationToolName: t.string({ description: 'integration_call' }),
    documentID: t.string({ description: 'kb_document' }),
    transcriptID: t.string({ description: 'transcript (optional)' }),
    agentID: t.string({ description: 'agent_invocation' }),
    name: t.string({ description: 'intent: the intent; function_call, api_call, agent_invocation: optional name.' }),
    success: t.boolean({ description: 'function_call, api_call, integration_call, agent_invocation' }),
  }),
});

const RecordUsageEventsPayload = builder
  .objectRef<{ recorded: number; duplicates: number }>('RecordUsageEventsPayload')
  .implement({
    fields: (t) => ({
      recorded: t.exposeInt('recorded', { description: 'Events stored now.' }),
      duplicates: t.exposeInt('duplicates', {
        description: 'Events skipped: an event with the same eventID was recorded before.',
      }),
    }),
  });

const UsageHourCounterType = builder.objectRef<UsageCountersPayload['counters'][number]>('UsageHourCounter').implement({
  description: "The new value of an hourly counter (summed over the metric's other keys). Counters only grow.",
  fields: (t) => ({
    name: t.field({ type: UsageQueryNameEnum, resolve: (c) => c.metric as UsageQueryName }),
    environmentID: t.exposeID('environmentId'),
    period: t.field({ type: 'DateTime', resolve: (c) => c.period }),
    count: t.expose('count', { type: 'SafeInt' }),
    successCount: t.expose('successCount', { type: 'SafeInt' }),
  }),
});

const UsageCountersUpdateType = builder.objectRef<UsageCountersPayload>('UsageCountersUpdate').implement({
  fields: (t) => ({
    projectID: t.exposeID('projectId'),
    counters: t.field({ type: [UsageHourCounterType], resolve: (u) => u.counters }),
  }),
});

// ── Root fields ────────────────────────────────────────────────────────────────────────────────

/**
 * The project of a usage read, which SPEC.md answers with 401 when the key does not reach it (or
 * when the project does not exist, so that existence does not leak).
 */
async function usageProject(ctx: Context, projectID: string, environments: string[] | null) {
  const project = await requireProject(ctx, projectID, { denyAs: 'unauthorized' });
  const environmentIds = await resolveEnvironmentFilter(ctx.services.db, project.id, environments);
  return { projectId: project.id, environmentIds };
}

function rangeOf(filter: Pick<ParsedUsageFilter, 'start' | 'end'>, scope: Awaited<ReturnType<typeof usageProject>>) {
  return { ...scope, start: filter.start, end: filter.end } satisfies UsageRange;
}

builder.queryFields((t) => ({
  usage: t.field({
    type: UsageResultUnion,
    description:
      'SPEC.md "Usage": hourly usage of a project, or its top intents (POST /v2/query/usage runs this field).',
    authScopes: { scope: 'analytics:read' },
    args: t.validate(
      {
        name: t.arg({ type: UsageQueryNameEnum, required: true }),
        filter: t.arg({ type: UsageFilterInput, required: true }),
      },
      usageQuerySchema,
    ),
    resolve: async (_root, { name, filter }, ctx) => {
      const scope = await usageProject(ctx, filter.projectID, filter.environments);
      return queryUsage(ctx.services.db, {
        ...rangeOf(filter, scope),
        name,
        limit: filter.limit,
        cursor: filter.cursor,
      });
    },
  }),
  usageSummary: t.field({
    type: [UsageSummaryType],
    description:
      "The original's v1 usage query (POST /v1/query/usage runs this field): one answer per query, in order, over all environments of the projects named.",
    authScopes: { scope: 'analytics:read' },
    args: t.validate({ queries: t.arg({ type: [UsageSummaryQueryInput], required: true }) }, usageSummaryArgsSchema),
    resolve: async (_root, { queries }, ctx) => {
      const answers: UsageSummary[] = [];
      for (const q of queries) {
        const projectIds: string[] = [];
        for (const id of q.filter.projectID) projectIds.push((await usageProject(ctx, id, null)).projectId);
        answers.push(
          await usageSummary(ctx.services.db, {
            name: q.name,
            projectIds,
            start: q.filter.startTime ?? null,
            end: q.filter.endTime ?? null,
            limit: q.filter.limit,
            offset: q.filter.offset,
          }),
        );
      }
      return answers;
    },
  }),
  usageTotals: t.field({
    type: UsageTotalsType,
    description: 'Every metric summed over a range (open on a side without startTime or endTime).',
    authScopes: { scope: 'analytics:read' },
    args: t.validate(
      { filter: t.arg({ type: UsageRangeInput, required: true }) },
      z.object({ filter: usageRangeSchema }),
    ),
    resolve: async (_root, { filter }, ctx) => {
      const scope = await usageProject(ctx, filter.projectID, filter.projectEnvironmentIDOrAlias ?? null);
      return usageTotals(ctx.services.db, {
        ...scope,
        start: filter.startTime ?? null,
        end: filter.endTime ?? null,
      });
    },
  }),
  usageTimeSeries: t.field({
    type: UsageTimeSeriesType,
    description:
      'One metric per bucket from startTime to endTime, zero-filled. Day, week and month buckets begin at local midnight in timeZone, following its daylight-saving changes.',
    authScopes: { scope: 'analytics:read' },
    args: t.validate(
      {
        name: t.arg({ type: UsageQueryNameEnum, required: true }),
        filter: t.arg({ type: UsageRangeInput, required: true }),
        granularity: t.arg({ type: UsageGranularityEnum, defaultValue: 'hour' }),
        timeZone: t.arg.string({ defaultValue: 'UTC', description: 'An IANA time zone, e.g. Europe/Berlin.' }),
      },
      usageSeriesArgsSchema,
    ),
    resolve: async (_root, args, ctx) => {
      const scope = await usageProject(ctx, args.filter.projectID, args.filter.projectEnvironmentIDOrAlias ?? null);
      const points = await usageTimeSeries(ctx.services.db, {
        ...scope,
        name: args.name,
        start: args.filter.startTime,
        end: args.filter.endTime,
        granularity: args.granularity,
        timeZone: args.timeZone,
      });
      return { name: args.name, granularity: args.granularity, timeZone: args.timeZone, points };
    },
  }),
}));

/**
 * Every project an ingestion batch names must be one the key may write usage to; one that is not
 * answers 404 naming the first event that uses it, so other tenants' IDs never leak.
 */
async function requireIngestionProjects(ctx: Context, events: readonly IngestedUsageEvent[]): Promise<void> {
  const firstIndex = new Map<string, number>();
  events.forEach((e, i) => {
    if (!firstIndex.has(e.projectID)) firstIndex.set(e.projectID, i);
  });
  const checks = [...firstIndex].map(async ([projectId, index]) => {
    try {
      await requireProject(ctx, projectId);
    } catch (err) {
      if (err instanceof AppError && err.code === 'NOT_FOUND') {
        throw new AppError('NOT_FOUND', err.message, {
          details: [{ path: `events.${index}.projectID`, message: 'no such project for this API key' }],
        });
      }
      throw err;
    }
  });
  // All at once, so the project loader fetches them in one query; report the first in batch order.
  const outcomes = await Promise.allSettled(checks);
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
}

/** Records a checked batch: the projects the key reaches, their environments, then one write. */
async function recordIngestedEvents(ctx: Context, events: IngestedUsageEvent[]) {
  await requireIngestionProjects(ctx, events);
  const environmentIds = await resolveEventEnvironments(
    ctx.services.db,
    events.map((e) => ({ projectId: e.projectID, environment: e.environment })),
    (index) => `events.${index}.environment`,
  );
  const recorded = await recordUsageEvents(
    { db: ctx.services.db, pubsub: ctx.services.pubsub },
    events.map((e, i) => toRecorderEvent(e, environmentIds[i]!)),
    // Checked by parseIngestedBatch: once is enough.
    { checked: true },
  );
  ctx.services.ops.metrics?.usageEventsIngested.inc({ result: 'recorded' }, recorded.recorded);
  ctx.services.ops.metrics?.usageEventsIngested.inc({ result: 'duplicate' }, recorded.duplicates);
  return { recorded: recorded.recorded, duplicates: recorded.duplicates };
}

builder.mutationFields((t) => ({
  recordUsageEvents: t.field({
    type: RecordUsageEventsPayload,
    description:
      'Ingests up to 1,000 usage events from another runtime. All or nothing. Needs the analytics:write scope.',
    authScopes: { scope: 'analytics:write' },
    args: { events: t.arg({ type: [UsageEventInput], required: true }) },
    // The events are checked once, here (not by plugin-validation): the same rules and errors as
    // recordUsageEventBatch.
    resolve: (_root, { events }, ctx) => recordIngestedEvents(ctx, parseIngestedBatch(events)),
  }),
  recordUsageEventBatch: t.field({
    type: RecordUsageEventsPayload,
    description:
      'recordUsageEvents with the events as one JSON value (POST /v1/usage/events runs this field): the same members, rules and errors, without GraphQL coercing 1,000 input objects member by member. All or nothing. Needs the analytics:write scope.',
    authScopes: { scope: 'analytics:write' },
    args: {
      events: t.arg({
        type: 'JSON',
        required: true,
        description: 'An array of up to 1,000 events, each as UsageEventInput describes it.',
      }),
    },
    resolve: (_root, { events }, ctx) => recordIngestedEvents(ctx, parseIngestedBatch(events)),
  }),
}));

builder.subscriptionField('usageCounters', (t) =>
  t.field({
    type: UsageCountersUpdateType,
    description:
      "A project's hourly counters as events are recorded: each update holds the new values of the counters a write changed.",
    authScopes: { scope: 'analytics:read' },
    args: { projectID: t.arg.id({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID), { denyAs: 'unauthorized' });
      return ctx.services.pubsub.subscribe('usageCounters', project.id);
    },
    resolve: (update) => update,
  }),
);
