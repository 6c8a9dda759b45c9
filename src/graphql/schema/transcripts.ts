import { getConnectionPageSize, PothosValidationError, validateConnectionArguments } from '@pothos/core';
import { formatPrismaCursor, parsePrismaCursor, queryFromInfo } from '@pothos/plugin-prisma';
import DataLoader from 'dataloader';
import {
  type FieldNode,
  type GraphQLFieldResolver,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  Kind,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
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
  type PageRelations,
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

// ── The search's connection ────────────────────────────────────────────────────────────────────
// What plugin-prisma's `t.prismaConnection` did per request (util/cursors.js: the paging query,
// the connection's shape and messages), with the query planned once per document.

const SEARCH_DEFAULT_SIZE = 25;
const SEARCH_MAX_SIZE = 100;

interface SearchPaging {
  take: number;
  skip: number;
  cursor?: { id: unknown };
}
interface SearchConnectionArgs {
  first?: number | null;
  last?: number | null;
  before?: string | null;
  after?: string | null;
}

/** plugin-prisma's `prismaCursorConnectionQuery` for the `id` cursor, with its errors. */
function searchConnectionQuery(args: SearchConnectionArgs): SearchPaging {
  const { before, after, first, last } = args;
  validateConnectionArguments(args);
  if (before && after) {
    throw new PothosValidationError('Arguments "before" and "after" are not supported at the same time');
  }
  if (before != null && first != null) {
    throw new PothosValidationError('Arguments "before" and "first" are not supported at the same time');
  }
  if (after != null && last != null) {
    throw new PothosValidationError('Arguments "after" and "last" are not supported at the same time');
  }
  const cursor = before ?? after;
  const { limit } = getConnectionPageSize({ args, defaultSize: SEARCH_DEFAULT_SIZE, maxSize: SEARCH_MAX_SIZE });
  const take = before != null || last != null ? -limit : limit;
  return cursor == null ? { take, skip: 0 } : { cursor: { id: parsePrismaCursor(cursor) }, take, skip: 1 };
}

interface SearchPageInfo {
  startCursor: string | null;
  endCursor: string | null;
  hasPreviousPage: boolean;
  hasNextPage: boolean;
}

/** An edge whose cursor is formatted when read (the REST route reads none). */
class SearchEdge {
  constructor(
    readonly connection: SearchConnection,
    readonly node: Record<string, unknown>,
  ) {}
  get cursor(): string {
    return formatPrismaCursor(this.node, 'id');
  }
}

/** plugin-prisma's `wrapConnectionResult`: the same page, flags and cursors (read lazily), and the
 * totalCount of the search when asked. */
class SearchConnection {
  readonly edges: SearchEdge[] = [];
  readonly pageInfo: SearchPageInfo;
  constructor(
    results: Record<string, unknown>[],
    private readonly args: SearchConnectionArgs & SearchArgs,
    take: number,
    private readonly ctx: Context,
  ) {
    const gotFullResults = results.length === Math.abs(take);
    const backward = args.before != null || args.last != null;
    const hasNextPage = args.before != null ? true : args.last != null ? false : gotFullResults;
    const hasPreviousPage = args.after != null ? true : backward ? gotFullResults : false;
    const nodes = gotFullResults ? results.slice(take < 0 ? 1 : 0, take < 0 ? results.length : -1) : results;
    for (const node of nodes) this.edges.push(new SearchEdge(this, node));
    this.pageInfo = new SearchPageCursors(this.edges, hasPreviousPage, hasNextPage);
  }
  async totalCount(): Promise<number> {
    const { db } = this.ctx.services;
    const { projectId, targets } = await searchOf(this.ctx, this.args);
    const criteria = this.args.criteria as SearchCriteria | null;
    return countTranscripts(db, buildTranscriptWhereSql(projectId, criteria, targets, db.provider));
  }
}

class SearchPageCursors implements SearchPageInfo {
  constructor(
    private readonly edges: SearchEdge[],
    readonly hasPreviousPage: boolean,
    readonly hasNextPage: boolean,
  ) {}
  get startCursor(): string | null {
    return this.edges[0]?.cursor ?? null;
  }
  get endCursor(): string | null {
    return this.edges[this.edges.length - 1]?.cursor ?? null;
  }
}

/**
 * plugin-prisma's planner, called through this object so that a test can count the plans (the
 * test files share one module graph per fork, where mocking the package's module would not reach
 * a schema another file loaded first).
 */
export const searchPlanning = { queryFromInfo };

/** plugin-prisma's planning of the connection's query from the selection (and its loader mappings). */
function planSearchQuery(ctx: Context, info: GraphQLResolveInfo): Promise<Record<string, unknown>> {
  return Promise.resolve(
    searchPlanning.queryFromInfo({
      context: ctx,
      info,
      select: { id: true },
      paths: [['nodes'], ['edges', 'node']],
      typeName: 'Transcript',
      awaitSelections: true,
    }) as Record<string, unknown> | Promise<Record<string, unknown>>,
  );
}

interface SearchPlan {
  /** Only totalCount (and __typename) is selected: no page is loaded. */
  totalCountOnly: boolean;
  /** The relations a page carries for the planned query, or null when the query is not a page. */
  page: PageRelations | null;
}
/** Per field node of a document (stable while the document is cached); only for selections that
 * hold no variable and no directive, whose plan depends on the document alone. */
const searchPlans = new WeakMap<FieldNode, SearchPlan>();

function searchPlanOf(info: GraphQLResolveInfo): SearchPlan {
  const node = info.fieldNodes.length === 1 ? info.fieldNodes[0] : undefined;
  const cached = node && searchPlans.get(node);
  if (cached) return cached;
  const totalCountOnly = info.fieldNodes.every((field) =>
    field.selectionSet?.selections.every(
      (s) => s.kind === Kind.FIELD && (s.name.value === 'totalCount' || s.name.value === '__typename'),
    ),
  );
  let page: PageRelations | null = null;
  if (!totalCountOnly && node && selectionIsStatic(node.selectionSet, info, new Set())) {
    const planned = searchPlanning.queryFromInfo({
      context: {},
      info,
      select: { id: true },
      paths: [['nodes'], ['edges', 'node']],
      typeName: 'Transcript',
    }) as Record<string, unknown>;
    const relations = pageRelationsOf({ ...planned, take: 1, skip: 0 });
    page = relations && { propertyValues: relations.propertyValues, evaluationResults: relations.evaluationResults };
  } else if (!totalCountOnly) return { totalCountOnly, page: null };
  const plan = { totalCountOnly, page };
  if (node) searchPlans.set(node, plan);
  return plan;
}

/** No directive and no variable anywhere beneath (fragments included). */
function selectionIsStatic(set: SelectionSetNode | undefined, info: GraphQLResolveInfo, seen: Set<string>): boolean {
  if (!set) return true;
  for (const s of set.selections) {
    if (s.directives?.length) return false;
    if (s.kind === Kind.FIELD) {
      if (s.arguments?.some((a) => valueHasVariable(a.value))) return false;
      if (!selectionIsStatic(s.selectionSet, info, seen)) return false;
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      if (!selectionIsStatic(s.selectionSet, info, seen)) return false;
    } else {
      const name = s.name.value;
      if (seen.has(name)) continue;
      seen.add(name);
      const fragment = info.fragments[name];
      if (!fragment || fragment.directives?.length) return false;
      if (!selectionIsStatic(fragment.selectionSet, info, seen)) return false;
    }
  }
  return true;
}
function valueHasVariable(value: ValueNode): boolean {
  if (value.kind === Kind.VARIABLE) return true;
  if (value.kind === Kind.LIST) return value.values.some(valueHasVariable);
  if (value.kind === Kind.OBJECT) return value.fields.some((f) => valueHasVariable(f.value));
  return false;
}

type SearchArgs = { projectID: string | number; criteria?: unknown; order?: string | null; skip?: number | null };

async function searchPage(ctx: Context, args: SearchArgs, page: PageRelations & { take: number; skip: number }) {
  const { db } = ctx.services;
  const { projectId, targets } = await searchOf(ctx, args);
  const criteria = args.criteria as SearchCriteria | null;
  return loadTranscriptPage(db, buildTranscriptWhereSql(projectId, criteria, targets, db.provider), {
    order: (args.order ?? 'DESC') as never,
    relations: page,
    take: page.take,
    skip: page.skip + (args.skip ?? 0),
  }) as unknown as Promise<Record<string, unknown>[]>;
}

/** The page for a planned query: one statement when it is a page (src/transcripts/search-page.ts),
 * else Prisma with the planned query (a selection a page does not carry: feedback, a cursor). */
async function searchRows(ctx: Context, args: SearchArgs, query: Record<string, unknown>) {
  const page = pageRelationsOf(query);
  if (page) return searchPage(ctx, args, page);
  const { db } = ctx.services;
  const { projectId, targets } = await searchOf(ctx, args);
  const criteria = args.criteria as SearchCriteria | null;
  return db.prisma.transcript.findMany({
    ...query,
    where: buildTranscriptWhere(projectId, criteria, targets, db.provider),
    orderBy: transcriptOrderBy((args.order ?? 'DESC') as never),
    skip: ((query.skip as number | undefined) ?? 0) + (args.skip ?? 0),
  }) as unknown as Promise<Record<string, unknown>[]>;
}

builder.queryFields((t) => ({
  // A connection of the same schema as `t.prismaConnection` (QueryTranscriptsConnection, its edge
  // type, totalCount), whose resolver plans the Prisma query of a document's selection once
  // (`searchPlanOf`) instead of on every request, and formats an edge's cursor only when read.
  transcripts: t.connection(
    {
      type: TranscriptType,
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
      resolve: async (_root, args, ctx, info) => {
        const paging = searchConnectionQuery(args);
        const plan = searchPlanOf(info);
        let rows: Record<string, unknown>[];
        if (plan.totalCountOnly) rows = [];
        else if (plan.page && paging.cursor === undefined && paging.take >= 0) {
          // The document's planned query is a page (as pageRelationsOf decided for it once): the
          // same statement the planned query would have led to below, without planning it again.
          rows = await searchPage(ctx, args, { ...plan.page, take: paging.take, skip: paging.skip });
        } else {
          rows = await searchRows(ctx, args, { ...(await planSearchQuery(ctx, info)), ...paging });
        }
        return new SearchConnection(rows, args, paging.take, ctx) as never;
      },
    },
    {
      fields: (c) => ({
        totalCount: c.int({
          nullable: false,
          extensions: { pothosPrismaTotalCount: true },
          resolve: (connection) => (connection as unknown as SearchConnection).totalCount(),
        }),
      }),
    },
  ),
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
