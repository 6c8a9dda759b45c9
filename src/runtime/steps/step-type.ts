import type { z } from 'zod';
import type { LlmProvider } from '../../llm';
import type { EntitySpec } from '../nlu/entities';
import type { IntentMatch } from '../nlu/matcher';
import type { CodeSandbox } from '../sandbox/code-sandbox';
import type { RuntimeAction } from '../types';

/**
 * The contract between the interpreter and a kind of step. A step type declares its fields (a zod
 * schema, which becomes part of the program format and its JSON Schema), what it refers to (for
 * program validation), and how it runs. The interpreter knows nothing about any particular step:
 * adding a step type (the AI steps of a later issue) is registering one more of these.
 */

/** Fields every step has. */
export interface StepBase {
  /** Unique in the whole program. */
  id: string;
  type: string;
  /** A readable name, used in usage records (API and function calls). */
  name?: string;
}

/** A transition out of a step, for validation and reachability. */
export interface StepExit {
  /** Where in the step the transition is written, e.g. `next`, `buttons.1.next`. */
  field: string;
  /** A step ID in the same flow; absent means "the flow ends here". */
  target: string | undefined;
}

/** What a step refers to, so a program can be checked before it is published. */
export interface StepReferences {
  /** Text with `{variable}` placeholders. */
  templates?: { field: string; text: string }[];
  /** JSON values whose strings are templates. */
  jsonTemplates?: { field: string; value: unknown }[];
  /** JSONata expressions over the variables. */
  expressions?: { field: string; source: string }[];
  /** Variables the step assigns. */
  writes?: { field: string; name: string }[];
  intents?: { field: string; name: string }[];
  entities?: { field: string; name: string }[];
  /** Flows (and optionally a step of that flow) the step jumps to. */
  flows?: { field: string; flow: string; step?: string }[];
}

export interface StepProblem {
  severity: 'error' | 'warning';
  /** Relative to the step, e.g. `code`. */
  field: string;
  message: string;
}

/**
 * What a step sees of the program it belongs to. A narrow view rather than the compiled program:
 * the compiler (program/compile.ts) is built from the step registry, so steps must not depend on it.
 */
export interface StepProgram {
  /** Declared variables and their defaults. */
  readonly variables: ReadonlyMap<string, unknown>;
}

/** What a step's own validation hook may look at. */
export interface StepValidationContext {
  program: StepProgram;
  flowId: string;
}

/** The user's input at a waiting step, interpreted once per turn by the interpreter. */
export interface UserInput {
  action: RuntimeAction;
  kind: 'launch' | 'text' | 'intent' | 'path' | 'event' | 'no-reply' | 'other';
  /** The words: a text action's payload, an intent action's query, a button's label. */
  utterance: string | null;
  /** From an intent action, or from NLU when above the program's confidence threshold. */
  intent: IntentMatch | null;
  /** An event action's name. */
  event: string | null;
}

/** How a step ends. */
export type StepResult =
  /** Continue at `target` in the same flow; undefined ends the flow. `path` is reported in a `path` trace. */
  | { kind: 'next'; target: string | undefined; path?: string }
  /** Stop the turn; the next action is given to this step's `resume`. */
  | { kind: 'wait' }
  /** Run another flow (from `step`, or its start); when it ends, continue at `returnTo` here. */
  | { kind: 'call'; flow: string; step?: string; returnTo: string | undefined; path?: string }
  /** End the conversation: the stack is cleared. */
  | { kind: 'end' };

export interface ApiCallRecord {
  stepID: string;
  /** An agent step's API tool: `stepID:toolName` (the usage's apiToolID); absent for API steps. */
  toolID?: string;
  flowID: string;
  name: string;
  method: string;
  url: string;
  status: number | null;
  success: boolean;
  durationMs: number;
  error?: string;
}

/**
 * A call of an integration tool (a third-party service the agent step calls on the model's behalf:
 * a CRM lookup, a calendar booking, …). Each becomes an `integration_call` usage event, counted under
 * `integrations` (docs/usage.md "What counts as an integration call").
 */
export interface IntegrationCallRecord {
  stepID: string;
  flowID: string;
  /**
   * The integration tool's name: `integrations.integrationToolName`. An agent step's MCP tool is
   * `server.tool`, which keeps tools of two servers apart (SPEC.md keys integrations by name only).
   */
  integrationToolName: string;
  success: boolean;
  durationMs: number;
  error?: string;
}

export interface FunctionCallRecord {
  stepID: string;
  /** An agent step's function tool: `stepID:toolName` (the usage's functionID); absent for code steps. */
  toolID?: string;
  flowID: string;
  name: string;
  success: boolean;
  durationMs: number;
  error?: string;
}

/**
 * An agent step entered, or left (by an exit, its turn limit, or its failure path). One invocation
 * (`invocationID`) has one `entered` record and at most one `left` record, possibly turns later.
 */
export interface AgentStepRecord {
  stepID: string;
  flowID: string;
  name: string;
  /**
   * `entered` when the step starts (counted as an invocation), `left` when it ends. Absent in
   * records written before invocations were counted on entry: those are left records that count.
   */
  event?: 'entered' | 'left';
  /** Names the invocation across its turns (absent in records written before it existed). */
  invocationID?: string;
  /** When the step was entered (epoch ms): a success is counted in the hour of its invocation. */
  enteredAt?: number;
  /** False when it left by its failure path (the model failed, or there was none); true when entered. */
  success: boolean;
  turns: number;
}

/** Streams one model answer in pieces; the output format decides how pieces reach the client. */
export interface CompletionStream {
  /** Appends a piece of the answer. */
  content(piece: string): void;
  /** Ends the answer with its token counts. */
  end(tokens?: { answer?: number; query?: number; total?: number }): void;
}

export interface VariableAccess {
  get(name: string): unknown;
  /** Stores a JSON copy of `value`. */
  set(name: string, value: unknown): void;
  /** The current variables (a read-only view). */
  all(): Readonly<Record<string, unknown>>;
}

/** The conversation a turn belongs to: what steps that record usage or read project data need. */
export interface TurnScope {
  projectId: string;
  environmentId: string;
  userId: string;
  /** The conversation session (gen_ai.conversation.id of agent spans). */
  sessionId?: string;
}

/** A tool of a project's MCP server, as listed by the server. */
export interface IntegrationTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** The project's MCP servers (integrations), for agent steps. */
export interface IntegrationAccess {
  /** The server's tools; throws when the server is unknown, refused or unreachable. */
  listTools(server: string, signal: AbortSignal): Promise<IntegrationTool[]>;
  /** Calls a tool: its result as text, `isError` when the tool reported a failure. */
  callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<{ text: string; isError: boolean }>;
}

/** A model call's tokens, for `credit_usage`. */
export interface CreditRecord {
  model: string;
  inputTokens: number;
  outputTokens: number;
}

/** A question to the project's knowledge base, as the knowledge-base and AI steps ask it. */
export interface KnowledgeBaseQuestion {
  question: string;
  chunkLimit: number;
  /** A metadata filter (docs/knowledge-base-filters.md); a bad one throws with the reason. */
  filters?: unknown;
  synthesis: boolean;
  settings?: { model?: string; temperature?: number; system?: string; maxTokens?: number };
  stepId: string;
  flowId: string;
  signal: AbortSignal;
}

export interface KnowledgeBaseAnswer {
  output: string | null;
  chunks: {
    score: number;
    chunkID: string;
    documentID: string;
    content: string;
    metadata: Record<string, unknown>;
    source: { type: string; name: string; url?: string };
  }[];
  model: string | null;
  queryTokens: number;
  answerTokens: number;
}

export interface StepServices {
  /** HTTP for API steps (global fetch unless a test injects its own). */
  fetch: typeof fetch;
  sandbox: CodeSandbox;
  /** Largest API response body read, in bytes. */
  maxApiResponseBytes: number;
  /** Longest time one API step may take, whatever it asks for. */
  maxApiTimeoutMs: number;
  /** Longest time one code step may run. */
  maxCodeTimeoutMs: number;
  /** The turn's project, environment and user (set per turn by the runtime). */
  turn?: TurnScope;
  /** Language models (AI steps); absent in a runtime built without them. */
  llm?: LlmProvider;
  /** Records a model call of a step as `credit_usage` of the turn's project and environment. */
  recordCredit?(credit: CreditRecord, source: { stepId: string; flowId: string }): Promise<void>;
  /** Retrieval (and optional synthesis) over the turn's project's knowledge base. */
  askKnowledgeBase?(question: KnowledgeBaseQuestion): Promise<KnowledgeBaseAnswer>;
  /** The turn's project's MCP servers; absent in a runtime built without them. */
  integrations?: IntegrationAccess;
}

export interface StepContext {
  readonly program: StepProgram;
  readonly flowId: string;
  readonly userID: string;
  /** Aborted when the turn's time limit is reached. */
  readonly signal: AbortSignal;
  /** When the turn's time limit is reached (epoch milliseconds). */
  readonly deadline: number;
  readonly services: StepServices;
  /** Storage of the step's stack frame (kept between turns, cleared when the flow ends). */
  readonly frameStorage: Record<string, unknown>;
  readonly variables: VariableAccess;
  now(): number;
  random(): number;
  /** Emits a trace now: it is written to the client before the step goes on. */
  emit(type: string, payload: unknown, extra?: { paths?: { event: { type: string } }[]; defaultPath?: number }): void;
  /** A `debug` trace (messages are cut to 500 characters). */
  debug(message: string, type?: string): void;
  /** Starts streaming a model answer (`completion` traces, formatted per stream). */
  completion(opts?: { model?: string }): CompletionStream;
  interpolate(template: string, encode?: (text: string, offset: number) => string): string;
  interpolateJson(value: unknown): unknown;
  /** Evaluates a JSONata expression against the variables (and extra `$bindings`). */
  evaluate(source: string, input?: unknown, bindings?: Record<string, unknown>): Promise<unknown>;
  /** The program's global trigger for this input, as a result that calls its flow and then returns here. */
  globalTrigger(input: UserInput): StepResult | null;
  /** Whether a custom action of this name stops the turn (non-stream `config.stopTypes`/`stopAll`). */
  customActionStops(name: string): boolean;
  resolveEntity(ref: string | EntitySpec): EntitySpec | null;
  recordApiCall(call: Omit<ApiCallRecord, 'stepID' | 'flowID'>): void;
  recordFunctionCall(call: Omit<FunctionCallRecord, 'stepID' | 'flowID'>): void;
  recordIntegrationCall(call: Omit<IntegrationCallRecord, 'stepID' | 'flowID'>): void;
  recordAgentStep(record: Omit<AgentStepRecord, 'stepID' | 'flowID'>): void;
}

export interface StepType<S extends StepBase = StepBase> {
  type: S['type'];
  /** One line for docs/runtime.md. */
  description: string;
  /** The step's fields, `id` and `type` included. */
  schema: z.ZodType<S>;
  exits(step: S): StepExit[];
  references?(step: S): StepReferences;
  validate?(step: S, ctx: StepValidationContext): StepProblem[];
  run(step: S, ctx: StepContext): Promise<StepResult>;
  /** For steps that wait: handles the user's next input. */
  resume?(step: S, ctx: StepContext, input: UserInput): Promise<StepResult>;
}

/** A step type with its step shape erased, as the registry stores it. */
export type AnyStepType = StepType<StepBase>;

export function defineStepType<S extends StepBase>(definition: StepType<S>): AnyStepType {
  return definition as unknown as AnyStepType;
}
