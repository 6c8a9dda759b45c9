import { z } from 'zod';
import { idSchema } from '../admin/validation';
import { parseTimestamp, timestampProblemMessage } from '../lib/time';
import { storableText, type UsageEvent, usageLimits } from './events';
import { granularities, isTimeZone } from './time-buckets';
import {
  creditTypes,
  type UsageEventKind,
  type UsageQueryName,
  usageEventKinds,
  usageQueryNames,
} from './usage-metrics';
import { type UsageSummaryName, usageSummaryNames } from './usage-summary';

/**
 * The rules of SPEC.md "Usage" as zod schemas, shared by the REST routes (which check bodies
 * before anything runs) and the GraphQL fields (plugin-validation), so both answer the same 400
 * with the same `details` paths, relative to the request's `data` member (`filter.limit`).
 */

const oneOf = (values: readonly string[]) => `must be one of: ${values.map((v) => JSON.stringify(v)).join(', ')}`;

/** A member sent as null is treated as absent (clients that serialise undefined as null). */
function dropNulls(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null));
}

/** SPEC.md "Timestamps": ISO 8601 with a mandatory zone designator, a real calendar date. */
export const usageTimestampSchema = z.string().transform((value, ctx) => {
  const parsed = parseTimestamp(value);
  if (!parsed.ok) {
    ctx.addIssue({ code: 'custom', message: timestampProblemMessage[parsed.problem] });
    return z.NEVER;
  }
  return parsed.date;
});

const environmentName = storableText(256).min(1);

/** One environment ID or alias, or a non-empty list of them; always a list once parsed. */
export const environmentFilterSchema = z
  .union([environmentName, z.array(environmentName).min(1)], {
    error: (issue) => (issue.code === 'invalid_union' ? 'must be a string or a non-empty array of strings' : undefined),
  })
  .transform((value) => (typeof value === 'string' ? [value] : value));

const projectIdSchema = z.string().min(1);
const limitSchema = z.number().int().min(1).max(500).default(100);
const cursorSchema = z.number().int().min(0);

const rangeShape = {
  projectID: projectIdSchema,
  startTime: usageTimestampSchema.optional(),
  endTime: usageTimestampSchema.optional(),
  projectEnvironmentIDOrAlias: environmentFilterSchema.optional(),
};

function checkRangeOrder(filter: { startTime?: Date; endTime?: Date }, ctx: z.RefinementCtx): void {
  if (filter.startTime && filter.endTime && filter.endTime < filter.startTime) {
    ctx.addIssue({ code: 'custom', path: ['endTime'], message: 'must not be before startTime' });
  }
}

/**
 * SPEC.md "Usage filter: base filter": every query but top_intents. SPEC.md does not close the
 * filter ("no other members allowed" is said of other bodies only), and the original's clients send
 * members Parley does not know (v1's `platform`): they are accepted and ignored.
 */
const baseFilterSchema = z.preprocess(
  dropNulls,
  z.object({ ...rangeShape, limit: limitSchema, cursor: cursorSchema.optional() }).superRefine(checkRangeOrder),
);

/** SPEC.md "Usage filter: top_intents": no cursor. */
const topIntentsFilterSchema = z.preprocess(
  dropNulls,
  z
    .object({
      ...rangeShape,
      limit: limitSchema,
      // Parley knows `cursor` and would not page here: refused rather than silently ignored.
      cursor: z.undefined({ error: 'is not an allowed member: top_intents is not paged' }).optional(),
    })
    .superRefine(checkRangeOrder),
);

/** The members of each filter that Parley reads; REST hands only these on to GraphQL. */
const filterMembers = {
  base: ['projectID', 'startTime', 'endTime', 'projectEnvironmentIDOrAlias', 'limit', 'cursor'],
  top_intents: ['projectID', 'startTime', 'endTime', 'projectEnvironmentIDOrAlias', 'limit'],
} as const;

export interface ParsedUsageFilter {
  projectID: string;
  start: Date | null;
  end: Date | null;
  /** IDs or aliases as sent; null: every environment. */
  environments: string[] | null;
  limit: number;
  cursor: number | null;
}

function normalizeFilter(filter: {
  projectID: string;
  startTime?: Date;
  endTime?: Date;
  projectEnvironmentIDOrAlias?: string[];
  limit: number;
  cursor?: number;
}): ParsedUsageFilter {
  return {
    projectID: filter.projectID,
    start: filter.startTime ?? null,
    end: filter.endTime ?? null,
    environments: filter.projectEnvironmentIDOrAlias ?? null,
    limit: filter.limit,
    cursor: filter.cursor ?? null,
  };
}

const queryOption = <N extends UsageQueryName>(name: N) =>
  z.object({
    name: z.literal(name),
    filter: (name === 'top_intents' ? topIntentsFilterSchema : baseFilterSchema).transform(normalizeFilter),
  });

/** The `data` member of `POST /v2/query/usage`, and the arguments of the GraphQL `usage` field. */
export const usageQuerySchema = z.discriminatedUnion(
  'name',
  [
    queryOption('interactions'),
    queryOption('top_intents'),
    queryOption('unique_users'),
    queryOption('credit_usage'),
    queryOption('function_usage'),
    queryOption('api_calls'),
    queryOption('kb_documents'),
    queryOption('integrations'),
    queryOption('transcripts'),
    queryOption('agent_usage'),
  ],
  {
    error: (issue) => {
      if (issue.code !== 'invalid_union') return undefined;
      const sent = (issue.input as { name?: unknown } | undefined)?.name;
      return sent === undefined ? 'is required' : oneOf(usageQueryNames);
    },
  },
);

/**
 * The body of `POST /v2/query/usage`: `{data: {name, filter}}`; other members (of the body, of
 * `data`, of `filter`) are accepted and ignored. Problems inside `data` are reported relative to it
 * (`filter.limit`, as in DECISIONS.md §3). The output keeps the known members' values as sent,
 * because the route hands them on to GraphQL, which parses them again, and drops the unknown ones,
 * which GraphQL's input type would refuse.
 */
export const usageQueryBodySchema = z
  .object({ data: z.unknown() })
  .superRefine((body, ctx) => {
    if (typeof body.data !== 'object' || body.data === null || Array.isArray(body.data)) {
      ctx.addIssue({
        code: 'custom',
        path: ['data'],
        message: body.data === undefined ? 'is required' : 'must be an object with name and filter',
      });
      return;
    }
    const parsed = usageQuerySchema.safeParse(body.data);
    if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ ...issue } as z.core.$ZodRawIssue);
  })
  .transform((body) => {
    const data = body.data as { name: UsageQueryName; filter: Record<string, unknown> };
    const known = data.name === 'top_intents' ? filterMembers.top_intents : filterMembers.base;
    const filter = Object.fromEntries(known.filter((k) => k in data.filter).map((k) => [k, data.filter[k]]));
    return { data: { name: data.name, filter } };
  });

/** A range of a project's usage, for totals (GraphQL `usageTotals`). */
export const usageRangeSchema = z.preprocess(dropNulls, z.strictObject(rangeShape).superRefine(checkRangeOrder));

/** Arguments of GraphQL `usageTimeSeries`: a bounded range, a granularity and a time zone. */
export const usageSeriesArgsSchema = z.object({
  name: z.enum(usageQueryNames, { error: oneOf(usageQueryNames) }),
  filter: z.preprocess(
    dropNulls,
    z
      .strictObject({
        ...rangeShape,
        startTime: usageTimestampSchema,
        endTime: usageTimestampSchema,
      })
      .superRefine(checkRangeOrder),
  ),
  granularity: z.enum(granularities, { error: oneOf(granularities) }).default('hour'),
  timeZone: z.string().default('UTC').refine(isTimeZone, 'must be an IANA time zone such as Europe/Berlin or UTC'),
});

// ── Ingestion (POST /v1/usage/events, GraphQL recordUsageEvents) ────────────────────────────────

/** How far ahead of the server's clock an event may be dated (clock skew between hosts). */
export const maxFutureSkewMs = 5 * 60_000;

const text = (max: number) => storableText(max).min(1);
const optionalText = (max: number) => storableText(max).optional();

const ingestedCommon = {
  projectID: idSchema,
  /** An environment ID or alias of the project. */
  environment: text(64),
  timestamp: usageTimestampSchema
    .refine((d) => d.getTime() >= 0, 'must not be before 1970')
    .refine((d) => d.getTime() <= Date.now() + maxFutureSkewMs, 'must not be in the future')
    .optional(),
  userID: text(usageLimits.userId).optional(),
  eventID: text(usageLimits.idempotencyKey).optional(),
};

const success = z.boolean();
const ingestedKinds = {
  interaction: { type: text(usageLimits.actionType) },
  credit: {
    type: z.enum(creditTypes, { error: oneOf(creditTypes) }),
    model: text(usageLimits.id),
    tokens: z.number().int().min(0).max(usageLimits.tokens),
    diagramID: optionalText(usageLimits.id),
    nodeID: optionalText(usageLimits.id),
  },
  function_call: { functionID: text(usageLimits.id), name: optionalText(usageLimits.name), success },
  api_call: { apiToolID: text(usageLimits.id), name: optionalText(usageLimits.name), success },
  integration_call: { integrationToolName: text(usageLimits.name), success },
  kb_document: { documentID: text(usageLimits.id) },
  transcript: { transcriptID: text(usageLimits.id).optional() },
  agent_invocation: { agentID: text(usageLimits.id), name: optionalText(usageLimits.name), success },
  intent: { name: text(usageLimits.name) },
} satisfies Record<UsageEventKind, z.ZodRawShape>;

const ingestedOption = <K extends UsageEventKind>(kind: K) =>
  z.strictObject({ kind: z.literal(kind), ...ingestedCommon, ...ingestedKinds[kind] });

/** One event of an ingestion batch: `kind`, the common members, and the members of its kind only. */
export const ingestedUsageEventSchema = z.preprocess(
  dropNulls,
  z.discriminatedUnion(
    'kind',
    [
      ingestedOption('interaction'),
      ingestedOption('credit'),
      ingestedOption('function_call'),
      ingestedOption('api_call'),
      ingestedOption('integration_call'),
      ingestedOption('kb_document'),
      ingestedOption('transcript'),
      ingestedOption('agent_invocation'),
      ingestedOption('intent'),
    ],
    {
      error: (issue) => {
        if (issue.code !== 'invalid_union') return undefined;
        const sent = (issue.input as { kind?: unknown } | undefined)?.kind;
        return sent === undefined ? 'is required' : oneOf(usageEventKinds);
      },
    },
  ),
);
export type IngestedUsageEvent = z.output<typeof ingestedUsageEventSchema>;

export const usageEventBatchSchema = z.array(ingestedUsageEventSchema).min(1).max(usageLimits.batch);

/** The body of `POST /v1/usage/events`, and the arguments of GraphQL `recordUsageEvents`: the rule. */
export const usageEventBatchBodySchema = z.strictObject({ events: usageEventBatchSchema });

/** The body's envelope is right: an object with `events`, an array of 1 to 1,000, and nothing else. */
function isBatchEnvelope(body: unknown): body is { events: unknown[] } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'events') return false;
  const events = (body as { events: unknown }).events;
  return Array.isArray(events) && events.length >= 1 && events.length <= usageLimits.batch;
}

/**
 * The route's check of `POST /v1/usage/events`, kept as sent: the route hands `events` on to
 * GraphQL `recordUsageEventBatch`, which checks the events once (./ingest-check.ts) with the
 * same schema's errors. Here only the envelope: when it is wrong, the whole schema words the error,
 * so the body gets exactly the details it always got (the events' problems with the envelope's).
 */
export const usageEventsBodySchema = z.unknown().superRefine((body, ctx) => {
  if (isBatchEnvelope(body)) return;
  const parsed = usageEventBatchBodySchema.safeParse(body);
  if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ ...issue } as z.core.$ZodRawIssue);
});

/** An ingested event as the usage event writer takes it, once its environment is resolved to an ID. */
export function toRecorderEvent(e: IngestedUsageEvent, environmentId: string): UsageEvent {
  // Every member set in one literal (no spread of a shared part): this runs for each event of a batch.
  const projectId = e.projectID;
  const occurredAt = e.timestamp;
  const userId = e.userID ?? null;
  const idempotencyKey = e.eventID ?? null;
  switch (e.kind) {
    case 'interaction':
      return { projectId, environmentId, occurredAt, userId, idempotencyKey, kind: e.kind, type: e.type };
    case 'credit':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        type: e.type,
        model: e.model,
        tokens: e.tokens,
        diagramId: e.diagramID,
        nodeId: e.nodeID,
      };
    case 'function_call':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        functionId: e.functionID,
        name: e.name,
        success: e.success,
      };
    case 'api_call':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        apiToolId: e.apiToolID,
        name: e.name,
        success: e.success,
      };
    case 'integration_call':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        integrationToolName: e.integrationToolName,
        success: e.success,
      };
    case 'kb_document':
      return { projectId, environmentId, occurredAt, userId, idempotencyKey, kind: e.kind, documentId: e.documentID };
    case 'transcript':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        transcriptId: e.transcriptID,
      };
    case 'agent_invocation':
      return {
        projectId,
        environmentId,
        occurredAt,
        userId,
        idempotencyKey,
        kind: e.kind,
        agentId: e.agentID,
        name: e.name,
        success: e.success,
      };
    case 'intent':
      return { projectId, environmentId, occurredAt, userId, idempotencyKey, kind: e.kind, name: e.name };
  }
}

// ── The v1 usage query (POST /v1/query/usage, GraphQL usageSummary) ─────────────────────────────

/** Named by the original's v1 query but not recorded by Parley: refused, never answered with zeros. */
const unrecordedSummaries: Record<string, string> = {
  top_slots: "is not available: Parley's runtime records no slot fills (use top_intents)",
  understood_messages: "is not available: Parley's runtime does not record which messages it did not understand",
};

export const usageSummaryLimits = { queries: 20, projects: 20, defaultLimit: 10, maxLimit: 500 } as const;

const summaryProjectsSchema = z
  .union(
    [
      projectIdSchema,
      z
        .array(projectIdSchema)
        .min(1)
        .max(usageSummaryLimits.projects, `must have at most ${usageSummaryLimits.projects} projects`),
    ],
    {
      error: (issue) =>
        issue.code === 'invalid_union' ? 'must be a project ID or a non-empty array of project IDs' : undefined,
    },
  )
  .transform((value) => [...new Set(typeof value === 'string' ? [value] : value)]);

const summaryFilterSchema = z.preprocess(
  dropNulls,
  z
    .object({
      projectID: summaryProjectsSchema,
      startTime: usageTimestampSchema.optional(),
      endTime: usageTimestampSchema.optional(),
      limit: z.number().int().min(1).max(usageSummaryLimits.maxLimit).default(usageSummaryLimits.defaultLimit),
      offset: z.number().int().min(0).default(0),
    })
    .superRefine(checkRangeOrder),
);

/** One query of the v1 body, and the arguments of one GraphQL `usageSummary` query. */
export const usageSummaryQuerySchema = z.object({
  name: z
    .string()
    .superRefine((name, ctx) => {
      if (unrecordedSummaries[name]) ctx.addIssue({ code: 'custom', message: unrecordedSummaries[name] });
      else if (!(usageSummaryNames as readonly string[]).includes(name)) {
        ctx.addIssue({ code: 'custom', message: oneOf([...usageSummaryNames, ...Object.keys(unrecordedSummaries)]) });
      }
    })
    .transform((name) => name as UsageSummaryName),
  filter: summaryFilterSchema,
});

export const usageSummaryArgsSchema = z.object({
  queries: z
    .array(usageSummaryQuerySchema)
    .min(1, 'must have at least 1 item(s)')
    .max(usageSummaryLimits.queries, `must have at most ${usageSummaryLimits.queries} item(s)`),
});

const summaryFilterMembers = ['projectID', 'startTime', 'endTime', 'limit', 'offset'] as const;

/**
 * The body of `POST /v1/query/usage`: `{query: [{name, filter}]}`. Members Parley does not read (the
 * original's `platform`) are accepted and ignored; the output keeps the known members as sent, for
 * GraphQL to parse again, and drops the others, which its input type would refuse.
 */
export const usageSummaryBodySchema = z
  .object({ query: z.unknown() })
  .superRefine((body, ctx) => {
    if (!Array.isArray(body.query)) {
      ctx.addIssue({
        code: 'custom',
        path: ['query'],
        message: body.query === undefined ? 'is required' : 'must be an array of {name, filter}',
      });
      return;
    }
    const parsed = usageSummaryArgsSchema.safeParse({ queries: body.query });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        ctx.addIssue({ ...issue, path: ['query', ...issue.path.slice(1)] } as z.core.$ZodRawIssue);
      }
    }
  })
  .transform((body) => ({
    queries: (body.query as { name: string; filter: Record<string, unknown> }[]).map((q) => ({
      name: q.name,
      filter: Object.fromEntries(
        summaryFilterMembers.filter((k) => k in q.filter && q.filter[k] !== null).map((k) => [k, q.filter[k]]),
      ),
    })),
  }));
