import { type ResolveCursorConnectionArgs, resolveCursorConnection } from '@pothos/plugin-relay';
import { createApiKey, createEnvironment, createProject, revokeApiKey, rotateApiKey } from '../../admin/service';
import {
  environmentAliasSchema,
  graceSecondsSchema,
  idSchema,
  projectNameSchema,
  scopesSchema,
} from '../../admin/validation';
import { scopes as allScopes, defaultKeyScopes, parseScopes, type Scope } from '../../auth/keys';
import { actorOf, hasScope } from '../../auth/principal';
import { AppError } from '../../lib/errors';
import type { AuditEventPayload } from '../../lib/pubsub';
import { requireApiKey, requireProject, requireWorkspace, requireWorkspaceFilter } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';

const scopeList = allScopes.join(', ');

export const WorkspaceType = builder.prismaObject('Workspace', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const ProjectType = builder.prismaObject('Project', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    workspaceID: t.exposeID('workspaceId'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    environments: t.relation('environments', { query: { orderBy: { createdAt: 'asc' } } }),
  }),
});

export const EnvironmentType = builder.prismaObject('Environment', {
  fields: (t) => ({
    id: t.exposeID('id'),
    alias: t.exposeString('alias', { description: "The environment's name; accepted wherever its ID is." }),
    projectID: t.exposeID('projectId'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const ApiKeyType = builder.prismaObject('ApiKey', {
  description: 'An API key. Its secret is shown once, when it is created, and never stored.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The key ID: the middle part of ak.<keyID>.<secret>.' }),
    name: t.exposeString('name', { nullable: true }),
    workspaceID: t.exposeID('workspaceId'),
    projectID: t.exposeID('projectId', { nullable: true, description: 'Null for a workspace key.' }),
    scopes: t.stringList({ description: `Among: ${scopeList}.`, resolve: (key) => parseScopes(key.scopes) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      nullable: true,
      description: 'Set on a rotated key, which works as the secondary key until then.',
    }),
    rotatedFromID: t.exposeID('rotatedFromId', { nullable: true }),
  }),
});

export const AuditEventType = builder.objectRef<AuditEventPayload>('AuditEvent').implement({
  description: 'An entry of the admin audit log: who created, rotated or revoked what.',
  fields: (t) => ({
    id: t.exposeID('id'),
    workspaceID: t.exposeID('workspaceId'),
    actor: t.exposeString('actor', { description: 'Who acted: operator, cli, or key:<keyID>.' }),
    action: t.exposeString('action', { description: 'For example project.create, key.rotate.' }),
    targetType: t.exposeString('targetType'),
    targetID: t.exposeID('targetId'),
    data: t.expose('data', { type: 'JSON', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

interface ViewerShape {
  kind: 'operator' | 'key';
  keyID: string | null;
  workspaceID: string | null;
  projectID: string | null;
  scopes: Scope[];
}

const ViewerType = builder.objectRef<ViewerShape>('Viewer').implement({
  description: 'The caller, as identified by its Authorization header.',
  fields: (t) => ({
    kind: t.exposeString('kind', { description: '"key" or "operator".' }),
    keyID: t.exposeID('keyID', { nullable: true }),
    workspaceID: t.exposeID('workspaceID', { nullable: true }),
    projectID: t.exposeID('projectID', { nullable: true }),
    scopes: t.stringList({ resolve: (v) => v.scopes }),
  }),
});

builder.queryField('viewer', (t) =>
  t.field({
    type: ViewerType,
    authScopes: { authenticated: true },
    resolve: (_root, _args, ctx): ViewerShape => {
      const p = ctx.principal;
      if (p.kind === 'key') {
        return {
          kind: 'key',
          keyID: p.keyId,
          workspaceID: p.workspaceId,
          projectID: p.projectId,
          scopes: [...p.scopes].sort(),
        };
      }
      return { kind: 'operator', keyID: null, workspaceID: null, projectID: null, scopes: [...allScopes] };
    },
  }),
);

builder.queryFields((t) => ({
  projects: t.prismaField({
    type: [ProjectType],
    description: 'The projects the caller reaches, oldest first.',
    authScopes: { authenticated: true },
    args: { workspaceID: t.arg.id({ validate: idSchema }) },
    resolve: (query, _root, args, ctx) => {
      const p = ctx.principal;
      const workspaceId = requireWorkspaceFilter(ctx, args.workspaceID ? String(args.workspaceID) : null);
      const where =
        p.kind === 'operator'
          ? workspaceId
            ? { workspaceId }
            : {}
          : p.kind === 'key'
            ? p.projectId
              ? { id: p.projectId }
              : { workspaceId: p.workspaceId }
            : { id: '' };
      return ctx.services.db.prisma.project.findMany({ ...query, where, orderBy: { id: 'asc' } });
    },
  }),
  project: t.prismaField({
    type: ProjectType,
    authScopes: { authenticated: true },
    args: { id: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      await requireProject(ctx, String(args.id));
      return ctx.services.db.prisma.project.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  environments: t.prismaField({
    type: [EnvironmentType],
    authScopes: { authenticated: true },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return ctx.services.db.prisma.environment.findMany({
        ...query,
        where: { projectId: project.id },
        orderBy: { createdAt: 'asc' },
      });
    },
  }),
  apiKeys: t.prismaField({
    type: [ApiKeyType],
    description: "Keys of a project (with projectID) or a workspace's keys and its projects' keys (with workspaceID).",
    authScopes: { scope: 'admin' },
    args: { projectID: t.arg.id(), workspaceID: t.arg.id() },
    resolve: async (query, _root, args, ctx) => {
      if (args.projectID) {
        const project = await requireProject(ctx, String(args.projectID));
        return ctx.services.db.prisma.apiKey.findMany({
          ...query,
          where: { projectId: project.id },
          orderBy: { id: 'asc' },
        });
      }
      const workspaceId = requireWorkspace(ctx, args.workspaceID ? String(args.workspaceID) : null);
      return ctx.services.db.prisma.apiKey.findMany({ ...query, where: { workspaceId }, orderBy: { id: 'asc' } });
    },
  }),
  auditEvents: t.connection({
    type: AuditEventType,
    description: 'The audit log of a workspace, newest first.',
    authScopes: { scope: 'admin' },
    args: { workspaceID: t.arg.id() },
    resolve: (_root, args, ctx) => {
      const workspaceId = requireWorkspace(ctx, args.workspaceID ? String(args.workspaceID) : null);
      return resolveCursorConnection(
        { args, toCursor: (e: AuditEventPayload) => e.id, defaultSize: 20, maxSize: 100 },
        async ({ before, after, limit, inverted }: ResolveCursorConnectionArgs) => {
          const rows = await ctx.services.db.prisma.auditEvent.findMany({
            where: {
              workspaceId,
              id: before ? { gt: before } : after ? { lt: after } : undefined,
            },
            orderBy: { id: inverted ? 'asc' : 'desc' },
            take: limit,
          });
          return rows.map((r) => ({ ...r, data: r.data ?? null, createdAt: r.createdAt.toISOString() }));
        },
      );
    },
  }),
}));

/** A caller may hand out only scopes it holds itself. */
function checkGrantable(ctx: Context, requested: readonly Scope[]): void {
  const missing = requested.filter((s) => !hasScope(ctx.principal, s));
  if (missing.length) {
    throw new AppError('INSUFFICIENT_SCOPE', `A key cannot grant scopes it lacks: ${missing.join(', ')}`);
  }
}

const adminDeps = (ctx: Context) => ({
  db: ctx.services.db,
  pubsub: ctx.services.pubsub,
  onKeyInvalidated: (id: string) => ctx.services.auth.invalidate(id),
});

const CreateProjectInput = builder.inputType('CreateProjectInput', {
  fields: (t) => ({
    name: t.string({ required: true, validate: projectNameSchema }),
    workspaceID: t.id({
      description:
        'The workspace to hold the project; without it the operator creates a new workspace of the same name.',
      validate: idSchema,
    }),
    createKey: t.boolean({ defaultValue: true, description: "Also create the project's first API key." }),
    keyScopes: t.stringList({ validate: scopesSchema, description: `Scopes of that key, among: ${scopeList}.` }),
  }),
});

const CreateProjectPayload = builder
  .objectRef<{ projectId: string; apiKey: string | null; keyId: string | null }>('CreateProjectPayload')
  .implement({
    fields: (t) => ({
      project: t.prismaField({
        type: ProjectType,
        resolve: (query, parent, _args, ctx) =>
          ctx.services.db.prisma.project.findUniqueOrThrow({ ...query, where: { id: parent.projectId } }),
      }),
      apiKey: t.exposeString('apiKey', { nullable: true, description: 'The new key, shown this once.' }),
      key: t.prismaField({
        type: ApiKeyType,
        nullable: true,
        resolve: (query, parent, _args, ctx) =>
          parent.keyId ? ctx.services.db.prisma.apiKey.findUnique({ ...query, where: { id: parent.keyId } }) : null,
      }),
    }),
  });

const CreateApiKeyPayload = builder
  .objectRef<{ apiKey: string; keyId: string; previousKeyId?: string }>('CreateApiKeyPayload')
  .implement({
    fields: (t) => ({
      apiKey: t.exposeString('apiKey', { description: 'The whole key, shown this once.' }),
      key: t.prismaField({
        type: ApiKeyType,
        resolve: (query, parent, _args, ctx) =>
          ctx.services.db.prisma.apiKey.findUniqueOrThrow({ ...query, where: { id: parent.keyId } }),
      }),
      previous: t.prismaField({
        type: ApiKeyType,
        nullable: true,
        description: 'On rotation: the replaced key, now the secondary key until its expiresAt.',
        resolve: (query, parent, _args, ctx) =>
          parent.previousKeyId
            ? ctx.services.db.prisma.apiKey.findUnique({ ...query, where: { id: parent.previousKeyId } })
            : null,
      }),
    }),
  });

const CreateApiKeyInput = builder.inputType('CreateApiKeyInput', {
  fields: (t) => ({
    projectID: t.id({ description: 'A project key for this project.', validate: idSchema }),
    workspaceID: t.id({ description: 'A workspace key, reaching every project of the workspace.', validate: idSchema }),
    scopes: t.stringList({
      validate: scopesSchema,
      description: `Among: ${scopeList}. Default: every scope but admin, analytics:write and transcripts:read-unredacted.`,
    }),
    name: t.string({ validate: projectNameSchema }),
  }),
});

builder.mutationFields((t) => ({
  createProject: t.field({
    type: CreateProjectPayload,
    authScopes: { scope: 'admin' },
    args: { input: t.arg({ type: CreateProjectInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = ctx.principal;
      let workspaceId = input.workspaceID ? String(input.workspaceID) : null;
      if (p.kind === 'key') {
        if (p.projectId)
          throw new AppError('INSUFFICIENT_SCOPE', 'A project key cannot create projects; use a workspace key.');
        workspaceId = requireWorkspace(ctx, workspaceId);
      }
      const keyScopes = (input.keyScopes as Scope[] | null | undefined) ?? undefined;
      if (keyScopes) checkGrantable(ctx, keyScopes);
      const created = await createProject(adminDeps(ctx), {
        name: input.name,
        workspaceId,
        actor: actorOf(p),
        key: input.createKey === false ? null : { scopes: keyScopes },
      });
      return {
        projectId: created.project.id,
        apiKey: created.created?.apiKey ?? null,
        keyId: created.created?.key.id ?? null,
      };
    },
  }),
  createApiKey: t.field({
    type: CreateApiKeyPayload,
    authScopes: { scope: 'admin' },
    args: { input: t.arg({ type: CreateApiKeyInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      if (Boolean(input.projectID) === Boolean(input.workspaceID)) {
        throw new AppError(
          'VALIDATION_FAILED',
          'Give exactly one of projectID (a project key) or workspaceID (a workspace key)',
        );
      }
      let workspaceId: string;
      let projectId: string | null = null;
      if (input.projectID) {
        const project = await requireProject(ctx, String(input.projectID));
        workspaceId = project.workspaceId;
        projectId = project.id;
      } else {
        workspaceId = requireWorkspace(ctx, String(input.workspaceID));
      }
      const scopes = (input.scopes as Scope[] | null | undefined) ?? undefined;
      checkGrantable(ctx, scopes ?? defaultKeyScopes);
      const created = await createApiKey(adminDeps(ctx), {
        workspaceId,
        projectId,
        scopes,
        name: input.name ?? null,
        actor: actorOf(ctx.principal),
      });
      return { apiKey: created.apiKey, keyId: created.key.id };
    },
  }),
  revokeApiKey: t.prismaField({
    type: ApiKeyType,
    authScopes: { scope: 'admin' },
    args: { id: t.arg.id({ required: true, validate: idSchema }) },
    resolve: async (query, _root, args, ctx) => {
      await requireApiKey(ctx, String(args.id));
      await revokeApiKey(adminDeps(ctx), { keyId: String(args.id), actor: actorOf(ctx.principal) });
      return ctx.services.db.prisma.apiKey.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  rotateApiKey: t.field({
    type: CreateApiKeyPayload,
    description: 'Replaces a key; the old one keeps working for graceSeconds (default one day; 0 revokes it now).',
    authScopes: { scope: 'admin' },
    args: {
      id: t.arg.id({ required: true, validate: idSchema }),
      graceSeconds: t.arg.int({ defaultValue: 86_400, validate: graceSecondsSchema }),
    },
    resolve: async (_root, args, ctx) => {
      await requireApiKey(ctx, String(args.id));
      const { created, previous } = await rotateApiKey(adminDeps(ctx), {
        keyId: String(args.id),
        graceSeconds: args.graceSeconds ?? 86_400,
        actor: actorOf(ctx.principal),
      });
      return { apiKey: created.apiKey, keyId: created.key.id, previousKeyId: previous.id };
    },
  }),
  createEnvironment: t.prismaField({
    type: EnvironmentType,
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      alias: t.arg.string({ required: true, validate: environmentAliasSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const env = await createEnvironment(adminDeps(ctx), {
        projectId: project.id,
        alias: args.alias,
        actor: actorOf(ctx.principal),
      });
      return ctx.services.db.prisma.environment.findUniqueOrThrow({ ...query, where: { id: env.id } });
    },
  }),
}));

builder.subscriptionField('auditEvents', (t) =>
  t.field({
    type: AuditEventType,
    description:
      'Audit events as they happen: of one workspace, or (for the operator, without workspaceID) of every workspace.',
    authScopes: { scope: 'admin' },
    args: { workspaceID: t.arg.id() },
    subscribe: (_root, args, ctx) => {
      if (ctx.principal.kind === 'operator' && !args.workspaceID) {
        return ctx.services.pubsub.subscribe('auditEventAll');
      }
      const workspaceId = requireWorkspace(ctx, args.workspaceID ? String(args.workspaceID) : null);
      return ctx.services.pubsub.subscribe('auditEvent', workspaceId);
    },
    resolve: (event) => event,
  }),
);
