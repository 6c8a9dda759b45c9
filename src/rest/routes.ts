import { z } from 'zod';
import { environmentAliasSchema, idSchema } from '../admin/validation';
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

export const routes: readonly RestRoute[] = [...accountRoutes];
