import { resolveEnvironment } from '../admin/environments';
import type { Db } from '../db/client';
import { AppError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import type { LlmProvider } from '../llm';
import { traceTurn } from '../ops/runtime-tracing';
import { type AgentDeps, deployAgentVersion, type PublishResult, publishAgent, validateAgentProgram } from './agents';
import { createDeploymentCache } from './deployment-cache';
import { createEventQueue } from './event-queue';
import { createExpressionEvaluator, type ExpressionEvaluator, toJsonValue } from './expressions';
import { interpretTurn } from './interpreter';
import { type CompiledProgram, compileProgram } from './program/compile';
import type { AgentProgram } from './program/schema';
import type { ProgramCheck } from './program/validate';
import { type CodeSandbox, createCodeSandbox } from './sandbox/code-sandbox';
import { createStateStore, type StateLease, type StateStore } from './state-store';
import { createDefaultStepRegistry } from './steps';
import type { StepRegistry } from './steps/registry';
import type {
  AnyStepType,
  CreditRecord,
  IntegrationAccess,
  KnowledgeBaseAnswer,
  KnowledgeBaseQuestion,
  StepServices,
  TurnScope,
} from './steps/step-type';
import { createTraceFormatter, type OutputTrace, type TraceProfile } from './trace-format';
import type { TurnRecord, TurnRecorder } from './turn-record';
import { createTurnRecordBatcher } from './turn-record-batcher';
import { settleTurn, type TurnEnd, type TurnSettlementDeps } from './turn-settlement';
import { cloneState, emptyState, type RuntimeAction, type RuntimeState, type Trace } from './types';
import type { RequestConfig } from './validation';

/**
 * The runtime of one Parley instance: publishing, turns and state. Built by `createRuntime` in
 * the services container; the GraphQL resolvers are its only callers besides the CLI.
 */

export interface RuntimeLimits {
  /** A turn's time limit (DECISIONS.md §6: 30 s by default). */
  turnTimeoutMs: number;
  /** Steps one turn may run before it is stopped as a loop. */
  stepLimit: number;
  /** How long a turn waits for another turn of the same user to finish. */
  lockWaitMs: number;
  /**
   * How long a user's lease outlives the last sign of life of the turn holding it (extended every
   * third of it while the turn runs): after a kill -9, the user's next turn waits this long at most.
   */
  leaseMs: number;
  maxApiTimeoutMs: number;
  maxApiResponseBytes: number;
  maxCodeTimeoutMs: number;
  codeMemoryBytes: number;
  sandboxWorkers: number;
}

export interface CreateRuntimeOptions {
  db: Db;
  pubsub: AppPubSub;
  logger: Logger;
  limits: RuntimeLimits;
  recorder: TurnRecorder;
  /** Step types beyond the built-in ones (AI steps; a test's own). */
  extraStepTypes?: readonly AnyStepType[];
  /** HTTP for API steps (default: global fetch). */
  fetch?: typeof fetch;
  /**
   * Whether a session is over (its transcript was ended: an end step, the idle sweep or an explicit
   * end). The user's next turn then starts a new session, so it goes to a new transcript.
   */
  sessionEnded?(key: { projectId: string; environmentId: string; sessionId: string }): Promise<boolean>;
  /** Called once when a turn has finished (before it is recorded): metrics. */
  onTurnFinished?(turn: TurnRecord): void;
  /** Language models, for AI steps. */
  llm?: LlmProvider;
  /** Records a step's model call as usage of the turn's project (AI steps). */
  recordCredit?(scope: TurnScope, credit: CreditRecord, source: { stepId: string; flowId: string }): Promise<void>;
  /** The knowledge base of the turn's project (knowledge-base and AI steps). */
  askKnowledgeBase?(scope: TurnScope, question: KnowledgeBaseQuestion): Promise<KnowledgeBaseAnswer>;
  /** The MCP servers of the turn's project (agent steps' integration tools). */
  integrations?(scope: TurnScope): IntegrationAccess;
}

export interface TurnRequest {
  projectId: string;
  /** Environment ID or alias. */
  environment: string;
  userId: string;
  action: RuntimeAction;
  variables?: Record<string, unknown> | null;
  /** The client's session ID (beta stream); otherwise the stored one, or a new one on launch. */
  sessionId?: string | null;
  config?: RequestConfig | null;
  profile: TraceProfile;
  /** Send the user's state (after the turn) before `end`. */
  includeState: boolean;
}

export type TurnEvent = { turnId: string } & (
  | { event: 'trace'; trace: OutputTrace }
  | { event: 'state'; state: RuntimeState }
  | { event: 'end'; outcome: TurnRecord['outcome'] }
);

export interface TurnHandle {
  turnId: string;
  events: AsyncIterable<TurnEvent>;
  /** Settles once the turn is saved and recorded, whether or not anyone reads `events`. */
  done: Promise<TurnRecord>;
}

export interface StateRef {
  projectId: string;
  environment: string;
  userId: string;
}

export interface Runtime {
  readonly registry: StepRegistry;
  readonly sandbox: CodeSandbox;
  readonly states: StateStore;
  validate(program: unknown): Promise<ProgramCheck>;
  publish(input: { projectId: string; environment: string; program: unknown; actor: string }): Promise<PublishResult>;
  deploy(input: {
    projectId: string;
    versionId: string;
    environment: string;
    actor: string;
  }): Promise<{ environmentId: string; versionId: string }>;
  /** Checks what can be refused with an ordinary error (environment, published agent), then starts the turn. */
  startTurn(request: TurnRequest): Promise<TurnHandle>;
  getState(ref: StateRef): Promise<RuntimeState>;
  /** The user's state, or null when there is none (the environment must exist). */
  findState(ref: StateRef): Promise<RuntimeState | null>;
  putState(ref: StateRef, state: RuntimeState): Promise<RuntimeState>;
  patchVariables(ref: StateRef, variables: Record<string, unknown>): Promise<RuntimeState>;
  /**
   * Deletes a user's state; true when there was one. Without one: a 404, or with
   * `mustExist: false` (the Dialog Manager API's idempotent DELETE) false.
   */
  deleteState(ref: StateRef, opts?: { mustExist?: boolean }): Promise<boolean>;
  close(): Promise<void>;
}

/** Deepest conversation stack kept; older frames are dropped (a user who keeps triggering side flows). */
const maxStackDepth = 32;
const programCacheSize = 200;
/** How long a deployed version is trusted without hearing of a change (docs/performance.md "Turn path"). */
const deploymentCacheTtlMs = 5000;

function interactionTypeOf(action: RuntimeAction): string {
  return action.type.startsWith('path-') ? 'button' : action.type;
}

function normalizeState(state: RuntimeState): RuntimeState {
  return {
    stack: state.stack.map((f) => ({
      diagramID: f.diagramID,
      nodeID: f.nodeID,
      variables: f.variables ?? {},
      storage: f.storage ?? {},
    })),
    storage: state.storage ?? {},
    variables: state.variables ?? {},
  };
}

/** A state as given to clients: every frame names its flow as `programID` and `diagramID`. */
function presentState(state: RuntimeState): RuntimeState {
  const normal = normalizeState(state);
  return { ...normal, stack: normal.stack.map((f) => ({ programID: f.diagramID, ...f })) };
}

/** Resolves after the event loop has gone through one poll phase (see runTurn). */
async function yieldOneRound(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  await new Promise<void>((resolve) => setImmediate(resolve));
}

export function createRuntime(opts: CreateRuntimeOptions): Runtime {
  const { db, logger, limits } = opts;
  const log = logger.child({ component: 'runtime' });
  const registry = createDefaultStepRegistry(opts.extraStepTypes);
  const sandbox = createCodeSandbox({ workers: limits.sandboxWorkers, memoryLimitBytes: limits.codeMemoryBytes });
  // A lease outlives any turn: the turn's own limit, plus time to save and record it.
  const states = createStateStore(db, {
    leaseMs: limits.leaseMs,
    renewMs: Math.max(100, Math.floor(limits.leaseMs / 3)),
    waitMs: limits.lockWaitMs,
    onRenewError: (err) =>
      logger.warn({ err }, 'could not extend a turn lease; it lapses unless a later extension succeeds'),
  });
  const evaluator: ExpressionEvaluator = createExpressionEvaluator();
  const agentDeps: AgentDeps = { db, pubsub: opts.pubsub, registry, sandbox };
  const stepServices: StepServices = {
    fetch: opts.fetch ?? fetch,
    llm: opts.llm,
    sandbox,
    maxApiResponseBytes: limits.maxApiResponseBytes,
    maxApiTimeoutMs: limits.maxApiTimeoutMs,
    maxCodeTimeoutMs: limits.maxCodeTimeoutMs,
  };
  /** The step services of one turn: the shared ones, bound to the turn's project and user. */
  const turnServices = (scope: TurnScope): StepServices => ({
    ...stepServices,
    turn: scope,
    recordCredit: opts.recordCredit ? (credit, source) => opts.recordCredit!(scope, credit, source) : undefined,
    askKnowledgeBase: opts.askKnowledgeBase ? (question) => opts.askKnowledgeBase!(scope, question) : undefined,
    integrations: opts.integrations?.(scope),
  });
  const outboxDeps = { db, recorder: opts.recorder, logger };
  const settlementDeps: TurnSettlementDeps = {
    db,
    states,
    outbox: outboxDeps,
    batcher: opts.recorder.recordBatch ? createTurnRecordBatcher(outboxDeps) : null,
    log,
    onTurnFinished: opts.onTurnFinished,
  };
  const programs = new Map<string, CompiledProgram>();
  const running = new Set<Promise<unknown>>();

  const deployments = createDeploymentCache(db, opts.pubsub, { ttlMs: deploymentCacheTtlMs, logger });

  /** The environment and the program it runs: from memory, or one query (plus one when the version is not cached). */
  async function deployedProgram(projectId: string, idOrAlias: string) {
    const { environment, agentVersionId } = await deployments.get(projectId, idOrAlias);
    if (!agentVersionId) {
      throw new AppError(
        'NOT_FOUND',
        `No agent is published to the environment "${environment.alias}"; publish one first (parley agent publish, or the publishAgent mutation)`,
      );
    }
    const cached = programs.get(agentVersionId);
    if (cached) return { environment, program: cached };
    const version = await db.prisma.agentVersion.findUniqueOrThrow({
      where: { id: agentVersionId },
      include: { agent: { select: { name: true } } },
    });
    const compiled = compileProgram(version.program as unknown as AgentProgram, registry, {
      agentID: version.agentId,
      agentName: version.agent.name,
      versionID: version.id,
      versionNumber: version.number,
    });
    if (programs.size >= programCacheSize) programs.delete(programs.keys().next().value as string);
    programs.set(version.id, compiled);
    return { environment, program: compiled };
  }

  async function runTurn(
    turnId: string,
    request: TurnRequest,
    environment: { id: string; alias: string },
    program: CompiledProgram,
    queue: ReturnType<typeof createEventQueue<TurnEvent>>,
  ): Promise<TurnRecord> {
    const startedAt = new Date();
    const recorded: OutputTrace[] = [];
    const recordFormatter = createTraceFormatter('record');
    const outputFormatter = createTraceFormatter(request.profile, {
      excludeTypes: request.config?.excludeTypes ?? null,
    });
    const emit = (trace: Trace) => {
      recorded.push(...recordFormatter.push(trace));
      for (const out of outputFormatter.push(trace)) queue.push({ event: 'trace', trace: out, turnId });
    };
    const debug = (type: string, message: string) =>
      emit({ type: 'debug', payload: { type, message: message.slice(0, 500) }, time: Date.now() });

    const config = request.config ?? {};
    const customActionStops =
      config.stopAll !== undefined || config.stopTypes !== undefined
        ? (name: string) => config.stopAll === true || (config.stopTypes ?? []).includes(name)
        : () => true;

    const record: TurnRecord = {
      turnID: turnId,
      projectID: request.projectId,
      environmentID: environment.id,
      environmentAlias: environment.alias,
      userID: request.userId,
      sessionID: request.sessionId ?? '',
      sessionStarted: false,
      agent: program.identity
        ? {
            agentID: program.identity.agentID,
            name: program.identity.agentName,
            versionID: program.identity.versionID,
            versionNumber: program.identity.versionNumber,
          }
        : null,
      action: request.action,
      interactionType: interactionTypeOf(request.action),
      requestVariables: request.variables ?? null,
      traces: recorded,
      intents: [],
      apiCalls: [],
      functionCalls: [],
      integrationCalls: [],
      agentSteps: [],
      outcome: 'failed',
      success: false,
      error: null,
      stateSaved: false,
      conversationEnded: false,
      clientDisconnected: false,
      stepsRun: 0,
      startedAt,
      finishedAt: startedAt,
    };
    let stateAfter: RuntimeState | null = null;

    // The run ends in a TurnEnd; settleTurn (./turn-settlement.ts) saves, frees and records it.
    let lease: StateLease | null = null;
    let end: TurnEnd;
    try {
      lease = await states.acquire({
        projectId: request.projectId,
        environmentId: environment.id,
        userId: request.userId,
      });
      const row = lease.row;
      const working = row ? cloneState(row.state) : emptyState();
      stateAfter = row ? row.state : null;
      // Without a session ID from the client, a launch starts a new session, and so does any turn
      // after the session ended (docs/runtime.md "Sessions").
      const sessionStarted = request.sessionId
        ? request.sessionId !== row?.sessionId
        : !row ||
          request.action.type === 'launch' ||
          ((await opts.sessionEnded?.({
            projectId: request.projectId,
            environmentId: environment.id,
            sessionId: row.sessionId,
          })) ??
            false);
      const sessionId = request.sessionId ?? (sessionStarted || !row ? newId() : row.sessionId);
      record.sessionID = sessionId;
      record.sessionStarted = sessionStarted;
      for (const [name, value] of Object.entries(request.variables ?? {})) working.variables[name] = toJsonValue(value);

      const controller = new AbortController();
      const deadline = Date.now() + limits.turnTimeoutMs;
      const timer = setTimeout(() => controller.abort(), limits.turnTimeoutMs);
      let result: Awaited<ReturnType<typeof interpretTurn>>;
      try {
        result = await interpretTurn({
          program,
          state: working,
          action: request.action,
          userID: request.userId,
          newSession: sessionStarted,
          stepLimit: limits.stepLimit,
          maxStackDepth,
          timeLimitMs: limits.turnTimeoutMs,
          deadline,
          signal: controller.signal,
          services: turnServices({
            projectId: request.projectId,
            environmentId: environment.id,
            userId: request.userId,
            sessionId,
          }),
          evaluator,
          emit,
          customActionStops,
        });
      } finally {
        clearTimeout(timer);
      }
      record.intents = result.intents;
      record.apiCalls = result.apiCalls;
      record.functionCalls = result.functionCalls;
      record.integrationCalls = result.integrationCalls;
      record.agentSteps = result.agentSteps;
      record.stepsRun = result.stepsRun;
      record.conversationEnded = result.conversationEnded;
      end =
        result.status === 'completed'
          ? {
              kind: 'completed',
              lease,
              next: { state: working, sessionId, agentVersionId: program.identity?.versionID ?? null },
            }
          : { kind: 'stopped', lease, status: result.status, error: result.error };
    } catch (err) {
      end = { kind: 'threw', lease, error: err };
    }
    // Let the event loop run a whole round before settling (saving the state and recording the
    // turn, which on SQLite never wait on I/O): the events the steps produced are written to the
    // socket now, not behind the commit, and other connections (a client in the same process
    // included) are read in between. The lease is held throughout, so nothing else sees the turn
    // half-done. Two checks of setImmediate: the first can run in the round that is ending, after
    // its poll; the second runs after the next round's poll.
    await yieldOneRound();
    await settleTurn(settlementDeps, { record, debug, clientGone: () => queue.detached }, end);
    if (end.kind === 'completed' && record.stateSaved) stateAfter = end.next.state;
    if (request.includeState) queue.push({ event: 'state', state: presentState(stateAfter ?? emptyState()), turnId });
    queue.push({ event: 'end', turnId, outcome: record.outcome });
    queue.close();
    return record;
  }

  async function withState<T>(ref: StateRef, fn: (lease: StateLease, environmentId: string) => Promise<T>): Promise<T> {
    const environment = await resolveEnvironment(db.prisma, ref.projectId, ref.environment);
    return states.withLease({ projectId: ref.projectId, environmentId: environment.id, userId: ref.userId }, (lease) =>
      fn(lease, environment.id),
    );
  }

  async function currentVersionId(environmentId: string): Promise<string | null> {
    const deployment = await db.prisma.agentDeployment.findUnique({ where: { environmentId } });
    return deployment?.agentVersionId ?? null;
  }

  return {
    registry,
    sandbox,
    states,
    validate: (program) => validateAgentProgram(agentDeps, program),
    async publish(input) {
      const result = await publishAgent(agentDeps, input);
      // At once here; other instances hear of it on the agentDeployed topic.
      deployments.forget(result.environmentId);
      return result;
    },
    async deploy(input) {
      const result = await deployAgentVersion(agentDeps, input);
      deployments.forget(result.environmentId);
      return result;
    },

    async startTurn(request) {
      const { environment, program } = await deployedProgram(request.projectId, request.environment);
      const turnId = newId();
      const queue = createEventQueue<TurnEvent>();
      const done = traceTurn(turnId, request, () =>
        runTurn(turnId, request, { id: environment.id, alias: environment.alias }, program, queue),
      );
      running.add(done);
      done.finally(() => running.delete(done)).catch(() => {});
      return { turnId, events: queue, done };
    },

    async getState(ref) {
      const environment = await resolveEnvironment(db.prisma, ref.projectId, ref.environment);
      const row = await states.read(environment.id, ref.userId);
      const state = row ? presentState(row.state) : null;
      if (!state) throw new AppError('NOT_FOUND', `No state for user "${ref.userId}" in this environment`);
      return state;
    },

    async findState(ref) {
      const environment = await resolveEnvironment(db.prisma, ref.projectId, ref.environment);
      const row = await states.read(environment.id, ref.userId);
      return row ? presentState(row.state) : null;
    },

    putState(ref, state) {
      return withState(ref, async (lease, environmentId) => {
        const next = normalizeState(state);
        const saved = await states.commit(lease, {
          state: next,
          sessionId: lease.row?.sessionId ?? newId(),
          agentVersionId: await currentVersionId(environmentId),
        });
        if (!saved) throw new AppError('CONFLICT', 'The state changed while it was being written; try again');
        return presentState(next);
      });
    },

    patchVariables(ref, variables) {
      return withState(ref, async (lease, environmentId) => {
        const next = normalizeState(lease.row ? cloneState(lease.row.state) : emptyState());
        for (const [name, value] of Object.entries(variables)) next.variables[name] = toJsonValue(value);
        const saved = await states.commit(lease, {
          state: next,
          sessionId: lease.row?.sessionId ?? newId(),
          agentVersionId: lease.row?.agentVersionId ?? (await currentVersionId(environmentId)),
        });
        if (!saved) throw new AppError('CONFLICT', 'The state changed while it was being written; try again');
        return presentState(next);
      });
    },

    async deleteState(ref, opts = {}) {
      const removed = await withState(ref, (lease) => states.remove(lease));
      if (!removed && opts.mustExist !== false) {
        throw new AppError('NOT_FOUND', `No state for user "${ref.userId}" in this environment`);
      }
      return Boolean(removed);
    },

    async close() {
      // Turns in progress finish (and save) before the database closes.
      await Promise.allSettled([...running]);
      deployments.close();
      await sandbox.close();
    },
  };
}
