import { z } from 'zod';
import { environmentAliasSchema, idSchema } from '../admin/validation';
import { usageEventsBodySchema, usageQueryBodySchema } from '../analytics/validation';
import {
  actionSchema,
  environmentRefSchema,
  requestConfigSchema,
  requestVariablesSchema,
  sessionIdSchema,
  stateSchema,
  userIdSchema,
} from '../runtime/validation';
import type { RestRequest, RestRoute } from './adapter';
import { pathId, queryBool } from './params';
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

const interactBody = z.strictObject({
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
    body: z.strictObject({
      action: actionSchema,
      session: z.strictObject({ userID: userIdSchema, sessionID: sessionIdSchema }),
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
    path: '/v1/usage/events',
    summary: 'Ingest up to 1,000 usage events, all or nothing; needs the analytics:write scope (Parley addition).',
    operation: `mutation RecordUsageEvents($events: [UsageEventInput!]!) {
      recordUsageEvents(events: $events) { recorded duplicates }
    }`,
    body: usageEventsBodySchema,
    variables: ({ body }) => ({ events: body.events }),
    result: (data) => data.recordUsageEvents,
    status: 201,
  },
];

export const routes: readonly RestRoute[] = [...accountRoutes, ...usageRoutes, ...runtimeRoutes];
