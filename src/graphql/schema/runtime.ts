import { idSchema } from '../../admin/validation';
import { actorOf } from '../../auth/principal';
import type { TurnEvent, TurnRequest } from '../../runtime/service';
import type { OutputTrace } from '../../runtime/trace-format';
import type { TurnRecord } from '../../runtime/turn-record';
import type { RuntimeAction, RuntimeState } from '../../runtime/types';
import {
  actionSchema,
  environmentRefSchema,
  type RequestConfig,
  requestConfigSchema,
  requestVariablesSchema,
  sessionIdSchema,
  stateSchema,
  userIdSchema,
} from '../../runtime/validation';
import { requireOwned, requireProject } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';
import { EnvironmentType } from './admin';

/**
 * Runtime: agents and their versions, publishing and deploying, the `interact` subscription (the
 * streams of SPEC.md run it through the REST adapter) and mutation, and user state. Resolvers
 * only check access and call `ctx.services.runtime`.
 */

export const AgentType = builder.prismaObject('Agent', {
  description: 'An agent of a project: a name and its published versions.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectID: t.exposeID('projectId'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    project: t.relation('project'),
    versions: t.relation('versions', {
      description: 'Newest first.',
      query: { orderBy: { number: 'desc' } },
    }),
  }),
});

export const AgentVersionType = builder.prismaObject('AgentVersion', {
  description: 'A published agent program. Versions never change; environments point at one.',
  fields: (t) => ({
    id: t.exposeID('id'),
    agentID: t.exposeID('agentId'),
    number: t.exposeInt('number', { description: '1, 2, 3, … per agent.' }),
    program: t.field({
      type: 'JSONObject',
      description: 'The program (docs/agent-program.schema.json).',
      resolve: (v) => v.program as Record<string, unknown>,
    }),
    checksum: t.exposeString('checksum', { description: 'SHA-256 of the program’s canonical JSON.' }),
    createdBy: t.exposeString('createdBy'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    agent: t.relation('agent'),
    deployments: t.relation('deployments', { description: 'The environments running this version.' }),
  }),
});

export const AgentDeploymentType = builder.prismaObject('AgentDeployment', {
  description: 'Which agent version an environment runs.',
  fields: (t) => ({
    environment: t.relation('environment'),
    version: t.relation('agentVersion'),
    deployedBy: t.exposeString('deployedBy'),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

interface ProblemShape {
  severity: 'error' | 'warning';
  path: string;
  message: string;
}

const ProgramProblemType = builder.objectRef<ProblemShape>('AgentProgramProblem').implement({
  description: 'A problem of an agent program, at its JSON path.',
  fields: (t) => ({
    severity: t.exposeString('severity', { description: '"error" (the program is refused) or "warning".' }),
    path: t.exposeString('path', { description: 'Dotted JSON path, e.g. flows.0.steps.2.next.' }),
    message: t.exposeString('message'),
  }),
});

const AgentProgramCheckType = builder
  .objectRef<{ errors: ProblemShape[]; warnings: ProblemShape[] }>('AgentProgramCheck')
  .implement({
    fields: (t) => ({
      valid: t.boolean({ resolve: (c) => c.errors.length === 0 }),
      errors: t.field({ type: [ProgramProblemType], resolve: (c) => c.errors }),
      warnings: t.field({ type: [ProgramProblemType], resolve: (c) => c.warnings }),
    }),
  });

interface PublishShape {
  agentId: string;
  versionId: string;
  environmentId: string;
  created: boolean;
  warnings: ProblemShape[];
}

const PublishAgentPayload = builder.objectRef<PublishShape>('PublishAgentPayload').implement({
  fields: (t) => ({
    agent: t.prismaField({
      type: AgentType,
      resolve: (query, parent, _args, ctx) =>
        ctx.services.db.prisma.agent.findUniqueOrThrow({ ...query, where: { id: parent.agentId } }),
    }),
    version: t.prismaField({
      type: AgentVersionType,
      resolve: (query, parent, _args, ctx) =>
        ctx.services.db.prisma.agentVersion.findUniqueOrThrow({ ...query, where: { id: parent.versionId } }),
    }),
    environment: t.prismaField({
      type: EnvironmentType,
      resolve: (query, parent, _args, ctx) =>
        ctx.services.db.prisma.environment.findUniqueOrThrow({ ...query, where: { id: parent.environmentId } }),
    }),
    created: t.exposeBoolean('created', {
      description: 'False when the program equals the agent’s latest version, which was reused.',
    }),
    warnings: t.field({ type: [ProgramProblemType], resolve: (p) => p.warnings }),
  }),
});

const PublishAgentInput = builder.inputType('PublishAgentInput', {
  fields: (t) => ({
    projectID: t.id({ required: true, validate: idSchema }),
    program: t.field({ type: 'JSONObject', required: true, description: 'An agent program (docs/runtime.md).' }),
    environment: t.string({
      defaultValue: 'development',
      validate: environmentRefSchema,
      description: 'The environment (ID or alias) to run the new version.',
    }),
  }),
});

const InteractRequestInput = builder.inputType('InteractRequestInput', {
  description: 'A turn’s request: the action and what may come with it (RUNTIME-NOTES.md "Actions").',
  fields: (t) => ({
    action: t.field({
      type: 'JSONObject',
      required: true,
      validate: actionSchema,
      description: '{type, payload}: launch, text, intent, event, no-reply, or a button’s request.',
    }),
    variables: t.field({
      type: 'JSONObject',
      validate: requestVariablesSchema,
      description: 'Merged into the user’s variables before the turn.',
    }),
    sessionID: t.string({
      validate: sessionIdSchema,
      description: 'The conversation session; without it, a launch starts a new one and other turns continue the last.',
    }),
    config: t.field({
      type: 'JSONObject',
      validate: requestConfigSchema,
      description: '{excludeTypes, stopTypes, stopAll}; other members are ignored.',
    }),
  }),
});

const InteractFormat = builder.enumType('InteractFormat', {
  description: 'How traces are shaped: the runtime v2 stream’s, or the beta stream’s.',
  values: {
    V2: { description: '{type, payload, time}; model answers as one text trace, or completion traces.' },
    BETA: { description: '{type, payload}; model answers as completion-start/continue/end.' },
  } as const,
});

interface InteractEventShape {
  event: string;
  turnID: string;
  trace: OutputTrace | null;
  state: RuntimeState | null;
  outcome: string | null;
}

const InteractEventType = builder.objectRef<InteractEventShape>('InteractEvent').implement({
  description: 'One event of a turn: a trace as its step runs, the state (when asked), then the end.',
  fields: (t) => ({
    event: t.exposeString('event', { description: '"trace", "state" or "end".' }),
    turnID: t.exposeID('turnID'),
    trace: t.field({ type: 'JSONObject', nullable: true, resolve: (e) => e.trace as Record<string, unknown> | null }),
    state: t.field({ type: 'JSONObject', nullable: true, resolve: (e) => e.state as Record<string, unknown> | null }),
    outcome: t.exposeString('outcome', {
      nullable: true,
      description: 'On end: completed, failed, timeout or step-limit.',
    }),
  }),
});

const InteractResultType = builder
  .objectRef<{ turnID: string; traces: OutputTrace[]; outcome: string }>('InteractResult')
  .implement({
    fields: (t) => ({
      turnID: t.exposeID('turnID'),
      traces: t.field({
        type: ['JSONObject'],
        resolve: (r) => r.traces as unknown as Record<string, unknown>[],
      }),
      outcome: t.exposeString('outcome', { description: 'completed, failed, timeout or step-limit.' }),
    }),
  });

function toEventShape(e: TurnEvent): InteractEventShape {
  return {
    event: e.event,
    turnID: e.turnId,
    trace: e.event === 'trace' ? e.trace : null,
    state: e.event === 'state' ? e.state : null,
    outcome: e.event === 'end' ? e.outcome : null,
  };
}

interface InteractRequestValue {
  action: Record<string, unknown>;
  variables?: Record<string, unknown> | null;
  sessionID?: string | null;
  config?: Record<string, unknown> | null;
}

function turnRequest(
  args: { projectID: string; userID: string; environment: string },
  request: InteractRequestValue,
  extra: Pick<TurnRequest, 'profile' | 'includeState'>,
): TurnRequest {
  return {
    projectId: args.projectID,
    environment: args.environment,
    userId: args.userID,
    action: request.action as unknown as RuntimeAction,
    variables: request.variables ?? null,
    sessionId: request.sessionID ?? null,
    config: (request.config as RequestConfig | null | undefined) ?? null,
    ...extra,
  };
}

const stateArgs = builder.args((t) => ({
  projectID: t.id({ required: true }),
  userID: t.string({ required: true, validate: userIdSchema }),
  environment: t.string({ defaultValue: 'development', validate: environmentRefSchema }),
}));

async function stateRef(
  ctx: Context,
  args: { projectID: string | number; userID: string; environment?: string | null },
) {
  const project = await requireProject(ctx, String(args.projectID));
  return { projectId: project.id, environment: args.environment ?? 'development', userId: args.userID };
}

builder.queryFields((t) => ({
  agents: t.prismaField({
    type: [AgentType],
    description: "A project's agents, by name.",
    authScopes: { scope: 'admin' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return ctx.services.db.prisma.agent.findMany({
        ...query,
        where: { projectId: project.id },
        orderBy: { name: 'asc' },
      });
    },
  }),
  agentVersion: t.prismaField({
    type: AgentVersionType,
    authScopes: { scope: 'admin' },
    args: { id: t.arg.id({ required: true, validate: idSchema }) },
    resolve: async (query, _root, args, ctx) => {
      await requireOwned(ctx, 'Agent version', String(args.id));
      return ctx.services.db.prisma.agentVersion.findUniqueOrThrow({ ...query, where: { id: String(args.id) } });
    },
  }),
  agentDeployments: t.prismaField({
    type: [AgentDeploymentType],
    description: 'Which version each environment of a project runs.',
    authScopes: { scope: 'admin' },
    args: { projectID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      return ctx.services.db.prisma.agentDeployment.findMany({
        ...query,
        where: { environment: { projectId: project.id } },
        orderBy: { environmentId: 'asc' },
      });
    },
  }),
  validateAgentProgram: t.field({
    type: AgentProgramCheckType,
    description: 'Checks a program without publishing it: every error and warning.',
    authScopes: { scope: 'admin' },
    args: { program: t.arg({ type: 'JSONObject', required: true }) },
    resolve: async (_root, args, ctx) => {
      const check = await ctx.services.runtime.validate(args.program);
      return { errors: check.errors, warnings: check.warnings };
    },
  }),
  runtimeState: t.field({
    type: 'JSONObject',
    description: "A user's conversation state: {stack, storage, variables}. 404 when the user has none.",
    authScopes: { scope: 'runtime:interact' },
    args: stateArgs,
    resolve: async (_root, args, ctx) =>
      (await ctx.services.runtime.getState(await stateRef(ctx, args))) as unknown as Record<string, unknown>,
  }),
}));

builder.mutationFields((t) => ({
  publishAgent: t.field({
    type: PublishAgentPayload,
    description:
      'Validates a program and publishes it as a new version of the agent of its name, run by the environment (default development). Refused with every problem listed.',
    authScopes: { scope: 'admin' },
    args: { input: t.arg({ type: PublishAgentInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const project = await requireProject(ctx, String(input.projectID));
      return ctx.services.runtime.publish({
        projectId: project.id,
        environment: input.environment ?? 'development',
        program: input.program,
        actor: actorOf(ctx.principal),
      });
    },
  }),
  deployAgentVersion: t.prismaField({
    type: AgentDeploymentType,
    description: 'Points an environment at an existing version (promote to production, roll back).',
    authScopes: { scope: 'admin' },
    args: {
      projectID: t.arg.id({ required: true }),
      versionID: t.arg.id({ required: true, validate: idSchema }),
      environment: t.arg.string({ required: true, validate: environmentRefSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const deployed = await ctx.services.runtime.deploy({
        projectId: project.id,
        versionId: String(args.versionID),
        environment: args.environment,
        actor: actorOf(ctx.principal),
      });
      return ctx.services.db.prisma.agentDeployment.findUniqueOrThrow({
        ...query,
        where: { environmentId: deployed.environmentId },
      });
    },
  }),
  interact: t.field({
    type: InteractResultType,
    description:
      'Runs one turn and returns its traces (completion pieces merged into one text trace; block, debug and flow left out unless config.excludeTypes says otherwise).',
    authScopes: { scope: 'runtime:interact' },
    args: {
      projectID: t.arg.id({ required: true }),
      userID: t.arg.string({ required: true, validate: userIdSchema }),
      environment: t.arg.string({ defaultValue: 'development', validate: environmentRefSchema }),
      request: t.arg({ type: InteractRequestInput, required: true }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const handle = await ctx.services.runtime.startTurn(
        turnRequest(
          { projectID: project.id, userID: args.userID, environment: args.environment ?? 'development' },
          args.request as InteractRequestValue,
          { profile: 'non-stream', includeState: false },
        ),
      );
      const traces: OutputTrace[] = [];
      let outcome: TurnRecord['outcome'] = 'failed';
      for await (const event of handle.events) {
        if (event.event === 'trace') traces.push(event.trace);
        if (event.event === 'end') outcome = event.outcome;
      }
      return { turnID: handle.turnId, traces, outcome };
    },
  }),
  replaceRuntimeState: t.field({
    type: 'JSONObject',
    description: "Replaces a user's state ({stack, storage, variables}).",
    authScopes: { scope: 'runtime:interact' },
    args: { ...stateArgs, state: t.arg({ type: 'JSONObject', required: true, validate: stateSchema }) },
    resolve: async (_root, args, ctx) =>
      (await ctx.services.runtime.putState(
        await stateRef(ctx, args),
        args.state as unknown as RuntimeState,
      )) as unknown as Record<string, unknown>,
  }),
  updateRuntimeVariables: t.field({
    type: 'JSONObject',
    description: "Merges variables into a user's state (creating it if needed); returns the state.",
    authScopes: { scope: 'runtime:interact' },
    args: {
      ...stateArgs,
      variables: t.arg({ type: 'JSONObject', required: true, validate: requestVariablesSchema }),
    },
    resolve: async (_root, args, ctx) =>
      (await ctx.services.runtime.patchVariables(await stateRef(ctx, args), args.variables)) as unknown as Record<
        string,
        unknown
      >,
  }),
  deleteRuntimeState: t.boolean({
    description: "Deletes a user's state: the next turn starts a new conversation.",
    authScopes: { scope: 'runtime:interact' },
    args: stateArgs,
    resolve: async (_root, args, ctx) => {
      await ctx.services.runtime.deleteState(await stateRef(ctx, args));
      return true;
    },
  }),
}));

builder.subscriptionField('interact', (t) =>
  t.field({
    type: InteractEventType,
    description:
      'Runs one turn and streams its events: each trace as its step runs, the state if asked, then end. What the SSE endpoints of SPEC.md run.',
    authScopes: { scope: 'runtime:interact' },
    args: {
      projectID: t.arg.id({ required: true }),
      userID: t.arg.string({ required: true, validate: userIdSchema }),
      environment: t.arg.string({ defaultValue: 'development', validate: environmentRefSchema }),
      request: t.arg({ type: InteractRequestInput, required: true }),
      format: t.arg({ type: InteractFormat, defaultValue: 'V2' }),
      completionEvents: t.arg.boolean({
        defaultValue: false,
        description: 'V2: stream model answers as completion traces instead of one text trace.',
      }),
      includeState: t.arg.boolean({ defaultValue: false, description: 'Send the user state before the end.' }),
    },
    // Everything that can be refused is checked here, before any event: errors are ordinary errors.
    subscribe: async (_root, args, ctx) => {
      const project = await requireProject(ctx, String(args.projectID));
      const profile = args.format === 'BETA' ? 'beta' : args.completionEvents ? 'v2-completion-events' : 'v2';
      const handle = await ctx.services.runtime.startTurn(
        turnRequest(
          { projectID: project.id, userID: args.userID, environment: args.environment ?? 'development' },
          args.request as InteractRequestValue,
          { profile, includeState: args.includeState ?? false },
        ),
      );
      return handle.events;
    },
    resolve: (event: TurnEvent) => toEventShape(event),
  }),
);
