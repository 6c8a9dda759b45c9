import { z } from 'zod';
import { environmentAliasSchema, idSchema } from '../admin/validation';
import { usageEventsBodySchema, usageQueryBodySchema } from '../analytics/validation';
import type { RestRoute } from './adapter';
import { pathId } from './params';

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

export const routes: readonly RestRoute[] = [...accountRoutes, ...usageRoutes];
