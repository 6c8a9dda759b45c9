import DataLoader from 'dataloader';
import type { GraphQLFieldResolver, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { z } from 'zod';
import { notFound } from '../../lib/errors';
import { isId } from '../../lib/ids';
import type { TranscriptEventPayload } from '../../lib/pubsub';
import {
  createProperty,
  deleteProperty,
  deletePropertyValue,
  setPropertyValue,
  updateProperty,
} from '../../transcripts/properties';
import {
  buildTranscriptWhere,
  type FilterTarget,
  loadFilterTargets,
  transcriptOrderBy,
} from '../../transcripts/search';
import {
  buildTranscriptWhereSql,
  countTranscripts,
  isPageRow,
  loadTranscriptPage,
  pageRelationsOf,
} from '../../transcripts/search-page';
import {
  appendTranscriptLogs,
  createTranscript,
  deleteTranscript,
  endTranscript,
  retentionMsOf,
  setRedactionPatterns,
  type TranscriptDeps,
} from '../../transcripts/service';
import {
  appendLogsBody,
  createPropertyBody,
  createTranscriptBody,
  customTraceTypesSchema,
  filterOps,
  logTypes,
  propertyTypes,
  redactionPatternsSchema,
  type SearchCriteria,
  searchCriteriaSchema,
  setPropertyValueBody,
  skipSchema,
  sortOrders,
  takeSchema,
  updatePropertyBody,
} from '../../transcripts/validation';
import { requireOwned, requireProject } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';

/**
 * Transcripts, their logs, property definitions and values (DECISIONS.md §5). Resolvers check
 * access and call src/transcripts; the shapes follow the original service's response schemas.
 */

export const transcriptDeps = (ctx: Context): TranscriptDeps => ({
  db: ctx.services.db,
  pubsub: ctx.services.pubsub,
  retentionMs: retentionMsOf(ctx.services.config),
  phoneRegions: ctx.services.config.TRANSCRIPT_PHONE_REGIONS,
  redactors: ctx.services.redactors,
});

// ── Logs (batched per request) ──────────────────────────────────────────────────────────────────

/** Trace types that filterConversation keeps (RUNTIME-NOTES.md), besides the user's actions. */
export const conversationTraceTypes = ['text', 'speak', 'live-agent-handoff'] as const;

interface LogShape {
  id: string;
  type: string;
  data: unknown;
  createdAt: Date;
  updatedAt: Date;
}

interface LogOptions {
  unredacted: boolean;
  filterConversation: boolean;
  customTraceTypes: readonly string[];
}

const logLoaders = new WeakMap<Context, Map<string, DataLoader<string, LogShape[]>>>();

/** One query for the logs of every transcript a request asks about with the same options. */
function logLoader(ctx: Context, opts: LogOptions): DataLoader<string, LogShape[]> {
  let perRequest = logLoaders.get(ctx);
  if (!perRequest) {
    perRequest = new Map();
    logLoaders.set(ctx, perRequest);
  }
  const key = JSON.stringify(opts);
  let loader = perRequest.get(key);
  if (!loader) {
    loader = new DataLoader(async (ids) => {
      const kept = [...conversationTraceTypes, ...opts.customTraceTypes];
      const rows = await ctx.services.db.prisma.transcriptLog.findMany({
        where: {
          transcriptId: { in: [...ids] },
          ...(opts.filterConversation ? { OR: [{ type: 'action' }, { type: 'trace', traceType: { in: kept } }] } : {}),
        },
        orderBy: [{ transcriptId: 'asc' }, { seq: 'asc' }],
        include: opts.unredacted ? { original: { select: { data: true, expiresAt: true } } } : undefined,
      });
      const now = Date.now();
      const byTranscript = new Map<string, LogShape[]>();
      for (const row of rows) {
        const original = (row as { original?: { data: unknown; expiresAt: Date } | null }).original;
        const data = original && original.expiresAt.getTime() > now ? original.data : row.data;
        const list = byTranscript.get(row.transcriptId) ?? [];
        list.push({ id: row.id, type: row.type, data, createdAt: row.createdAt, updatedAt: row.updatedAt });
        byTranscript.set(row.transcriptId, list);
      }
      return ids.map((id) => byTranscript.get(id) ?? []);
    });
    perRequest.set(key, loader);
  }
  return loader;
}

const historyLoaders = new WeakMap<Context, DataLoader<string, { id: string; createdAt: Date }[]>>();

/** One query for the turns (action logs) of every transcript of a request. */
function historyLoader(ctx: Context) {
  let loader = historyLoaders.get(ctx);
  if (!loader) {
    loader = new DataLoader(async (ids) => {
      const rows = await ctx.services.db.prisma.transcriptLog.findMany({
        where: { transcriptId: { in: [...ids] }, type: 'action' },
        orderBy: [{ transcriptId: 'asc' }, { seq: 'asc' }],
        select: { id: true, transcriptId: true, createdAt: true },
      });
      const by = new Map<string, { id: string; createdAt: Date }[]>();
      for (const r of rows)
        by.set(r.transcriptId, [...(by.get(r.transcriptId) ?? []), { id: r.id, createdAt: r.createdAt }]);
      return ids.map((id) => by.get(id) ?? []);
    });
    historyLoaders.set(ctx, loader);
  }
  return loader;
}

// ── Types ───────────────────────────────────────────────────────────────────────────────────────

export const SortOrderEnum = builder.enumType('SortOrder', { values: sortOrders });
export const TranscriptPropertyTypeEnum = builder.enumType('TranscriptPropertyType', { values: propertyTypes });
const TranscriptLogTypeEnum = builder.enumType('TranscriptLogType', { values: logTypes });
const TranscriptFilterOpEnum = builder.enumType('TranscriptFilterOp', {
  values: filterOps,
  description:
    'neq and nin also match transcripts without a value; exists / not_exists test for one; evaluation filters look at finished results.',
});

export const TranscriptLogType = builder.objectRef<LogShape>('TranscriptLog').implement({
  description:
    "One entry of a transcript, in order: the user's action, a trace the agent emitted, or the end of a turn.",
  fields: (t) => ({
    id: t.exposeID('id'),
    type: t.exposeString('type', { description: 'action, trace or end.' }),
    data: t.expose('data', {
      type: 'JSON',
      nullable: true,
      description: 'The action or trace, redacted unless asked otherwise.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const TranscriptTurnType = builder.objectRef<{ id: string; createdAt: Date }>('TranscriptTurn').implement({
  description: 'A turn of the conversation: the ID and time of the action that started it.',
  fields: (t) => ({
    id: t.exposeID('id'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const TranscriptFeedbackRatingEnum = builder.enumType('TranscriptFeedbackRating', {
  values: ['positive', 'negative'] as const,
});

export const TranscriptFeedbackType = builder.prismaObject('TranscriptFeedback', {
  description: "A user's thumbs up or down on one turn (the web chat widget's feedback buttons).",
  fields: (t) => ({
    id: t.exposeID('id'),
    turnID: t.exposeID('turnId', { description: 'The turn rated: the ID in `history` and of its action log.' }),
    rating: t.field({
      type: TranscriptFeedbackRatingEnum,
      resolve: (row) => (row.rating === 'positive' ? 'positive' : 'negative'),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const TranscriptPropertyType = builder.prismaObject('TranscriptProperty', {
  description: 'A typed property that transcripts of a project can hold a value for.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectID: t.exposeID('projectId'),
    name: t.exposeString('name'),
    type: t.exposeString('type', { description: 'string, number or boolean.' }),
    default: t.boolean({ description: 'False: every property is user-defined.', resolve: () => false }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const TranscriptPropertyValueType = builder.prismaObject('TranscriptPropertyValue', {
  description: "A property's value on a transcript, with the property's name and type.",
  // The property's name and type come with every value (a join on the property's key), so the
  // two fields read them as plain resolvers. As per-field selections they were each wrapped by
  // plugin-prisma, which looked up the field's loader mapping on every row: two lookups per
  // value, a fifth of the transcript search's GraphQL field time.
  include: { property: { select: { name: true, type: true } } },
  fields: (t) => ({
    id: t.exposeID('propertyId', { description: "The property's ID." }),
    propertyID: t.exposeID('propertyId'),
    transcriptID: t.exposeID('transcriptId'),
    name: t.string({ resolve: (v) => v.property.name }),
    type: t.string({ resolve: (v) => v.property.type }),
    default: t.boolean({ resolve: () => false }),
    value: t.exposeString('value'),
    metadata: t.expose('metadata', { type: 'JSON', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const TranscriptType = builder.prismaObject('Transcript', {
  description: 'One conversation session, with its logs, property values and evaluation results.',
  fields: (t) => ({
    id: t.exposeID('id'),
    sessionID: t.exposeString('sessionId'),
    projectID: t.exposeID('projectId'),
    environmentID: t.exposeID('environmentId'),
    userID: t.exposeString('userId', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', nullable: true }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true }),
    recordingURL: t.exposeString('recordingUrl', { nullable: true }),
    device: t.exposeString('device', {
      nullable: true,
      description: 'The device type the client reported (the web chat widget: desktop, mobile, tablet…).',
    }),
    browser: t.exposeString('browser', { nullable: true, description: 'The browser the client reported.' }),
    os: t.exposeString('os', { nullable: true, description: 'The operating system the client reported.' }),
    userName: t.exposeString('userName', {
      nullable: true,
      description: 'The user name the embedding page gave the web chat widget.',
    }),
    userImage: t.exposeString('userImage', {
      nullable: true,
      description: 'The user image URL the embedding page gave the web chat widget.',
    }),
    feedback: t.relation('feedback', {
      description: 'Thumbs up/down on its turns, in the order they were given.',
      query: { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] },
    }),
    // In the order the properties and evaluations were defined, whatever order values arrived in.
    properties: t.relation('propertyValues', {
      query: { orderBy: [{ property: { createdAt: 'asc' } }, { propertyId: 'asc' }] },
    }),
    evaluations: t.relation('evaluationResults', {
      query: { orderBy: [{ evaluation: { createdAt: 'asc' } }, { evaluationId: 'asc' }] },
    }),
    history: t.field({
      type: [TranscriptTurnType],
      description: 'One entry per turn (per action), in order.',
      resolve: (transcript, _args, ctx) => historyLoader(ctx).load(transcript.id),
    }),
    logs: t.field({
      type: [TranscriptLogType],
      // The originals hold what redaction removed: they need a scope of their own.
      authScopes: (_transcript, args) =>
        args.unredacted ? { scope: 'transcripts:read-unredacted' } : { authenticated: true },
      args: {
        unredacted: t.arg.boolean({
          defaultValue: false,
          description:
            'Originals instead of redacted data, while they are kept (the retention period). Needs the transcripts:read-unredacted scope.',
        }),
        filterConversation: t.arg.boolean({
          defaultValue: false,
          description: 'Only actions and text, speak and live-agent-handoff traces (plus customTraceTypes).',
        }),
        customTraceTypes: t.arg.stringList({ validate: customTraceTypesSchema }),
      },
      resolve: (transcript, args, ctx) =>
        logLoader(ctx, {
          unredacted: args.unredacted ?? false,
          filterConversation: args.filterConversation ?? false,
          customTraceTypes: args.customTraceTypes ?? [],
        }).load(transcript.id),
    }),
  }),
});

/**
 * `Transcript.properties` and `.evaluations` answer a row of the search's page (src/transcripts/
 * search-page.ts) from the row itself. plugin-prisma wraps a relation field so that each row looks
 * up the loader mapping its planned query recorded (a response path string and a scope walk per
 * row and field: about 5 % of a REST search's CPU, two lookups per transcript), and then answers
 * `parent[relation]`, as here. A page row carries the relation only when `pageRelationsOf` found it
 * in the planned query, with the field's order and nested selections the row carries whole, which
 * is exactly when that lookup finds the mapping; and no field beneath the two wraps anything, so
 * no mapping is owed to the rows below. Any other parent (and a page row without the relation)
 * goes through plugin-prisma's resolver as before. Applied to the built schema (graphql/schema/
 * index.ts), since the wrapper is plugin-prisma's, outside the field's own resolver.
 */
export function answerSearchPageRelationsDirectly(schema: GraphQLSchema): GraphQLSchema {
  const type = schema.getType('Transcript') as GraphQLObjectType | undefined;
  const fields = type?.getFields() ?? {};
  for (const [field, relation] of [
    ['properties', 'propertyValues'],
    ['evaluations', 'evaluationResults'],
  ] as const) {
    const def = fields[field];
    const wrapped = def?.resolve as GraphQLFieldResolver<Record<string, unknown>, Context> | undefined;
    if (!def || !wrapped) throw new Error(`Transcript.${field} has no resolver to answer page rows beside`);
    def.resolve = (parent, args, ctx, info) => {
      const loaded = parent[relation];
      return loaded !== undefined && isPageRow(parent) ? loaded : wrapped(parent, args, ctx, info);
    };
  }
  return schema;
}

// ── Inputs ──────────────────────────────────────────────────────────────────────────────────────

const TranscriptFilterInput = builder.inputType('TranscriptFilterInput', {
  fields: (t) => ({
    id: t.id({ required: true, description: 'A transcript property ID or an evaluation ID.' }),
    op: t.field({ type: TranscriptFilterOpEnum, required: true }),
    value: t.field({
      type: 'JSON',
      description: 'A scalar; [low, high] for between; a list for in / nin; none for exists.',
    }),
  }),
});

export const TranscriptSearchCriteriaInput = builder.inputType('TranscriptSearchCriteria', {
  fields: (t) => ({
    sessionID: t.string(),
    userID: t.string(),
    environmentID: t.string({ description: 'An environment ID or alias.' }),
    startDate: t.field({ type: 'DateTime', description: 'Created at or after.' }),
    endDate: t.field({ type: 'DateTime', description: 'Created before.' }),
    updatedAfter: t.field({ type: 'DateTime', description: 'Updated at or after.' }),
    updatedBefore: t.field({ type: 'DateTime', description: 'Updated before.' }),
    ended: t.boolean(),
    filters: t.field({ type: [TranscriptFilterInput], description: 'At most 50, all of which must match.' }),
  }),
});

const TranscriptLogInput = builder.inputType('TranscriptLogInput', {
  fields: (t) => ({
    type: t.field({ type: TranscriptLogTypeEnum, required: true }),
    data: t.field({ type: 'JSON', description: 'An action ({type, payload}) or a trace ({type, payload, time}).' }),
    createdAt: t.field({ type: 'DateTime', description: 'Default: now.' }),
  }),
});

const CreateTranscriptInput = builder.inputType('CreateTranscriptInput', {
  fields: (t) => ({
    projectID: t.id({ required: true }),
    sessionID: t.string({ required: true }),
    userID: t.string(),
    environment: t.string({ description: 'An environment ID or alias; default development.' }),
    logs: t.field({ type: [TranscriptLogInput] }),
  }),
});

const CreateTranscriptPropertyInput = builder.inputType('CreateTranscriptPropertyInput', {
  fields: (t) => ({
    projectID: t.id({ required: true }),
    name: t.string({ required: true }),
    type: t.field({ type: TranscriptPropertyTypeEnum, required: true }),
  }),
});

const UpdateTranscriptPropertyInput = builder.inputType('UpdateTranscriptPropertyInput', {
  fields: (t) => ({
    name: t.string(),
    type: t.field({ type: TranscriptPropertyTypeEnum }),
  }),
});

const SetTranscriptPropertyValueInput = builder.inputType('SetTranscriptPropertyValueInput', {
  fields: (t) => ({
    propertyID: t.id({ required: true }),
    transcriptID: t.id({ required: true }),
    value: t.string({ required: true, description: "Must parse as the property's type." }),
    metadata: t.field({ type: 'JSONObject' }),
  }),
});

// ── Queries ─────────────────────────────────────────────────────────────────────────────────────

/** What a search's filters name, looked up once per request for its page and its totalCount. */
const searchTargets = new WeakMap<object, Promise<{ projectId: string; targets: Map<string, FilterTarget> }>>();
function searchOf(ctx: Context, args: { projectID: string | number; criteria?: unknown }) {
  let found = searchTargets.get(args);
  if (!found) {
    found = (async () => {
      const project = await requireProject(ctx, String(args.projectID));
      const criteria = args.criteria as SearchCriteria | null | undefined;
      const targets = await loadFilterTargets(ctx.services.db.prisma, project.id, criteria?.filters ?? []);
      return { projectId: project.id, targets };
    })();
    searchTargets.set(args, found);
  }
  return found;
}

builder.queryFields((t) => ({
  transcripts: t.prismaConnection({
    type: 'Transcript',
    cursor: 'id',
    defaultSize: 25,
    maxSize: 100,
    description:
      'Searches the transcripts of a project, newest first by default. Page with first/after, or with first and skip (REST take/skip).',
    authScopes: { scope: 'transcripts:read' },
    args: {
      projectID: t.arg.id({ required: true }),
      criteria: t.arg({ type: TranscriptSearchCriteriaInput }).validate(searchCriteriaSchema.nullish()),
      order: t.arg({ type: SortOrderEnum, defaultValue: 'DESC' }),
      skip: t.arg
        .int({ defaultValue: 0, description: 'Transcripts to pass over before the page.' })
        .validate(skipSchema.nullish()),
    },
    validate: z.looseObject({ first: takeSchema.nullish(), last: takeSchema.nullish() }),
    totalCount: async (_parent, args, ctx) => {
      const { db } = ctx.services;
      const { projectId, targets } = await searchOf(ctx, args);
      const criteria = args.criteria as SearchCriteria | null;
      return countTranscripts(db, buildTranscriptWhereSql(projectId, criteria, targets, db.provider));
    },
    resolve: async (query, _root, args, ctx) => {
      const { db } = ctx.services;
      const { projectId, targets } = await searchOf(ctx, args);
      const criteria = args.criteria as SearchCriteria | null;
      const order = args.order ?? 'DESC';
      // The page and the relations the selection asks for in one statement (src/transcripts/
      // search-page.ts); a selection a page does not carry (feedback, a cursor) goes to Prisma.
      const page = pageRelationsOf(query);
      if (page) {
        // Rows of Prisma's shape for this selection (checked by pageRelationsOf), which TypeScript
        // cannot relate to plugin-prisma's type of the selection: hence the cast.
        return loadTranscriptPage(db, buildTranscriptWhereSql(projectId, criteria, targets, db.provider), {
          order,
          relations: page,
          take: page.take,
          skip: page.skip + (args.skip ?? 0),
        }) as never;
      }
      return db.prisma.transcript.findMany({
        ...query,
        where: buildTranscriptWhere(projectId, criteria, targets, db.provider),
        orderBy: transcriptOrderBy(order),
        skip: (query.skip ?? 0) + (args.skip ?? 0),
      });
    },
  }),
  transcript: t.prismaField({
    type: TranscriptType,
    authScopes: { scope: 'transcripts:read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      await requireOwned(ctx, 'Transcript', String(args.id));
      return ctx.services.db.prisma.transcript.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  transcriptProperties: t.prismaField({
    type: [TranscriptPropertyType],
    description: 'The property definitions of a project, oldest first.',
    authScopes: { scope: 'transcripts:read' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return ctx.services.db.prisma.transcriptProperty.findMany({
        ...query,
        where: { projectId: project.id },
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      });
    },
  }),
  transcriptProperty: t.prismaField({
    type: TranscriptPropertyType,
    authScopes: { scope: 'transcripts:read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      await requireOwned(ctx, 'Transcript property', String(args.id));
      return ctx.services.db.prisma.transcriptProperty.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  transcriptPropertyValues: t.prismaField({
    type: [TranscriptPropertyValueType],
    description: 'The property values of a transcript.',
    authScopes: { scope: 'transcripts:read' },
    args: { transcriptID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      await requireOwned(ctx, 'Transcript', String(args.transcriptID));
      return ctx.services.db.prisma.transcriptPropertyValue.findMany({
        ...query,
        where: { transcriptId: String(args.transcriptID) },
        orderBy: [{ property: { createdAt: 'asc' } }, { propertyId: 'asc' }],
      });
    },
  }),
  transcriptRedactionPatterns: t.stringList({
    description: "The project's own redaction patterns (RE2 syntax), applied after the built-in ones.",
    authScopes: { scope: 'transcripts:read' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const rows = await ctx.services.db.prisma.transcriptRedactionPattern.findMany({
        where: { projectId: project.id },
        orderBy: { createdAt: 'asc' },
      });
      return rows.map((r) => r.pattern);
    },
  }),
}));

// ── Mutations ───────────────────────────────────────────────────────────────────────────────────

const AppendTranscriptLogsPayload = builder
  .objectRef<{ transcriptId: string; logIds: string[] }>('AppendTranscriptLogsPayload')
  .implement({
    fields: (t) => ({
      transcriptID: t.exposeID('transcriptId'),
      logIDs: t.exposeIDList('logIds', { description: 'The new logs, in order.' }),
    }),
  });

const EndTranscriptPayload = builder
  .objectRef<{ transcriptId: string; endedAt: Date; evaluationsQueued: number }>('EndTranscriptPayload')
  .implement({
    fields: (t) => ({
      transcriptID: t.exposeID('transcriptId'),
      endedAt: t.expose('endedAt', { type: 'DateTime' }),
      evaluationsQueued: t.exposeInt('evaluationsQueued', {
        description:
          'Evaluation runs this call queued: one per enabled evaluation the first time, 0 when already ended.',
      }),
    }),
  });

builder.mutationFields((t) => ({
  createTranscript: t.prismaField({
    type: TranscriptType,
    description: 'Ingestion: a transcript for a session of any runtime, with its first logs (Parley addition).',
    authScopes: { scope: 'transcripts:write' },
    args: { input: t.arg({ type: CreateTranscriptInput, required: true }).validate(createTranscriptBody) },
    resolve: async (query, _root, { input }, ctx) => {
      const project = await requireProject(ctx, input.projectID);
      const created = await createTranscript(transcriptDeps(ctx), {
        projectId: project.id,
        environment: input.environment,
        sessionId: input.sessionID,
        userId: input.userID,
        logs: input.logs ?? [],
      });
      return ctx.services.db.prisma.transcript.findUniqueOrThrow({ ...query, where: { id: created.id } });
    },
  }),
  appendTranscriptLogs: t.field({
    type: AppendTranscriptLogsPayload,
    description: 'Ingestion: appends logs to a transcript, after the ones it has (Parley addition).',
    authScopes: { scope: 'transcripts:write' },
    args: {
      transcriptID: t.arg.id({ required: true }),
      logs: t.arg({ type: [TranscriptLogInput], required: true }).validate(appendLogsBody.shape.logs),
    },
    resolve: async (_root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript', String(args.transcriptID));
      return appendTranscriptLogs(transcriptDeps(ctx), {
        projectId,
        transcriptId: String(args.transcriptID),
        logs: args.logs,
      });
    },
  }),
  endTranscript: t.field({
    type: EndTranscriptPayload,
    description: 'Marks a transcript ended and queues its enabled evaluations; ending it again changes nothing.',
    authScopes: { scope: 'transcripts:write' },
    args: { projectID: t.arg.id({ required: true }), transcriptID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const transcriptId = String(args.transcriptID);
      if (!isId(transcriptId)) throw notFound('Transcript', transcriptId);
      const ended = await endTranscript(transcriptDeps(ctx), { projectId: project.id, transcriptId });
      return { transcriptId, ...ended };
    },
  }),
  deleteTranscript: t.id({
    description: 'Deletes a transcript with its logs, property values and evaluation results. Returns its ID.',
    authScopes: { scope: 'transcripts:write' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript', String(args.id));
      await deleteTranscript(ctx.services.db, { projectId, transcriptId: String(args.id) });
      return String(args.id);
    },
  }),
  createTranscriptProperty: t.prismaField({
    type: TranscriptPropertyType,
    authScopes: { scope: 'transcripts:write' },
    args: { input: t.arg({ type: CreateTranscriptPropertyInput, required: true }).validate(createPropertyBody) },
    resolve: async (query, _root, { input }, ctx) => {
      const project = await requireProject(ctx, input.projectID);
      const created = await createProperty(ctx.services.db, {
        projectId: project.id,
        name: input.name,
        type: input.type,
      });
      return ctx.services.db.prisma.transcriptProperty.findUniqueOrThrow({ ...query, where: { id: created.id } });
    },
  }),
  updateTranscriptProperty: t.prismaField({
    type: TranscriptPropertyType,
    description: 'Renames and/or retypes a property; a type its values would not parse as is refused (409).',
    authScopes: { scope: 'transcripts:write' },
    args: {
      id: t.arg.id({ required: true }),
      input: t.arg({ type: UpdateTranscriptPropertyInput, required: true }).validate(updatePropertyBody),
    },
    resolve: async (query, _root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript property', String(args.id));
      await updateProperty(ctx.services.db, {
        projectId,
        propertyId: String(args.id),
        name: args.input.name,
        type: args.input.type,
      });
      return ctx.services.db.prisma.transcriptProperty.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  deleteTranscriptProperty: t.id({
    description: 'Deletes a property and its values on every transcript. Returns its ID.',
    authScopes: { scope: 'transcripts:write' },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript property', String(args.id));
      await deleteProperty(ctx.services.db, { projectId, propertyId: String(args.id) });
      return String(args.id);
    },
  }),
  setTranscriptPropertyValue: t.prismaField({
    type: TranscriptPropertyValueType,
    description: "Sets (replaces) a property's value on a transcript.",
    authScopes: { scope: 'transcripts:write' },
    args: { input: t.arg({ type: SetTranscriptPropertyValueInput, required: true }).validate(setPropertyValueBody) },
    resolve: async (query, _root, { input }, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript', input.transcriptID);
      await setPropertyValue(ctx.services.db, {
        projectId,
        propertyId: input.propertyID,
        transcriptId: input.transcriptID,
        value: input.value,
        metadata: input.metadata,
      });
      return ctx.services.db.prisma.transcriptPropertyValue.findUniqueOrThrow({
        ...query,
        where: { transcriptId_propertyId: { transcriptId: input.transcriptID, propertyId: input.propertyID } },
      });
    },
  }),
  deleteTranscriptPropertyValue: t.boolean({
    authScopes: { scope: 'transcripts:write' },
    args: { transcriptID: t.arg.id({ required: true }), propertyID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const { id: projectId } = await requireOwned(ctx, 'Transcript', String(args.transcriptID));
      await deletePropertyValue(ctx.services.db, {
        projectId,
        transcriptId: String(args.transcriptID),
        propertyId: String(args.propertyID),
      });
      return true;
    },
  }),
  setTranscriptRedactionPatterns: t.stringList({
    description:
      "Replaces the project's own redaction patterns (RE2 syntax: linear-time, no lookaround or backreferences). Needs the admin scope.",
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      patterns: t.arg.stringList({ required: true }).validate(redactionPatternsSchema),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      await setRedactionPatterns(transcriptDeps(ctx), { projectId: project.id, patterns: args.patterns });
      return args.patterns;
    },
  }),
}));

// ── Subscription ────────────────────────────────────────────────────────────────────────────────

export const TranscriptEventType = builder.objectRef<TranscriptEventPayload>('TranscriptEvent').implement({
  description: 'Something new in a transcript: logs appended (kind logs) or an evaluation result stored (kind result).',
  fields: (t) => ({
    kind: t.exposeString('kind'),
    transcriptID: t.exposeID('transcriptId'),
    logs: t.field({
      type: [TranscriptLogType],
      description: 'For kind logs: the new logs (redacted), in order.',
      resolve: async (event, _args, ctx) => {
        if (!event.logIds?.length) return [];
        const rows = await ctx.services.db.prisma.transcriptLog.findMany({
          where: { id: { in: event.logIds }, transcriptId: event.transcriptId },
          orderBy: { seq: 'asc' },
        });
        return rows.map((r) => ({
          id: r.id,
          type: r.type,
          data: r.data,
          createdAt: r.createdAt,
          updatedAt: r.updatedAt,
        }));
      },
    }),
    evaluationID: t.exposeID('evaluationId', { nullable: true }),
  }),
});

builder.subscriptionField('transcriptEvents', (t) =>
  t.field({
    type: TranscriptEventType,
    description: "A transcript's new logs and evaluation results as they are stored.",
    authScopes: { scope: 'transcripts:read' },
    args: { transcriptID: t.arg.id({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      await requireOwned(ctx, 'Transcript', String(args.transcriptID));
      return ctx.services.pubsub.subscribe('transcriptEvent', String(args.transcriptID));
    },
    resolve: (event) => event,
  }),
);
