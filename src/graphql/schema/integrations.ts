import { idSchema } from '../../admin/validation';
import { actorOf } from '../../auth/principal';
import {
  createIntegration,
  deleteIntegration,
  type IntegrationRow,
  integrationHeadersSchema,
  integrationNameSchema,
  integrationUrlSchema,
  listIntegrations,
  updateIntegration,
} from '../../runtime/integrations';
import { requireProject } from '../access';
import { builder } from '../builder';

/**
 * Integrations: MCP servers a project registers for agent steps (docs/agent-step.md). Their
 * headers may hold credentials, so every field here needs `admin`.
 */

const IntegrationType = builder.objectRef<IntegrationRow>('Integration').implement({
  description: 'An MCP server (Streamable HTTP) whose tools agent steps may call.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectID: t.exposeID('projectId'),
    name: t.exposeString('name', { description: 'What agent steps name it by: `{type: "mcp", integration: name}`.' }),
    url: t.exposeString('url'),
    headers: t.field({
      type: 'JSONObject',
      description: 'Sent with every request to the server (credentials included); readable with `admin` only.',
      resolve: (i) => i.headers,
    }),
    headerNames: t.stringList({ resolve: (i) => Object.keys(i.headers) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const CreateIntegrationInput = builder.inputType('CreateIntegrationInput', {
  fields: (t) => ({
    projectID: t.id({ required: true }),
    name: t.string({ required: true, validate: integrationNameSchema }),
    url: t.string({ required: true, validate: integrationUrlSchema }),
    headers: t.field({ type: 'JSONObject', validate: integrationHeadersSchema }),
  }),
});

const UpdateIntegrationInput = builder.inputType('UpdateIntegrationInput', {
  description: 'Members left out keep their value; `headers` replaces all headers.',
  fields: (t) => ({
    name: t.string({ validate: integrationNameSchema }),
    url: t.string({ validate: integrationUrlSchema }),
    headers: t.field({ type: 'JSONObject', validate: integrationHeadersSchema }),
  }),
});

builder.queryFields((t) => ({
  integrations: t.field({
    type: [IntegrationType],
    description: "The project's MCP servers, by name.",
    authScopes: { scope: 'admin' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return listIntegrations(ctx.services, project.id);
    },
  }),
}));

builder.mutationFields((t) => ({
  createIntegration: t.field({
    type: IntegrationType,
    description: 'Registers an MCP server; audited as `integration.create` (header names only).',
    authScopes: { scope: 'admin' },
    args: { input: t.arg({ type: CreateIntegrationInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const project = await requireProject(ctx, String(input.projectID));
      return createIntegration(ctx.services, {
        projectId: project.id,
        name: input.name,
        url: input.url,
        headers: (input.headers ?? {}) as Record<string, string>,
        actor: actorOf(ctx.principal),
      });
    },
  }),
  updateIntegration: t.field({
    type: IntegrationType,
    description: 'Changes an MCP server; audited as `integration.update`.',
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      id: t.arg.id({ required: true, validate: idSchema }),
      input: t.arg({ type: UpdateIntegrationInput, required: true }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return updateIntegration(ctx.services, {
        id: String(args.id),
        projectId: project.id,
        name: args.input.name ?? undefined,
        url: args.input.url ?? undefined,
        headers: (args.input.headers ?? undefined) as Record<string, string> | undefined,
        actor: actorOf(ctx.principal),
      });
    },
  }),
  deleteIntegration: t.field({
    type: IntegrationType,
    description: 'Removes an MCP server; agent steps that name it leave it out. Audited as `integration.delete`.',
    authScopes: { scope: 'admin' },
    args: { projectID: t.arg.id({ required: true }), id: t.arg.id({ required: true, validate: idSchema }) },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return deleteIntegration(ctx.services, {
        id: String(args.id),
        projectId: project.id,
        actor: actorOf(ctx.principal),
      });
    },
  }),
}));
