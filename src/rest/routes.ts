import { z } from 'zod';
import { environmentAliasSchema, idSchema } from '../admin/validation';
import { usageEventsBodySchema, usageQueryBodySchema, usageSummaryBodySchema } from '../analytics/validation';
import {
  createEvaluationBody,
  estimateEvaluationsBody,
  queueEvaluationsBody,
  runEvaluationBody,
  updateEvaluationBody,
} from '../evaluations/validation';
import { kbDocumentStatuses, kbDocumentTypes } from '../kb/documents';
import { tagLabelSchema, tagLabelsSchema, uploadTagLabelsSchema } from '../kb/tags';
import {
  documentUrlSchema,
  kbLimits,
  kbQueryInputSchema,
  metadataSchema,
  tableUploadBody,
  updateMetadataBody,
  urlUploadBody,
} from '../kb/validation';
import { AppError } from '../lib/errors';
import {
  actionSchema,
  environmentRefSchema,
  requestConfigSchema,
  requestVariablesSchema,
  sessionIdSchema,
  stateSchema,
  userIdSchema,
} from '../runtime/validation';
import { encodeStrings } from '../transcripts/encode';
import {
  appendLogsBody,
  createPropertyBody,
  createTranscriptBody,
  customTraceTypesSchema,
  searchCriteriaSchema,
  setPropertyValueBody,
  setRedactionPatternsBody,
  updatePropertyBody,
} from '../transcripts/validation';
import type { RestRequest, RestRoute } from './adapter';
import { pathId, pathString, queryBool, queryEnum, queryInt, queryOptionalEnum, queryStringList } from './params';
import { runtimeBetaFraming, runtimeV2Framing } from './sse';

/**
 * The whole REST surface, one entry per route: method, path, GraphQL operation, how the request
 * becomes variables, how the data becomes the response body, and the success status.
 * SPEC.md routes come first in each area; Parley additions are marked as such (see docs/rest.md).
 */

// ── Account (Parley additions) ──────────────────────────────────────────────────────────────────

const viewerFields = 'kind keyID workspaceID projectID scopes';
const environmentFields = 'id alias projectID createdAt';

const accountRoutes: RestRoute[] = [
  {
    method: 'GET',
    path: '/v1/whoami',
    summary: 'The key that made the request: its ID, reach and scopes (Parley addition).',
    operation: `query Viewer { viewer { ${viewerFields} } }`,
    variables: () => ({}),
    result: (data) => ({ key: data.viewer }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/environment/project/:projectID',
    summary: "A project's environments (Parley addition).",
    operation: `query Environments($projectID: ID!) { environments(projectID: $projectID) { ${environmentFields} } }`,
    params: z.object({ projectID: pathId('project') }),
    variables: ({ params }) => ({ projectID: params.projectID }),
    result: (data) => ({ environments: data.environments }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/environment',
    summary: 'Add an environment to a project; needs the admin scope (Parley addition).',
    operation: `mutation CreateEnvironment($projectID: ID!, $alias: String!) {
      createEnvironment(projectID: $projectID, alias: $alias) { ${environmentFields} }
    }`,
    body: z.strictObject({ projectID: idSchema, alias: environmentAliasSchema }),
    variables: ({ body }) => ({ projectID: body.projectID, alias: body.alias }),
    result: (data) => ({ environment: data.createEnvironment }),
    status: 201,
  },
];

// ── Runtime (SPEC.md "Streaming interaction"; docs/runtime.md) ──────────────────────────────────

const runtimeUserParams = z.object({ projectID: pathId('project'), userID: userIdSchema });
const environmentQuery = z.object({ environment: environmentRefSchema.optional() });

/** The environment: `?environment=`, else the `versionID` header older clients send, else development. */
function environmentOf(req: RestRequest<unknown, { environment?: string }>): string {
  const header = req.headers.versionid;
  return req.query.environment ?? (typeof header === 'string' && header ? header : 'development');
}

/** SPEC.md does not close the runtime bodies: members Parley does not read are ignored. */
const interactBody = z.object({
  action: actionSchema,
  variables: requestVariablesSchema.optional(),
  config: requestConfigSchema.optional(),
  /** Parley addition: name the conversation session (see docs/runtime.md "Sessions"). */
  sessionID: sessionIdSchema.optional(),
});

const interactRequest = (body: z.infer<typeof interactBody>) => ({
  action: body.action,
  variables: body.variables ?? null,
  config: body.config ?? null,
  sessionID: body.sessionID ?? null,
});

const interactSubscription = (format: 'V2' | 'BETA') => `subscription Interact(
  $projectID: ID!, $userID: String!, $environment: String, $request: InteractRequestInput!,
  $completionEvents: Boolean, $includeState: Boolean
) {
  interact(
    projectID: $projectID, userID: $userID, environment: $environment, request: $request,
    format: ${format}, completionEvents: $completionEvents, includeState: $includeState
  ) { event trace state }
}`;

interface InteractEventData {
  interact: { event: 'trace' | 'state' | 'end'; trace: unknown; state: unknown };
}

const stateVariables = ({
  params,
  query,
  headers,
}: RestRequest<{ projectID: string; userID: string }, { environment?: string }>) => ({
  projectID: params.projectID,
  userID: params.userID,
  environment: environmentOf({ params, query, headers, body: undefined }),
});

const runtimeRoutes: RestRoute[] = [
  {
    kind: 'stream',
    method: 'POST',
    path: '/v2/project/:projectID/user/:userID/interact/stream',
    summary: 'Runs a turn and streams its traces as server-sent events (runtime v2).',
    operation: interactSubscription('V2'),
    params: runtimeUserParams,
    query: z.object({
      environment: environmentRefSchema.optional(),
      completion_events: queryBool(false),
      state: queryBool(false),
    }),
    body: interactBody,
    variables: (req) => ({
      projectID: req.params.projectID,
      userID: req.params.userID,
      environment: environmentOf(req),
      request: interactRequest(req.body),
      completionEvents: req.query.completion_events,
      includeState: req.query.state,
    }),
    framing: runtimeV2Framing,
    message: ({ interact: e }: InteractEventData) =>
      e.event === 'trace'
        ? { event: 'trace', data: e.trace }
        : e.event === 'state'
          ? { event: 'state', data: e.state }
          : { event: 'end' },
  },
  {
    kind: 'stream',
    method: 'POST',
    path: '/v2beta1/interact/:projectID/:environment/stream',
    summary: 'Runs a turn and streams its traces, with completion events (beta).',
    operation: interactSubscription('BETA'),
    params: z.object({ projectID: pathId('project'), environment: environmentRefSchema }),
    body: z.object({
      action: actionSchema,
      session: z.object({ userID: userIdSchema, sessionID: sessionIdSchema }),
      variables: requestVariablesSchema.optional(),
      config: requestConfigSchema.optional(),
    }),
    variables: ({ params, body }) => ({
      projectID: params.projectID,
      userID: body.session.userID,
      environment: params.environment,
      request: {
        action: body.action,
        variables: body.variables ?? null,
        config: body.config ?? null,
        sessionID: body.session.sessionID,
      },
      completionEvents: false,
      includeState: true,
    }),
    framing: runtimeBetaFraming,
    message: ({ interact: e }: InteractEventData) =>
      e.event === 'trace'
        ? { event: 'trace', data: { type: 'trace', trace: e.trace } }
        : e.event === 'state'
          ? { event: 'state', data: { type: 'state', state: e.state } }
          : { event: 'end', data: { type: 'end' } },
  },
  {
    method: 'POST',
    path: '/v2/project/:projectID/user/:userID/interact',
    summary: 'Runs a turn and answers with its traces as a JSON array.',
    operation: `mutation Interact($projectID: ID!, $userID: String!, $environment: String, $request: InteractRequestInput!) {
      interact(projectID: $projectID, userID: $userID, environment: $environment, request: $request) { traces }
    }`,
    params: runtimeUserParams,
    query: environmentQuery,
    body: interactBody,
    variables: (req) => ({
      projectID: req.params.projectID,
      userID: req.params.userID,
      environment: environmentOf(req),
      request: interactRequest(req.body),
    }),
    result: (data) => data.interact.traces,
    status: 200,
  },
  {
    method: 'GET',
    path: '/v2/project/:projectID/user/:userID/state',
    summary: "A user's conversation state {stack, storage, variables}; 404 when there is none.",
    operation: `query RuntimeState($projectID: ID!, $userID: String!, $environment: String) {
      runtimeState(projectID: $projectID, userID: $userID, environment: $environment)
    }`,
    params: runtimeUserParams,
    query: environmentQuery,
    variables: stateVariables,
    result: (data) => data.runtimeState,
    status: 200,
  },
  {
    method: 'PUT',
    path: '/v2/project/:projectID/user/:userID/state',
    summary: "Replaces a user's conversation state.",
    operation: `mutation ReplaceRuntimeState($projectID: ID!, $userID: String!, $environment: String, $state: JSONObject!) {
      replaceRuntimeState(projectID: $projectID, userID: $userID, environment: $environment, state: $state)
    }`,
    params: runtimeUserParams,
    query: environmentQuery,
    body: stateSchema,
    variables: (req) => ({ ...stateVariables(req), state: req.body }),
    result: (data) => data.replaceRuntimeState,
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v2/project/:projectID/user/:userID/state',
    summary: "Deletes a user's conversation state; the next turn starts over.",
    operation: `mutation DeleteRuntimeState($projectID: ID!, $userID: String!, $environment: String) {
      deleteRuntimeState(projectID: $projectID, userID: $userID, environment: $environment)
    }`,
    params: runtimeUserParams,
    query: environmentQuery,
    variables: stateVariables,
    status: 204,
  },
  {
    method: 'PATCH',
    path: '/v2/project/:projectID/user/:userID/state/variables',
    summary: "Merges variables into a user's state; answers with the state.",
    operation: `mutation UpdateRuntimeVariables($projectID: ID!, $userID: String!, $environment: String, $variables: JSONObject!) {
      updateRuntimeVariables(projectID: $projectID, userID: $userID, environment: $environment, variables: $variables)
    }`,
    params: runtimeUserParams,
    query: environmentQuery,
    body: requestVariablesSchema,
    variables: (req) => ({ ...stateVariables(req), variables: req.body }),
    result: (data) => data.updateRuntimeVariables,
    status: 200,
  },
];

// ── Dialog Manager API (the original's; docs/dialog-manager.md) ────────────────────────────────
// The key in `Authorization` names the project; the `versionID` header (or `?environment=`) the
// environment alias or ID, or an agent version; default development. The same GraphQL fields as
// the v2 routes above, so the two share turns, state, transcripts and usage.

const dmUserParams = z.object({ userID: userIdSchema });

const dmInteractBody = z.strictObject({
  action: actionSchema,
  config: requestConfigSchema.optional(),
  /** The original's `state` of an interact request: variables merged in before the turn. */
  state: z.strictObject({ variables: requestVariablesSchema }).optional(),
});

const dmStateVariables = ({ params, query, headers }: RestRequest<{ userID: string }, { environment?: string }>) => ({
  userID: params.userID,
  environment: environmentOf({ params, query, headers, body: undefined }),
});

const dialogManagerRoutes: RestRoute[] = [
  {
    method: 'POST',
    path: '/state/user/:userID/interact',
    summary:
      'Dialog Manager API: runs a turn and answers with its traces as a JSON array; with ?verbose=true {trace, state, action}.',
    operation: `mutation DialogInteract($userID: String!, $environment: String, $request: InteractRequestInput!, $includeState: Boolean) {
      interact(userID: $userID, environment: $environment, request: $request, includeState: $includeState) { traces state }
    }`,
    params: dmUserParams,
    query: z.object({ environment: environmentRefSchema.optional(), verbose: queryBool(false) }),
    body: dmInteractBody,
    variables: (req) => ({
      userID: req.params.userID,
      environment: environmentOf(req),
      request: {
        action: req.body.action,
        variables: req.body.state?.variables ?? null,
        config: req.body.config ?? null,
        sessionID: null,
      },
      includeState: req.query.verbose,
    }),
    result: (data, req) =>
      req.query.verbose
        ? { trace: data.interact.traces, state: data.interact.state, action: req.body.action }
        : data.interact.traces,
    status: 200,
  },
  {
    method: 'GET',
    path: '/state/user/:userID',
    summary: "Dialog Manager API: the user's state {stack, storage, variables}, or null when there is none.",
    operation: `query DialogState($userID: String!, $environment: String) {
      userState(userID: $userID, environment: $environment)
    }`,
    params: dmUserParams,
    query: environmentQuery,
    variables: dmStateVariables,
    result: (data) => data.userState ?? null,
    status: 200,
  },
  {
    method: 'PUT',
    path: '/state/user/:userID',
    summary: "Dialog Manager API: replaces the user's state (what GET answered is accepted); answers the state.",
    operation: `mutation DialogReplaceState($userID: String!, $environment: String, $state: JSONObject!) {
      replaceRuntimeState(userID: $userID, environment: $environment, state: $state)
    }`,
    params: dmUserParams,
    query: environmentQuery,
    body: stateSchema,
    variables: (req) => ({ ...dmStateVariables(req), state: req.body }),
    result: (data) => data.replaceRuntimeState,
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/state/user/:userID',
    summary: "Dialog Manager API: deletes the user's state (200 also when there was none).",
    operation: `mutation DialogDeleteState($userID: String!, $environment: String) {
      deleteRuntimeState(userID: $userID, environment: $environment, mustExist: false)
    }`,
    params: dmUserParams,
    query: environmentQuery,
    variables: dmStateVariables,
    result: (data) => ({ deleted: data.deleteRuntimeState }),
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/state/user/:userID/variables',
    summary: "Dialog Manager API: merges variables into the user's state (created if needed); answers the state.",
    operation: `mutation DialogUpdateVariables($userID: String!, $environment: String, $variables: JSONObject!) {
      updateRuntimeVariables(userID: $userID, environment: $environment, variables: $variables)
    }`,
    params: dmUserParams,
    query: environmentQuery,
    body: requestVariablesSchema,
    variables: (req) => ({ ...dmStateVariables(req), variables: req.body }),
    result: (data) => data.updateRuntimeVariables,
    status: 200,
  },
];

// ── Usage ─────────────────────────────────────────────────────────────────────────────────────────

const usageItemBase = 'period projectID environmentID count';
const usageItemsOf = (type: string, fields = '') => `... on ${type} { items { ${usageItemBase} ${fields} } cursor }`;

/** The GraphQL result of the usage query as SPEC.md's `result`: no __typename, no null cursor. */
function restUsageResult(usage: { __typename: string; cursor?: number | null; [member: string]: unknown }) {
  const { __typename: _type, cursor, ...rest } = usage;
  return cursor === null || cursor === undefined ? rest : { ...rest, cursor };
}

const usageRoutes: RestRoute[] = [
  {
    method: 'POST',
    path: '/v2/query/usage',
    summary: 'Usage of a project by UTC hour for one of ten query names, or its top intents (SPEC.md).',
    operation: `query Usage($name: UsageQueryName!, $filter: UsageFilterInput!) {
      usage(name: $name, filter: $filter) {
        __typename
        ${usageItemsOf('InteractionsUsage', 'type')}
        ... on TopIntentsUsage { intents { name count } }
        ${usageItemsOf('UniqueUsersUsage')}
        ${usageItemsOf('CreditUsage', 'diagramID nodeID model type')}
        ${usageItemsOf('FunctionUsage', 'functionID name successCount')}
        ${usageItemsOf('ApiCallsUsage', 'apiToolID name successCount')}
        ${usageItemsOf('KbDocumentsUsage', 'documentID')}
        ${usageItemsOf('IntegrationsUsage', 'integrationToolName successCount')}
        ${usageItemsOf('TranscriptsUsage')}
        ${usageItemsOf('AgentUsage', 'agentID name successCount')}
      }
    }`,
    body: usageQueryBodySchema,
    variables: ({ body }) => ({ name: body.data.name, filter: body.data.filter }),
    result: (data) => ({ result: restUsageResult(data.usage) }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/query/usage',
    summary:
      "The original's v1 usage query: {query: [{name, filter: {projectID (one or a list), startTime?, endTime?, limit?, offset?}}]} → {result: [...]}, one answer per query (docs/usage.md).",
    operation: `query UsageSummary($queries: [UsageSummaryQueryInput!]!) {
      usageSummary(queries: $queries) { name count intents { name count } tokens { model count } }
    }`,
    body: usageSummaryBodySchema,
    variables: ({ body }) => ({ queries: body.queries }),
    result: (data) => ({
      result: data.usageSummary.map((s: { name: string; count: number; intents: unknown; tokens: unknown }) =>
        s.name === 'top_intents'
          ? { intents: s.intents }
          : s.name === 'token_usage'
            ? { tokens: s.tokens }
            : { count: s.count },
      ),
    }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/usage/events',
    summary: 'Ingest up to 1,000 usage events, all or nothing; needs the analytics:write scope (Parley addition).',
    // The events travel as one JSON value and are checked once, by the field, with the route
    // schema's errors; the route's schema checks the envelope.
    operation: `mutation RecordUsageEventBatch($events: JSON!) {
      recordUsageEventBatch(events: $events) { recorded duplicates }
    }`,
    body: usageEventsBodySchema,
    variables: ({ body }) => ({ events: body.events }),
    result: (data) => data.recordUsageEventBatch,
    status: 201,
  },
];

// ── Transcripts ─────────────────────────────────────────────────────────────────────────────────
// SPEC.md "Transcripts", "Transcript properties", "Transcript property values", "Transcript
// evaluations", with DECISIONS.md §5 and Parley's additions (ingestion, the evaluation operations,
// redaction patterns).

/** Request bodies hold dates as zod parsed them; GraphQL variables want the JSON text back. */
function asVariables<T>(value: T): T {
  if (value instanceof Date) return value.toISOString() as T;
  if (Array.isArray(value)) return value.map((v) => asVariables(v)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = asVariables(v);
    return out as T;
  }
  return value;
}

const propertyItemFields = 'id name type default value metadata createdAt updatedAt';
const evaluationItemFields =
  'id name description default type value reason cost status error minimumValue maximumValue createdAt updatedAt';
const searchItemFields = `id sessionID projectID environmentID userID createdAt updatedAt expiresAt endedAt recordingURL
  device browser os
  properties { ${propertyItemFields} } evaluations { ${evaluationItemFields} }`;
const propertyFields = 'id projectID name type default createdAt updatedAt';
const valueFields = 'propertyID transcriptID value metadata createdAt updatedAt';
const evaluationFields = `id projectID name description default enabled averageCost prompt settings type
  truePrompt falsePrompt minimumValue minimumPrompt maximumValue maximumPrompt createdAt updatedAt`;

interface EvaluationItem {
  type: string;
  minimumValue?: number | null;
  maximumValue?: number | null;
  [key: string]: unknown;
}

/**
 * minimumValue and maximumValue belong to number evaluations only (the original service's shape).
 * The item is the operation's own result object, so the two members are dropped from it in place:
 * graphql's result objects have no prototype (V8 keeps them as dictionaries), and copying them
 * with spread and rest patterns cost about 0.1 ms per page of 25 transcripts.
 */
function evaluationItem(item: EvaluationItem): EvaluationItem {
  if (item.type !== 'number') {
    delete item.minimumValue;
    delete item.maximumValue;
  }
  return item;
}

const typeFields: Record<string, string[]> = {
  boolean: ['truePrompt', 'falsePrompt'],
  number: ['minimumValue', 'minimumPrompt', 'maximumValue', 'maximumPrompt'],
  string: [],
};
const allTypeFields = Object.values(typeFields).flat();

/** An evaluation record with the fields of its own type only. */
function evaluationRecord(e: Record<string, unknown> & { type: string }) {
  const own = new Set(typeFields[e.type] ?? []);
  return Object.fromEntries(Object.entries(e).filter(([k]) => !allTypeFields.includes(k) || own.has(k)));
}

/**
 * A transcript as the original's clients parse it: `evaluations[]` holds the results that have a
 * value (status done), whose value, reason and cost the documents require; pending, skipped and
 * failed ones join them, with their nulls and status, only when the request asks for all
 * (`allEvaluations=true`; docs/evaluations.md).
 */
function searchItem(t: { evaluations: EvaluationItem[] } & Record<string, unknown>, allEvaluations = false) {
  // In place, for the reason given at evaluationItem; assigning a member keeps its place in the JSON.
  const evaluations = allEvaluations ? t.evaluations : t.evaluations.filter((e) => e.status === 'done');
  for (const item of evaluations) evaluationItem(item);
  t.evaluations = evaluations;
  return t;
}

const maybeEncode = <T>(value: T, encode: boolean): T => (encode ? encodeStrings(value) : value);

const transcriptRoutes: RestRoute[] = [
  {
    method: 'POST',
    path: '/v1/transcript/project/:projectID',
    summary:
      'Search the transcripts of a project. Query: take (1-100, default 25), skip (>= 0), order (ASC|DESC, default DESC), encode, allEvaluations (include results without a value). Body: optional search criteria.',
    operation: `query SearchTranscripts($projectID: ID!, $criteria: TranscriptSearchCriteria, $first: Int, $skip: Int, $order: SortOrder) {
      transcripts(projectID: $projectID, criteria: $criteria, first: $first, skip: $skip, order: $order) {
        edges { node { ${searchItemFields} } }
      }
    }`,
    params: z.object({ projectID: pathId('project') }),
    query: z.object({
      take: queryInt({ min: 1, max: 100, default: 25 }),
      skip: queryInt({ min: 0, default: 0 }),
      order: queryEnum(['ASC', 'DESC'], 'DESC'),
      encode: queryBool(false),
      allEvaluations: queryBool(false),
    }),
    body: searchCriteriaSchema,
    bodyOptional: true,
    variables: ({ params, query, body }) => ({
      projectID: params.projectID,
      criteria: asVariables(body),
      first: query.take,
      skip: query.skip,
      order: query.order,
    }),
    result: (data, req) => ({
      transcripts: maybeEncode(
        data.transcripts.edges.map((e: { node: Parameters<typeof searchItem>[0] }) =>
          searchItem(e.node, req.query.allEvaluations),
        ),
        req.query.encode,
      ),
    }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/transcript/:transcriptID',
    summary:
      'A transcript with its history, logs, properties and evaluation results (those with a value; allEvaluations=true for all). Query: unredacted, filterConversation, customTraceTypes, encode, allEvaluations.',
    operation: `query GetTranscript($id: ID!, $unredacted: Boolean, $filterConversation: Boolean, $customTraceTypes: [String!]) {
      transcript(id: $id) {
        ${searchItemFields}
        history { id createdAt }
        feedback { turnID rating createdAt }
        logs(unredacted: $unredacted, filterConversation: $filterConversation, customTraceTypes: $customTraceTypes) {
          type data createdAt updatedAt
        }
      }
    }`,
    params: z.object({ transcriptID: pathId('transcript') }),
    query: z.object({
      unredacted: queryBool(false),
      filterConversation: queryBool(false),
      customTraceTypes: queryStringList(customTraceTypesSchema),
      encode: queryBool(false),
      allEvaluations: queryBool(false),
    }),
    variables: ({ params, query }) => ({
      id: params.transcriptID,
      unredacted: query.unredacted,
      filterConversation: query.filterConversation,
      customTraceTypes: query.customTraceTypes,
    }),
    result: (data, req) => ({
      transcript: maybeEncode(searchItem(data.transcript, req.query.allEvaluations), req.query.encode),
    }),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v1/transcript/:transcriptID',
    summary: 'Delete a transcript with its logs, property values and evaluation results.',
    operation: 'mutation DeleteTranscript($id: ID!) { deleteTranscript(id: $id) }',
    params: z.object({ transcriptID: pathId('transcript') }),
    variables: ({ params }) => ({ id: params.transcriptID }),
    status: 204,
  },
  {
    method: 'POST',
    path: '/v1/transcript/:transcriptID/project/:projectID/end',
    summary:
      'Mark a transcript ended and queue its enabled evaluations (again: no-op). Answers {transcriptID, endedAt, evaluationsQueued}.',
    operation: `mutation EndTranscript($projectID: ID!, $transcriptID: ID!) {
      endTranscript(projectID: $projectID, transcriptID: $transcriptID) { transcriptID endedAt evaluationsQueued }
    }`,
    params: z.object({ transcriptID: pathId('transcript'), projectID: pathId('project') }),
    variables: ({ params }) => ({ projectID: params.projectID, transcriptID: params.transcriptID }),
    result: (data) => data.endTranscript,
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/transcript',
    summary:
      'Ingest a transcript of any runtime: {projectID, sessionID, userID?, environment?, logs?} (Parley addition).',
    operation: `mutation CreateTranscript($input: CreateTranscriptInput!) {
      createTranscript(input: $input) { ${searchItemFields} }
    }`,
    body: createTranscriptBody,
    variables: ({ body }) => ({ input: asVariables(body) }),
    result: (data) => ({ transcript: searchItem(data.createTranscript) }),
    status: 201,
  },
  {
    method: 'POST',
    path: '/v1/transcript/:transcriptID/logs',
    summary: 'Append logs to a transcript: {logs: [{type, data, createdAt?}]} (Parley addition).',
    operation: `mutation AppendTranscriptLogs($transcriptID: ID!, $logs: [TranscriptLogInput!]!) {
      appendTranscriptLogs(transcriptID: $transcriptID, logs: $logs) { transcriptID }
    }`,
    params: z.object({ transcriptID: pathId('transcript') }),
    body: appendLogsBody,
    variables: ({ params, body }) => ({ transcriptID: params.transcriptID, logs: asVariables(body.logs) }),
    status: 204,
  },

  // Properties
  {
    method: 'GET',
    path: '/v1/transcript-property/project/:projectID',
    summary: 'The transcript properties of a project.',
    operation: `query TranscriptProperties($projectID: ID!) { transcriptProperties(projectID: $projectID) { ${propertyFields} } }`,
    params: z.object({ projectID: pathId('project') }),
    variables: ({ params }) => ({ projectID: params.projectID }),
    result: (data) => ({ properties: data.transcriptProperties }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/transcript-property/:propertyID',
    summary: 'A transcript property.',
    operation: `query TranscriptProperty($id: ID!) { transcriptProperty(id: $id) { ${propertyFields} } }`,
    params: z.object({ propertyID: pathId('property') }),
    variables: ({ params }) => ({ id: params.propertyID }),
    result: (data) => ({ property: data.transcriptProperty }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/transcript-property',
    summary: 'Create a transcript property: {projectID, name, type (string|number|boolean)}.',
    operation: `mutation CreateTranscriptProperty($input: CreateTranscriptPropertyInput!) {
      createTranscriptProperty(input: $input) { ${propertyFields} }
    }`,
    body: createPropertyBody,
    variables: ({ body }) => ({ input: body }),
    result: (data) => ({ property: data.createTranscriptProperty }),
    status: 201,
  },
  {
    method: 'PATCH',
    path: '/v1/transcript-property/:propertyID',
    summary: 'Rename or retype a property ({name?, type?}); 409 while values would not parse as the new type.',
    operation: `mutation UpdateTranscriptProperty($id: ID!, $input: UpdateTranscriptPropertyInput!) {
      updateTranscriptProperty(id: $id, input: $input) { id }
    }`,
    params: z.object({ propertyID: pathId('property') }),
    body: updatePropertyBody,
    variables: ({ params, body }) => ({ id: params.propertyID, input: body }),
    status: 204,
  },
  {
    method: 'DELETE',
    path: '/v1/transcript-property/:propertyID',
    summary: 'Delete a property and its values on every transcript.',
    operation: 'mutation DeleteTranscriptProperty($id: ID!) { deleteTranscriptProperty(id: $id) }',
    params: z.object({ propertyID: pathId('property') }),
    variables: ({ params }) => ({ id: params.propertyID }),
    status: 204,
  },

  // Property values
  {
    method: 'POST',
    path: '/v1/transcript-property-value',
    summary: "Set (replace) a property's value on a transcript: {propertyID, transcriptID, value, metadata?}.",
    operation: `mutation SetTranscriptPropertyValue($input: SetTranscriptPropertyValueInput!) {
      setTranscriptPropertyValue(input: $input) { ${valueFields} }
    }`,
    body: setPropertyValueBody,
    variables: ({ body }) => ({ input: body }),
    result: (data) => ({ propertyValue: data.setTranscriptPropertyValue }),
    status: 201,
  },
  {
    method: 'GET',
    path: '/v1/transcript-property-value/transcript/:transcriptID',
    summary: 'The property values of a transcript.',
    operation: `query TranscriptPropertyValues($transcriptID: ID!) {
      transcriptPropertyValues(transcriptID: $transcriptID) { ${valueFields} }
    }`,
    params: z.object({ transcriptID: pathId('transcript') }),
    variables: ({ params }) => ({ transcriptID: params.transcriptID }),
    result: (data) => ({ propertyValues: data.transcriptPropertyValues }),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v1/transcript-property-value/transcript/:transcriptID/property/:propertyID',
    summary: 'Remove the value of a property from a transcript.',
    operation: `mutation DeleteTranscriptPropertyValue($transcriptID: ID!, $propertyID: ID!) {
      deleteTranscriptPropertyValue(transcriptID: $transcriptID, propertyID: $propertyID)
    }`,
    params: z.object({ transcriptID: pathId('transcript'), propertyID: pathId('property') }),
    variables: ({ params }) => ({ transcriptID: params.transcriptID, propertyID: params.propertyID }),
    status: 204,
  },

  // Evaluations
  {
    method: 'POST',
    path: '/v1/transcript-evaluation',
    summary:
      'Create an evaluation (admin scope): {projectID, name, description?, enabled?, type, prompt, settings?, ...type fields}.',
    operation: `mutation CreateTranscriptEvaluation($input: CreateTranscriptEvaluationInput!) {
      createTranscriptEvaluation(input: $input) { ${evaluationFields} }
    }`,
    body: createEvaluationBody,
    variables: ({ body }) => ({ input: body }),
    result: (data) => ({ evaluation: evaluationRecord(data.createTranscriptEvaluation) }),
    status: 201,
  },
  {
    method: 'PATCH',
    path: '/v1/transcript-evaluation/:evaluationID',
    summary: 'Update an evaluation (admin scope): anything but projectID, type and the numeric range.',
    operation: `mutation UpdateTranscriptEvaluation($id: ID!, $input: UpdateTranscriptEvaluationInput!) {
      updateTranscriptEvaluation(id: $id, input: $input) { id }
    }`,
    params: z.object({ evaluationID: pathId('evaluation') }),
    body: updateEvaluationBody,
    variables: ({ params, body }) => ({ id: params.evaluationID, input: body }),
    status: 204,
  },
  {
    method: 'GET',
    path: '/v1/transcript-evaluation/project/:projectID',
    summary: 'The evaluations of a project (Parley addition per DECISIONS.md §5).',
    operation: `query TranscriptEvaluations($projectID: ID!) { transcriptEvaluations(projectID: $projectID) { ${evaluationFields} } }`,
    params: z.object({ projectID: pathId('project') }),
    variables: ({ params }) => ({ projectID: params.projectID }),
    result: (data) => ({ evaluations: data.transcriptEvaluations.map(evaluationRecord) }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/transcript-evaluation/:evaluationID',
    summary: 'An evaluation.',
    operation: `query TranscriptEvaluation($id: ID!) { transcriptEvaluation(id: $id) { ${evaluationFields} } }`,
    params: z.object({ evaluationID: pathId('evaluation') }),
    variables: ({ params }) => ({ id: params.evaluationID }),
    result: (data) => ({ evaluation: evaluationRecord(data.transcriptEvaluation) }),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v1/transcript-evaluation/:evaluationID',
    summary: 'Delete an evaluation and its results (admin scope).',
    operation: 'mutation DeleteTranscriptEvaluation($id: ID!) { deleteTranscriptEvaluation(id: $id) }',
    params: z.object({ evaluationID: pathId('evaluation') }),
    variables: ({ params }) => ({ id: params.evaluationID }),
    status: 204,
  },
  {
    method: 'POST',
    path: '/v1/transcript-evaluation/queue',
    summary:
      "Queue evaluation runs: {projectID, evaluationIDs (1-10), transcriptIDs (1-100)}; what fits in the project's queue is queued, the rest named in warning {type: quota_exceeded, message, skippedTranscriptIDs}; 429 with Retry-After when nothing fits.",
    operation: `mutation QueueTranscriptEvaluations($input: QueueTranscriptEvaluationsInput!) {
      queueTranscriptEvaluations(input: $input) {
        transcriptCount evaluationCount warning { type message skippedTranscriptIDs } notes
      }
    }`,
    body: queueEvaluationsBody,
    variables: ({ body }) => ({ input: body }),
    result: (data) => {
      const { warning, notes, ...counts } = data.queueTranscriptEvaluations;
      return { ...counts, ...(warning ? { warning } : {}), ...(notes.length ? { notes } : {}) };
    },
    status: 201,
  },
  {
    method: 'POST',
    path: '/v1/transcript-evaluation/estimate',
    summary:
      "Estimated cost of evaluations on the transcripts matching search criteria, from each evaluation's average cost: {evaluationIDs, ...criteria}; the project is the evaluations'.",
    operation: `query EstimateTranscriptEvaluations($input: EstimateTranscriptEvaluationsInput!) {
      transcriptEvaluationEstimate(input: $input) { totalCost transcriptCount evaluations { id cost } }
    }`,
    body: estimateEvaluationsBody,
    variables: ({ body }) => {
      const { projectID, evaluationIDs, ...criteria } = body;
      return { input: { projectID: projectID ?? null, evaluationIDs, criteria: asVariables(criteria) } };
    },
    result: (data) => {
      const e = data.transcriptEvaluationEstimate;
      return { totalCost: e.totalCost, breakdown: { transcriptCount: e.transcriptCount, evaluations: e.evaluations } };
    },
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/transcript-evaluation/:evaluationID/transcript/:transcriptID',
    summary: 'Run an evaluation on a transcript now: {projectID} → {result}.',
    operation: `mutation RunTranscriptEvaluation($projectID: ID!, $evaluationID: ID!, $transcriptID: ID!) {
      runTranscriptEvaluation(projectID: $projectID, evaluationID: $evaluationID, transcriptID: $transcriptID) {
        transcriptID evaluationID value reason cost status error
      }
    }`,
    params: z.object({ evaluationID: pathId('evaluation'), transcriptID: pathId('transcript') }),
    body: runEvaluationBody,
    variables: ({ params, body }) => ({
      projectID: body.projectID,
      evaluationID: params.evaluationID,
      transcriptID: params.transcriptID,
    }),
    result: (data) => {
      const { status, error, ...result } = data.runTranscriptEvaluation;
      // The documents require value, reason and cost: a run without a verdict is an error, not a null
      // result. The stored result stays visible with its status (allEvaluations=true, GraphQL).
      if (status !== 'done') {
        throw new AppError(
          'SERVICE_UNAVAILABLE',
          `The evaluation gave no result (${status}): ${result.reason ?? error ?? 'no reason recorded'}`,
        );
      }
      return { result };
    },
    status: 201,
  },

  // Redaction patterns
  {
    method: 'GET',
    path: '/v1/transcript-redaction/project/:projectID',
    summary: "A project's own redaction patterns (Parley addition).",
    operation:
      'query TranscriptRedactionPatterns($projectID: ID!) { transcriptRedactionPatterns(projectID: $projectID) }',
    params: z.object({ projectID: pathId('project') }),
    variables: ({ params }) => ({ projectID: params.projectID }),
    result: (data) => ({ patterns: data.transcriptRedactionPatterns }),
    status: 200,
  },
  {
    method: 'PUT',
    path: '/v1/transcript-redaction/project/:projectID',
    summary: "Replace a project's redaction patterns: {patterns: [RE2 pattern]} (admin scope; Parley addition).",
    operation: `mutation SetTranscriptRedactionPatterns($projectID: ID!, $patterns: [String!]!) {
      setTranscriptRedactionPatterns(projectID: $projectID, patterns: $patterns)
    }`,
    params: z.object({ projectID: pathId('project') }),
    body: setRedactionPatternsBody,
    variables: ({ params, body }) => ({ projectID: params.projectID, patterns: body.patterns }),
    result: (data) => ({ patterns: data.setTranscriptRedactionPatterns }),
    status: 200,
  },
];

// ── Knowledge base ──────────────────────────────────────────────────────────────────────────────
// SPEC.md "Knowledge base", DECISIONS.md §7; list, get, replace, metadata and delete are Parley's
// (docs/knowledge-base.md). A project key works on its project; other keys add ?projectID=.

const kbDocumentFields = `documentID projectID data { type name url rowsCount } metadata status { type data }
  tags chunkCount maxChunkSize revision createdAt updatedAt`;

interface KbDocumentData {
  documentID: string;
  projectID: string;
  data: { type: string; name: string; url: string | null; rowsCount: number | null };
  metadata: Record<string, unknown>;
  status: { type: string; data: string | null };
  tags: string[];
  chunkCount: number;
  maxChunkSize: number;
  revision: number;
  createdAt: string;
  updatedAt: string;
}

/**
 * A document as DECISIONS.md §7 shapes it (absent rather than null for url, rowsCount, status.data):
 * only the table upload answers with it, since knowledge-base-apis.json documents that route's `data`
 * as one object with `status: {type}`. Every other document route answers `kbOriginalDocument`.
 */
function kbDocument(d: KbDocumentData) {
  return {
    documentID: d.documentID,
    data: {
      type: d.data.type,
      name: d.data.name,
      ...(d.data.url !== null ? { url: d.data.url } : {}),
      ...(d.data.rowsCount !== null ? { rowsCount: d.data.rowsCount } : {}),
    },
    metadata: d.metadata,
    status: { type: d.status.type, ...(d.status.data !== null ? { data: d.status.data } : {}) },
    tags: d.tags,
    updatedAt: d.updatedAt,
    createdAt: d.createdAt,
    chunkCount: d.chunkCount,
    maxChunkSize: d.maxChunkSize,
    revision: d.revision,
  };
}

/**
 * A document as the original's OpenAPI documents shape it (`Document` of knowledge-base-apis.json and
 * the management documents; docs/knowledge-base.md "Shapes follow the original's documents"): `status`
 * is the status name, the metadata is both `data.metadata` (knowledge-base-apis.json) and `metadata`
 * (the management documents), and `tags` lists its tag labels. The documents' objects allow other
 * members, so Parley adds `statusDetail` (why an ERROR), `createdAt`,
 * `chunkCount`, `maxChunkSize` and `revision`.
 */
function kbOriginalDocument(d: KbDocumentData) {
  return {
    documentID: d.documentID,
    data: {
      type: d.data.type,
      name: d.data.name,
      ...(d.data.url !== null ? { url: d.data.url } : {}),
      metadata: d.metadata,
      ...(d.data.rowsCount !== null ? { rowsCount: d.data.rowsCount } : {}),
    },
    metadata: d.metadata,
    status: d.status.type,
    ...(d.status.data !== null ? { statusDetail: d.status.data } : {}),
    updatedAt: d.updatedAt,
    tags: d.tags,
    createdAt: d.createdAt,
    chunkCount: d.chunkCount,
    maxChunkSize: d.maxChunkSize,
    revision: d.revision,
  };
}

const kbProjectQuery = { projectID: pathId('project').optional() };

/**
 * The upload option `tags`: `tags=a&tags=b` (also `tags[]=a`), or one JSON array `tags=["a","b"]`,
 * as the original documents. Labels are not split at commas: a label may hold one.
 */
const uploadTagsQuery = z.preprocess((raw) => {
  if (raw === undefined || raw === '') return [];
  const list = Array.isArray(raw) ? raw : [raw];
  return list.flatMap((v) => {
    if (typeof v === 'string' && v.trim().startsWith('[')) {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        return [v];
      }
    }
    return [v];
  });
}, uploadTagLabelsSchema);
/**
 * Upload options of the original's documents that Parley does not implement (docs/knowledge-base.md
 * "Upload options"): `false` or absent is what Parley does anyway; asking for one is a 400 naming
 * it, never an option accepted and silently ignored.
 */
const refusedUploadOption = (what: string) =>
  queryBool(false).refine((asked) => !asked, {
    message: `is not supported by Parley (${what}); leave it out or send false`,
  });
const kbUnsupportedUploadOptions = {
  markdownConversion: refusedUploadOption('HTML to Markdown conversion before chunking'),
  llmGeneratedQ: refusedUploadOption('a model writing a question for each chunk'),
  llmPrependContext: refusedUploadOption('a model writing context before each chunk'),
  llmBasedChunks: refusedUploadOption('chunking by a model'),
  llmContentSummarization: refusedUploadOption('a model rewriting the content'),
};

/** Replacing content keeps the document's tags; they change through attach and detach. */
const refusedReplaceTags = z
  .unknown()
  .optional()
  .refine((v) => v === undefined || v === '' || (Array.isArray(v) && v.length === 0), {
    message:
      'is not taken when replacing a document (it keeps its tags); use POST /v3alpha/knowledge-base/docs/{documentID}/tags/attach',
  });

const kbUploadQuery = z.object({
  ...kbProjectQuery,
  ...kbUnsupportedUploadOptions,
  tags: uploadTagsQuery,
  overwrite: queryBool(false),
  maxChunkSize: queryInt({
    min: kbLimits.chunkSize.min,
    max: kbLimits.chunkSize.max,
    default: kbLimits.chunkSize.default,
  }),
  wait: queryBool(false),
  /** The environment the document is used in (its embedding tokens are charged there): Parley addition. */
  environment: z.string().min(1).max(100).optional(),
});

/** A multipart upload: one `file` part and an optional `metadata` part holding a JSON object. */
const fileUploadForm = z
  .object({
    fields: z.strictObject({ metadata: z.string().optional() }),
    file: z
      .object({
        field: z.string(),
        filename: z.string(),
        contentType: z.string().nullable(),
        bytes: z.instanceof(Buffer),
      })
      .nullable(),
  })
  .transform((form, ctx) => {
    if (form.file?.field !== 'file') {
      ctx.addIssue({ code: 'custom', path: ['file'], message: 'is required: send the document as the "file" part' });
      return z.NEVER;
    }
    // Absent: {} for a new document, the document's own when replacing one.
    if (form.fields.metadata === undefined || form.fields.metadata.trim() === '') {
      return { kind: 'file' as const, file: form.file, metadata: undefined };
    }
    let metadata: unknown;
    try {
      metadata = JSON.parse(form.fields.metadata);
    } catch {
      ctx.addIssue({ code: 'custom', path: ['metadata'], message: 'must be JSON text of an object' });
      return z.NEVER;
    }
    const checked = metadataSchema.safeParse(metadata);
    if (!checked.success) {
      for (const issue of checked.error.issues) ctx.addIssue({ ...issue, path: ['metadata', ...issue.path] } as never);
      return z.NEVER;
    }
    return { kind: 'file' as const, file: form.file, metadata: checked.data };
  });

type FileUpload = z.infer<typeof fileUploadForm>;
type UrlUpload = z.infer<typeof urlUploadBody>;
const isFileUpload = (body: FileUpload | UrlUpload): body is FileUpload => 'kind' in body && body.kind === 'file';

/** The multipart file as the GraphQL File the upload mutations take. */
const asFile = (upload: FileUpload) =>
  new File([new Uint8Array(upload.file.bytes)], upload.file.filename, { type: upload.file.contentType ?? '' });

const kbUploadOperations = `
  mutation UploadKnowledgeBaseFile($projectID: ID, $file: File!, $metadata: JSONObject, $overwrite: Boolean, $maxChunkSize: Int, $wait: Boolean, $environment: String, $tags: [String!]) {
    document: uploadKnowledgeBaseFile(projectID: $projectID, file: $file, metadata: $metadata, overwrite: $overwrite, maxChunkSize: $maxChunkSize, wait: $wait, environment: $environment, tags: $tags) { ${kbDocumentFields} }
  }
  mutation UploadKnowledgeBaseUrl($projectID: ID, $url: String!, $name: String, $metadata: JSONObject, $overwrite: Boolean, $maxChunkSize: Int, $wait: Boolean, $environment: String, $tags: [String!]) {
    document: uploadKnowledgeBaseUrl(projectID: $projectID, url: $url, name: $name, metadata: $metadata, overwrite: $overwrite, maxChunkSize: $maxChunkSize, wait: $wait, environment: $environment, tags: $tags) { ${kbDocumentFields} }
  }`;

const kbReplaceOperations = `
  mutation ReplaceKnowledgeBaseFile($documentID: ID!, $file: File!, $metadata: JSONObject, $maxChunkSize: Int, $wait: Boolean) {
    document: replaceKnowledgeBaseDocument(documentID: $documentID, file: $file, metadata: $metadata, maxChunkSize: $maxChunkSize, wait: $wait) { ${kbDocumentFields} }
  }
  mutation ReplaceKnowledgeBaseUrl($documentID: ID!, $url: String!, $metadata: JSONObject, $maxChunkSize: Int, $wait: Boolean) {
    document: replaceKnowledgeBaseDocument(documentID: $documentID, url: $url, metadata: $metadata, maxChunkSize: $maxChunkSize, wait: $wait) { ${kbDocumentFields} }
  }`;

const kbReplaceUrlBody = z.strictObject({
  data: z.strictObject({
    type: z.literal('url', { error: 'must be "url" (send files as multipart/form-data)' }),
    url: documentUrlSchema,
    metadata: metadataSchema.optional(),
  }),
});

const kbQueryFields = `output chunks { score chunkID documentID content metadata source { type name url tags } }
  queryTokens answerTokens totalTokens model`;

interface KbQueryData {
  output: string | null;
  chunks: { source: { type: string; name: string; url: string | null; tags: string[] } }[];
}

const kbQueryRoute = (path: string, summary: string): RestRoute => ({
  method: 'POST',
  path,
  summary,
  operation: `query KnowledgeBaseQuery($input: KnowledgeBaseQueryInput!) { knowledgeBaseQuery(input: $input) { ${kbQueryFields} } }`,
  query: z.object(kbProjectQuery),
  body: kbQueryInputSchema,
  variables: ({ body, query }) => ({ input: { ...body, projectID: body.projectID ?? query.projectID } }),
  result: (data: { knowledgeBaseQuery: KbQueryData }) => ({
    ...data.knowledgeBaseQuery,
    chunks: data.knowledgeBaseQuery.chunks.map((c) => ({
      ...c,
      source: {
        type: c.source.type,
        name: c.source.name,
        ...(c.source.url !== null ? { url: c.source.url } : {}),
        tags: c.source.tags,
      },
    })),
  }),
  status: 200,
});

/** `DocumentDataUrl` of the original's documents: `type` defaults to "url"; other members are ignored. */
const urlDocumentBody = z.object({
  data: z.object({
    type: z.literal('url', { error: 'must be "url" (upload files to /v1/knowledge-base/docs/upload)' }).optional(),
    url: documentUrlSchema,
    name: z.string().min(1).max(kbLimits.name).optional(),
    metadata: metadataSchema.optional(),
  }),
});

const chunkMetadataBody = z.object({ data: z.object({ metadata: metadataSchema }) });

// ── Knowledge-base tags: the original's v3alpha routes (knowledge-base-tags.json) ────────────────

const kbTagFields = 'tagID label';
/** A tag as the original's documents answer it: `{data: [{data: {label, tagID}}]}`. */
const kbTagList = (tags: { tagID: string; label: string }[]) => ({
  data: tags.map((t) => ({ data: { label: t.label, tagID: t.tagID } })),
});
const tagLabelBody = z.object({ data: z.object({ label: tagLabelSchema }) });
const tagLabelsBody = z.object({ data: z.object({ tags: tagLabelsSchema }) });
const tagParams = z.object({ tagID: pathId('tag') });

const kbTagRoutes: RestRoute[] = [
  {
    method: 'POST',
    path: '/v3alpha/knowledge-base/tags',
    summary:
      'Create a tag: {data: {label}} (labels unique per project, 409 otherwise). Answers {data: [{data: {label, tagID}}]}.',
    operation: `mutation CreateKnowledgeBaseTag($projectID: ID, $label: String!) {
      tag: createKnowledgeBaseTag(projectID: $projectID, label: $label) { ${kbTagFields} }
    }`,
    query: z.object(kbProjectQuery),
    body: tagLabelBody,
    variables: ({ body, query }) => ({ projectID: query.projectID ?? null, label: body.data.label }),
    result: (data) => kbTagList([data.tag]),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v3alpha/knowledge-base/tags',
    summary: "The project's tags by label: {data: [{data: {label, tagID}}]}.",
    operation: `query KnowledgeBaseTags($projectID: ID) { tags: knowledgeBaseTags(projectID: $projectID) { ${kbTagFields} } }`,
    query: z.object(kbProjectQuery),
    variables: ({ query }) => ({ projectID: query.projectID ?? null }),
    result: (data) => kbTagList(data.tags),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v3alpha/knowledge-base/tags/:tagID',
    summary: 'One tag: {data: [{data: {label, tagID}}]}.',
    operation: `query KnowledgeBaseTag($tagID: ID!) { tag: knowledgeBaseTag(tagID: $tagID) { ${kbTagFields} } }`,
    params: tagParams,
    variables: ({ params }) => ({ tagID: params.tagID }),
    result: (data) => kbTagList([data.tag]),
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/v3alpha/knowledge-base/tags/:tagID',
    summary: 'Relabel a tag: {data: {label}}; documents keep it. Answers {data: [{data: {label, tagID}}]}.',
    operation: `mutation UpdateKnowledgeBaseTag($tagID: ID!, $label: String!) {
      tag: updateKnowledgeBaseTag(tagID: $tagID, label: $label) { ${kbTagFields} }
    }`,
    params: tagParams,
    body: tagLabelBody,
    variables: ({ params, body }) => ({ tagID: params.tagID, label: body.data.label }),
    result: (data) => kbTagList([data.tag]),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v3alpha/knowledge-base/tags/:tagID',
    summary: 'Delete a tag and detach it from every document: 200 with no content.',
    operation: `mutation DeleteKnowledgeBaseTag($tagID: ID!) { deleteKnowledgeBaseTag(tagID: $tagID) }`,
    params: tagParams,
    variables: ({ params }) => ({ tagID: params.tagID }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v3alpha/knowledge-base/docs/:documentID/tags/attach',
    summary:
      'Attach existing tags to a document: {data: {tags: [label]}}; an unknown label is a 404. 200 with no content.',
    operation: `mutation AttachKnowledgeBaseTags($documentID: ID!, $tags: [String!]!) {
      attachKnowledgeBaseTags(documentID: $documentID, tags: $tags) { documentID }
    }`,
    params: z.object({ documentID: pathId('document') }),
    body: tagLabelsBody,
    variables: ({ params, body }) => ({ documentID: params.documentID, tags: body.data.tags }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v3alpha/knowledge-base/docs/:documentID/tags/detach',
    summary: 'Detach tags from a document: {data: {tags: [label]}}; an unknown label is a 404. 200 with no content.',
    operation: `mutation DetachKnowledgeBaseTags($documentID: ID!, $tags: [String!]!) {
      detachKnowledgeBaseTags(documentID: $documentID, tags: $tags) { documentID }
    }`,
    params: z.object({ documentID: pathId('document') }),
    body: tagLabelsBody,
    variables: ({ params, body }) => ({ documentID: params.documentID, tags: body.data.tags }),
    status: 200,
  },
];

const kbRoutes: RestRoute[] = [
  {
    method: 'POST',
    path: '/v1/knowledge-base/docs/upload',
    summary:
      'Upload a document: multipart/form-data with `file` (.txt .md .html .pdf .docx .csv .json) and `metadata` (JSON text), or JSON {data: {type: "url", url, metadata}}. Query: overwrite, maxChunkSize (500-1500, default 1000), wait, environment (where its embedding tokens are charged).',
    operation: kbUploadOperations,
    operationName: ({ body }) => (isFileUpload(body) ? 'UploadKnowledgeBaseFile' : 'UploadKnowledgeBaseUrl'),
    query: kbUploadQuery,
    body: urlUploadBody,
    multipart: { body: fileUploadForm },
    variables: ({ body, query }: RestRequest<unknown, z.infer<typeof kbUploadQuery>, FileUpload | UrlUpload>) => {
      const common = {
        projectID: query.projectID ?? null,
        overwrite: query.overwrite,
        maxChunkSize: query.maxChunkSize,
        wait: query.wait,
        environment: query.environment ?? null,
        tags: query.tags,
      };
      if (isFileUpload(body)) return { ...common, file: asFile(body), metadata: body.metadata ?? {} };
      return { ...common, url: body.data.url, name: body.data.name ?? null, metadata: body.data.metadata ?? {} };
    },
    result: (data) => ({ data: [kbOriginalDocument(data.document)] }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/knowledge-base/docs/upload/table',
    summary:
      'Upload a table: {data: {name, schema: {searchableFields, metadataFields}, items}}, one chunk per row. Query: overwrite, wait, environment (where its embedding tokens are charged).',
    operation: `mutation UploadKnowledgeBaseTable($projectID: ID, $input: KnowledgeBaseTableInput!, $overwrite: Boolean, $wait: Boolean, $environment: String, $tags: [String!]) {
      document: uploadKnowledgeBaseTable(projectID: $projectID, input: $input, overwrite: $overwrite, wait: $wait, environment: $environment, tags: $tags) { ${kbDocumentFields} }
    }`,
    query: kbUploadQuery,
    body: tableUploadBody,
    variables: ({ body, query }) => ({
      projectID: query.projectID ?? null,
      input: body.data,
      overwrite: query.overwrite,
      wait: query.wait,
      environment: query.environment ?? null,
      tags: query.tags,
    }),
    result: (data) => ({ data: kbDocument(data.document) }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/knowledge-base/docs',
    summary:
      "A page of the project's documents, newest first: {total, data}. Query: page (from 1), limit (1-100, default 10), documentType, status (Parley addition).",
    operation: `query KnowledgeBaseDocuments($projectID: ID, $page: Int, $limit: Int, $type: KnowledgeBaseDocumentType, $status: KnowledgeBaseDocumentStatusType) {
      knowledgeBaseDocuments(projectID: $projectID, page: $page, limit: $limit, type: $type, status: $status) {
        total documents { ${kbDocumentFields} }
      }
    }`,
    query: z.object({
      ...kbProjectQuery,
      page: queryInt({ min: 1, default: 1 }),
      limit: queryInt({ min: 1, max: kbLimits.listLimit.max, default: kbLimits.listLimit.default }),
      documentType: queryOptionalEnum(kbDocumentTypes),
      status: queryOptionalEnum(kbDocumentStatuses),
    }),
    variables: ({ query }) => ({
      projectID: query.projectID ?? null,
      page: query.page,
      limit: query.limit,
      type: query.documentType ?? null,
      status: query.status ?? null,
    }),
    result: (data) => ({
      total: data.knowledgeBaseDocuments.total,
      data: data.knowledgeBaseDocuments.documents.map(kbOriginalDocument),
    }),
    status: 200,
  },
  {
    method: 'GET',
    path: '/v1/knowledge-base/docs/:documentID',
    summary:
      'A document and its chunks in order, as the original documents it: {data: [document], chunks: [{chunkID, content, position, tokens, metadata}]}.',
    operation: `query KnowledgeBaseDocument($documentID: ID!) {
      knowledgeBaseDocument(documentID: $documentID) { ${kbDocumentFields} chunks { chunkID content position tokens metadata } }
    }`,
    params: z.object({ documentID: pathId('document') }),
    variables: ({ params }) => ({ documentID: params.documentID }),
    result: (data) => {
      const { chunks, ...document } = data.knowledgeBaseDocument;
      return { data: [kbOriginalDocument(document)], chunks };
    },
    status: 200,
  },
  {
    method: 'PUT',
    path: '/v1/knowledge-base/docs/:documentID/upload',
    summary:
      'Replace a document\'s content, keeping its ID: multipart `file` (+ optional `metadata`) or JSON {data: {type: "url", url, metadata?}}. Query: maxChunkSize, wait (Parley addition).',
    operation: kbReplaceOperations,
    operationName: ({ body }) => (isFileUpload(body) ? 'ReplaceKnowledgeBaseFile' : 'ReplaceKnowledgeBaseUrl'),
    params: z.object({ documentID: pathId('document') }),
    query: z.object({
      maxChunkSize: queryInt({ min: kbLimits.chunkSize.min, max: kbLimits.chunkSize.max }),
      wait: queryBool(false),
      ...kbUnsupportedUploadOptions,
      tags: refusedReplaceTags,
    }),
    body: kbReplaceUrlBody,
    multipart: { body: fileUploadForm },
    variables: ({ params, body, query }) => {
      const common = { documentID: params.documentID, maxChunkSize: query.maxChunkSize ?? null, wait: query.wait };
      if (isFileUpload(body)) return { ...common, file: asFile(body), metadata: body.metadata ?? null };
      const data = (body as z.infer<typeof kbReplaceUrlBody>).data;
      return { ...common, url: data.url, metadata: data.metadata ?? null };
    },
    result: (data) => ({ data: [kbOriginalDocument(data.document)] }),
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/v1/knowledge-base/docs/:documentID',
    summary: "Replace a document's metadata, and at once its chunks': {data: {metadata}} (Parley addition).",
    operation: `mutation UpdateKnowledgeBaseDocumentMetadata($documentID: ID!, $metadata: JSONObject!) {
      document: updateKnowledgeBaseDocumentMetadata(documentID: $documentID, metadata: $metadata) { ${kbDocumentFields} }
    }`,
    params: z.object({ documentID: pathId('document') }),
    body: updateMetadataBody,
    variables: ({ params, body }) => ({ documentID: params.documentID, metadata: body.data.metadata }),
    result: (data) => ({ data: kbOriginalDocument(data.document) }),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v1/knowledge-base/docs/:documentID',
    summary:
      'Delete a document, its chunks and their index entries: 200 with no content, as the original documents it.',
    operation: `mutation DeleteKnowledgeBaseDocument($documentID: ID!) { deleteKnowledgeBaseDocument(documentID: $documentID) }`,
    params: z.object({ documentID: pathId('document') }),
    variables: ({ params }) => ({ documentID: params.documentID }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/knowledge-base/docs/upload/url',
    summary:
      'Upload a web page: {data: {type: "url", url, name?, metadata?}}. Query: overwrite, maxChunkSize, tags, wait, environment. Answers {data: [document]} as the original documents it.',
    operation: `mutation UploadKnowledgeBaseUrl($projectID: ID, $url: String!, $name: String, $metadata: JSONObject, $overwrite: Boolean, $maxChunkSize: Int, $wait: Boolean, $environment: String, $tags: [String!]) {
      document: uploadKnowledgeBaseUrl(projectID: $projectID, url: $url, name: $name, metadata: $metadata, overwrite: $overwrite, maxChunkSize: $maxChunkSize, wait: $wait, environment: $environment, tags: $tags) { ${kbDocumentFields} }
    }`,
    query: kbUploadQuery,
    body: urlDocumentBody,
    variables: ({ body, query }) => ({
      projectID: query.projectID ?? null,
      url: body.data.url,
      name: body.data.name ?? null,
      metadata: body.data.metadata ?? {},
      overwrite: query.overwrite,
      maxChunkSize: query.maxChunkSize,
      wait: query.wait,
      environment: query.environment ?? null,
      tags: query.tags,
    }),
    result: (data) => ({ data: [kbOriginalDocument(data.document)] }),
    status: 200,
  },
  {
    method: 'PUT',
    path: '/v1/knowledge-base/docs/:documentID/upload/url',
    summary:
      'Give a URL document a new URL (and name), fetched and indexed anew, keeping its ID: {data: {type: "url", url, name?, metadata?}}. Other documents: 400. Query: maxChunkSize, wait. Answers {data: [document]}.',
    operation: `mutation ReplaceKnowledgeBaseUrl($documentID: ID!, $url: String!, $name: String, $metadata: JSONObject, $maxChunkSize: Int, $wait: Boolean) {
      document: replaceKnowledgeBaseUrl(documentID: $documentID, url: $url, name: $name, metadata: $metadata, maxChunkSize: $maxChunkSize, wait: $wait) { ${kbDocumentFields} }
    }`,
    params: z.object({ documentID: pathId('document') }),
    query: z.object({
      maxChunkSize: queryInt({ min: kbLimits.chunkSize.min, max: kbLimits.chunkSize.max }),
      wait: queryBool(false),
      ...kbUnsupportedUploadOptions,
      tags: refusedReplaceTags,
    }),
    body: urlDocumentBody,
    variables: ({ params, body, query }) => ({
      documentID: params.documentID,
      url: body.data.url,
      name: body.data.name ?? null,
      metadata: body.data.metadata ?? null,
      maxChunkSize: query.maxChunkSize ?? null,
      wait: query.wait,
    }),
    result: (data) => ({ data: [kbOriginalDocument(data.document)] }),
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/v1/knowledge-base/docs/:documentID/chunk/:chunkID',
    summary:
      "Set metadata keys on one chunk: {data: {metadata}}, over the chunk's own and the document's; other chunks unchanged. Answers {data: document}.",
    operation: `mutation UpdateKnowledgeBaseChunkMetadata($documentID: ID!, $chunkID: ID!, $metadata: JSONObject!) {
      document: updateKnowledgeBaseChunkMetadata(documentID: $documentID, chunkID: $chunkID, metadata: $metadata) { ${kbDocumentFields} }
    }`,
    params: z.object({
      documentID: pathId('document'),
      chunkID: pathString,
    }),
    body: chunkMetadataBody,
    variables: ({ params, body }) => ({
      documentID: params.documentID,
      chunkID: params.chunkID,
      metadata: body.data.metadata,
    }),
    result: (data) => ({ data: kbOriginalDocument(data.document) }),
    status: 200,
  },
  kbQueryRoute(
    '/v1/knowledge-base/query',
    'Query the knowledge base: {question, chunkLimit (1-10, default 2), synthesis (default true), settings {model, temperature, system}, filters, tags {include, exclude, includeAllTagged, includeAllNonTagged}}.',
  ),
  kbQueryRoute('/knowledge-base/query', 'The same query at the path older clients use.'),
];

export const routes: readonly RestRoute[] = [
  ...accountRoutes,
  ...usageRoutes,
  ...runtimeRoutes,
  ...dialogManagerRoutes,
  ...transcriptRoutes,
  ...kbRoutes,
  ...kbTagRoutes,
];
