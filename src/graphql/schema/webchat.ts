import { z } from 'zod';
import { resolveEnvironment } from '../../admin/environments';
import { environmentRefSchema } from '../../runtime/validation';
import { countFeedback } from '../../webchat/conversation';
import {
  getWebChatSettings,
  updateWebChatSettings,
  type WebChatSettings,
  type WebChatSettingsInput,
  webChatSettingsInputSchema,
} from '../../webchat/settings';
import { requireProject } from '../access';
import { builder } from '../builder';

/** Web chat: the official widget's settings per project and environment (docs/web-chat.md). */

const WebChatSettingsType = builder.objectRef<WebChatSettings>('WebChatSettings').implement({
  description: "The web chat widget's settings of one environment. Off (and unreachable) until `enabled`.",
  fields: (t) => ({
    projectID: t.exposeID('projectId'),
    environmentID: t.exposeID('environmentId'),
    environment: t.exposeString('environmentAlias'),
    enabled: t.exposeBoolean('enabled'),
    allowedOrigins: t.exposeStringList('allowedOrigins', {
      description: 'Browser origins (scheme://host[:port]) the public widget routes answer (CORS).',
    }),
    title: t.exposeString('title'),
    description: t.exposeString('description'),
    primaryColor: t.exposeString('primaryColor'),
    avatarImage: t.exposeString('avatarImage', { nullable: true, description: "Null: Parley's own image." }),
    launcherImage: t.exposeString('launcherImage', { nullable: true, description: "Null: Parley's own image." }),
    position: t.exposeString('position', { description: 'left | right' }),
    persistence: t.exposeString('persistence', { description: 'localStorage | sessionStorage | memory' }),
    feedback: t.exposeBoolean('feedback', { description: 'Thumbs up/down under agent messages.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', nullable: true, description: 'Null: never set.' }),
  }),
});

const WebChatSettingsInputType = builder.inputType('WebChatSettingsInput', {
  description: 'Fields to change; those left out keep their value.',
  fields: (t) => ({
    enabled: t.boolean(),
    allowedOrigins: t.stringList(),
    title: t.string(),
    description: t.string(),
    primaryColor: t.string(),
    avatarImage: t.string(),
    launcherImage: t.string(),
    position: t.string(),
    persistence: t.string(),
    feedback: t.boolean(),
  }),
});

/** GraphQL nulls mean "leave as is" except for the images, where null means "Parley's own". */
const inputSchema = z.preprocess((raw) => {
  if (!raw || typeof raw !== 'object') return raw;
  return Object.fromEntries(
    Object.entries(raw as Record<string, unknown>).filter(
      ([key, value]) => value !== null || key === 'avatarImage' || key === 'launcherImage',
    ),
  );
}, webChatSettingsInputSchema);

builder.queryFields((t) => ({
  webChatSettings: t.field({
    type: WebChatSettingsType,
    description: "An environment's web chat settings (the defaults, off, when never set).",
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      environment: t.arg.string({ defaultValue: 'development', validate: environmentRefSchema }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return getWebChatSettings(ctx.services.db.prisma, project.id, args.environment);
    },
  }),
}));

const WebChatFeedbackCountsType = builder
  .objectRef<{ positive: number; negative: number; total: number }>('WebChatFeedbackCounts')
  .implement({
    description: "Thumbs up/down ratings users gave the agent's answers in the web chat widget.",
    fields: (t) => ({
      positive: t.exposeInt('positive'),
      negative: t.exposeInt('negative'),
      total: t.exposeInt('total'),
    }),
  });

builder.queryFields((t) => ({
  webChatFeedback: t.field({
    type: WebChatFeedbackCountsType,
    description:
      "Counts of the current thumbs up/down ratings (one per rated turn; a changed vote counts once, as it is now) given or changed in [startTime, endTime), in one environment or all of the project's.",
    authScopes: { scope: 'analytics:read' },
    args: {
      projectID: t.arg.id({ required: true }),
      environment: t.arg.string({ required: false, validate: environmentRefSchema.optional() }),
      startTime: t.arg({ type: 'DateTime', required: false }),
      endTime: t.arg({ type: 'DateTime', required: false }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const environment = args.environment
        ? await resolveEnvironment(ctx.services.db.prisma, project.id, args.environment)
        : null;
      return countFeedback(ctx.services.db.prisma, {
        projectId: project.id,
        environmentId: environment?.id ?? null,
        from: args.startTime ?? null,
        to: args.endTime ?? null,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  updateWebChatSettings: t.field({
    type: WebChatSettingsType,
    description: "Changes an environment's web chat settings: turn it on, allow origins, set the look.",
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      environment: t.arg.string({ defaultValue: 'development', validate: environmentRefSchema }),
      input: t.arg({ type: WebChatSettingsInputType, required: true, validate: inputSchema }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return updateWebChatSettings(
        ctx.services.db.prisma,
        project.id,
        args.environment,
        inputSchema.parse(args.input) as WebChatSettingsInput,
      );
    },
  }),
}));
