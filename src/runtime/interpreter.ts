import { traceStep } from '../ops/runtime-tracing';
import { type ExpressionEvaluator, interpolate, interpolateJson, toJsonValue } from './expressions';
import type { EntitySpec } from './nlu/entities';
import type { IntentMatch } from './nlu/matcher';
import type { CompiledProgram, CompiledStep } from './program/compile';
import type {
  AgentStepRecord,
  ApiCallRecord,
  CompletionStream,
  FunctionCallRecord,
  IntegrationCallRecord,
  StepContext,
  StepResult,
  StepServices,
  UserInput,
} from './steps/step-type';
import type { RuntimeAction, RuntimeState, StackFrame, Trace } from './types';

/**
 * Runs one turn of a conversation over a working copy of the user's state: interprets the action
 * (NLU for text), hands it to the step the user was waiting at (or starts a flow), then runs steps
 * until one waits for the user, the conversation ends, or the stack empties. Each trace is emitted
 * the moment its step produces it. The interpreter knows the step contract, never a step type.
 *
 * It does not save anything: the turn runner commits the working state only when the turn
 * completes, so a turn that fails, times out or loops leaves the stored state as it was.
 */

export class StepLimitError extends Error {
  constructor(readonly limit: number) {
    super(`Stopped after ${limit} steps: the flow seems to loop forever`);
    this.name = 'StepLimitError';
  }
}

export class TurnTimeoutError extends Error {
  constructor(readonly limitMs: number) {
    super(`The turn took longer than ${limitMs} ms and was stopped`);
    this.name = 'TurnTimeoutError';
  }
}

export interface InterpretOptions {
  program: CompiledProgram;
  /** The working state; changed in place. */
  state: RuntimeState;
  action: RuntimeAction;
  userID: string;
  /** Increments the `sessions` variable. */
  newSession: boolean;
  stepLimit: number;
  /** Deepest call stack; the oldest frames are dropped beyond it. */
  maxStackDepth: number;
  timeLimitMs: number;
  deadline: number;
  signal: AbortSignal;
  services: StepServices;
  evaluator: ExpressionEvaluator;
  emit(trace: Trace): void;
  customActionStops(name: string): boolean;
  now?: () => number;
  random?: () => number;
}

export interface InterpretResult {
  status: 'completed' | 'step-limit' | 'timeout' | 'failed';
  error: Error | null;
  intents: { name: string; confidence: number; source: 'nlu' | 'request' }[];
  apiCalls: ApiCallRecord[];
  functionCalls: FunctionCallRecord[];
  integrationCalls: IntegrationCallRecord[];
  agentSteps: AgentStepRecord[];
  conversationEnded: boolean;
  stepsRun: number;
}

const debugMessageLimit = 500;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether a stored stack still fits the program (a newer version may have removed flows or steps). */
function stackFits(stack: readonly StackFrame[], program: CompiledProgram): boolean {
  return stack.every((frame) => {
    const flow = program.flows.get(frame.diagramID);
    return flow && (frame.nodeID === null || flow.steps.has(frame.nodeID));
  });
}

export async function interpretTurn(opts: InterpretOptions): Promise<InterpretResult> {
  const { program, state, action } = opts;
  const now = opts.now ?? Date.now;
  const random = opts.random ?? Math.random;
  const result: InterpretResult = {
    status: 'completed',
    error: null,
    intents: [],
    apiCalls: [],
    functionCalls: [],
    integrationCalls: [],
    agentSteps: [],
    conversationEnded: false,
    stepsRun: 0,
  };
  let closed = false;
  let endSent = false;

  const emit = (type: string, payload: unknown, extra: Partial<Pick<Trace, 'paths' | 'defaultPath'>> = {}) => {
    if (closed) return;
    if (type === 'end') endSent = true;
    opts.emit({ type, payload, time: now(), ...extra });
  };
  const debug = (message: string, type?: string) =>
    emit('debug', { ...(type ? { type } : {}), message: message.slice(0, debugMessageLimit) });

  const variables = state.variables;
  const setVariable = (name: string, value: unknown) => {
    variables[name] = toJsonValue(value);
  };

  // Built-in variables and the defaults of variables this user does not have yet.
  for (const [name, value] of program.variables) if (!(name in variables)) variables[name] = structuredClone(value);
  setVariable('user_id', opts.userID);
  setVariable('timestamp', Math.floor(now() / 1000));
  if (opts.newSession) setVariable('sessions', (typeof variables.sessions === 'number' ? variables.sessions : 0) + 1);
  else if (!('sessions' in variables)) setVariable('sessions', 1);
  for (const name of ['last_utterance', 'last_event', 'intent_confidence', 'last_response']) {
    if (!(name in variables)) variables[name] = null;
  }

  const fillEntityVariables = (match: IntentMatch) => {
    for (const entity of match.entities) if (program.variables.has(entity.name)) setVariable(entity.name, entity.value);
  };

  function interpretAction(a: RuntimeAction): UserInput {
    const payload = a.payload;
    if (a.type === 'launch') return { action: a, kind: 'launch', utterance: null, intent: null, event: null };
    if (a.type === 'no-reply') return { action: a, kind: 'no-reply', utterance: null, intent: null, event: null };
    if (a.type === 'text') {
      const text = typeof payload === 'string' ? payload : '';
      setVariable('last_utterance', text);
      const best = program.matcher.rank(text, new Date(now()))[0];
      setVariable('intent_confidence', best ? Math.round(best.confidence * 10_000) / 100 : 0);
      const intent = best && best.confidence >= program.confidenceThreshold ? best : null;
      if (intent) {
        result.intents.push({ name: intent.name, confidence: intent.confidence, source: 'nlu' });
        fillEntityVariables(intent);
      }
      return { action: a, kind: 'text', utterance: text, intent, event: null };
    }
    if (a.type === 'intent' && isRecord(payload)) {
      const named = isRecord(payload.intent) && typeof payload.intent.name === 'string' ? payload.intent.name : '';
      const query = typeof payload.query === 'string' && payload.query ? payload.query : null;
      const confidence = typeof payload.confidence === 'number' ? payload.confidence : 1;
      const entities = (Array.isArray(payload.entities) ? payload.entities : []).flatMap((e) =>
        isRecord(e) && typeof e.name === 'string' && (typeof e.value === 'string' || typeof e.value === 'number')
          ? [{ name: e.name, value: e.value }]
          : [],
      );
      if (query) setVariable('last_utterance', query);
      setVariable('intent_confidence', Math.round(confidence * 10_000) / 100);
      const intent: IntentMatch = { name: named, confidence, entities };
      result.intents.push({ name: named, confidence, source: 'request' });
      fillEntityVariables(intent);
      return { action: a, kind: 'intent', utterance: query, intent, event: null };
    }
    if (a.type === 'event' && isRecord(payload)) {
      const name = isRecord(payload.event) && typeof payload.event.name === 'string' ? payload.event.name : '';
      setVariable('last_event', { type: 'event', name, payload: payload.event ?? null });
      return { action: a, kind: 'event', utterance: null, intent: null, event: name };
    }
    if (a.type.startsWith('path-')) {
      const label = isRecord(payload) && typeof payload.label === 'string' ? payload.label : null;
      if (label) setVariable('last_utterance', label);
      return { action: a, kind: 'path', utterance: label, intent: null, event: null };
    }
    return { action: a, kind: 'other', utterance: null, intent: null, event: null };
  }

  const input = interpretAction(action);

  const triggerFor = (i: UserInput) =>
    (i.intent && program.intentTriggers.get(i.intent.name)) ||
    (i.kind === 'event' && i.event !== null && program.eventTriggers.get(i.event)) ||
    null;

  const stack = state.stack;

  const enterFlow = (flowId: string, stepId?: string) => {
    const flow = program.flows.get(flowId);
    if (!flow) throw new Error(`unknown flow "${flowId}"`);
    stack.push({ diagramID: flowId, nodeID: stepId ?? flow.start, variables: {}, storage: {} });
    if (stack.length > opts.maxStackDepth) stack.splice(0, stack.length - opts.maxStackDepth);
    emit('flow', { diagramID: flowId, name: flow.name });
  };

  const popFrame = () => {
    const popped = stack.pop();
    const below = stack.at(-1);
    if (popped && below && below.diagramID !== popped.diagramID) {
      emit('flow', { diagramID: below.diagramID, name: program.flows.get(below.diagramID)?.name ?? below.diagramID });
    }
  };

  const abortPromise = new Promise<never>((_resolve, reject) => {
    const fail = () => reject(new TurnTimeoutError(opts.timeLimitMs));
    if (opts.signal.aborted) fail();
    else opts.signal.addEventListener('abort', fail, { once: true });
  });
  abortPromise.catch(() => {});
  /** A step that ignores the signal cannot hold the turn past its time limit. */
  const untilAborted = <T>(promise: Promise<T>): Promise<T> => Promise.race([promise, abortPromise]);

  // What a step's context holds that is the same for every step of the turn, made once per turn:
  // a context per step then adds only what names its step (closures made per step cost an
  // allocation each, and a name definition each under tsx, docs/performance.md).
  const variableAccess: StepContext['variables'] = {
    get(name) {
      return variables[name];
    },
    set: setVariable,
    all() {
      return { ...variables };
    },
  };
  const turnContext = {
    program,
    userID: opts.userID,
    signal: opts.signal,
    deadline: opts.deadline,
    services: opts.services,
    variables: variableAccess,
    now,
    random,
    emit,
    debug,
    completion(o: { model?: string } = {}): CompletionStream {
      const pieces: string[] = [];
      emit('completion', { state: 'start', ...(o.model ? { model: o.model } : {}) });
      let ended = false;
      return {
        content(piece) {
          if (ended) return;
          pieces.push(piece);
          emit('completion', { state: 'content', content: piece });
        },
        end(tokens) {
          if (ended) return;
          ended = true;
          setVariable('last_response', pieces.join(''));
          emit('completion', { state: 'end', ...(tokens ? { tokens } : {}) });
        },
      };
    },
    interpolate(template: string, encode?: (text: string, offset: number) => string) {
      return interpolate(template, variables, encode);
    },
    interpolateJson(value: unknown) {
      return interpolateJson(value, variables);
    },
    evaluate(source: string, inputDocument?: unknown, bindings?: Record<string, unknown>) {
      return opts.evaluator.evaluate(source, inputDocument === undefined ? variables : inputDocument, bindings);
    },
    customActionStops(name: string) {
      return opts.customActionStops(name);
    },
    resolveEntity(ref: string | EntitySpec): EntitySpec | null {
      return typeof ref === 'string' ? (program.entities.get(ref) ?? null) : ref;
    },
  } satisfies Omit<
    StepContext,
    | 'flowId'
    | 'frameStorage'
    | 'globalTrigger'
    | 'recordApiCall'
    | 'recordFunctionCall'
    | 'recordIntegrationCall'
    | 'recordAgentStep'
  >;

  const contextFor = (entry: CompiledStep, frame: StackFrame): StepContext => ({
    program,
    flowId: entry.flowId,
    userID: turnContext.userID,
    signal: turnContext.signal,
    deadline: turnContext.deadline,
    services: turnContext.services,
    frameStorage: frame.storage,
    variables: variableAccess,
    now,
    random,
    emit,
    debug,
    completion: turnContext.completion,
    interpolate: turnContext.interpolate,
    interpolateJson: turnContext.interpolateJson,
    evaluate: turnContext.evaluate,
    customActionStops: turnContext.customActionStops,
    resolveEntity: turnContext.resolveEntity,
    // Methods, not arrow functions: tsx (esbuild's keepNames) wraps every arrow function assigned
    // to a name in a __name call, a defineProperty per closure per step; a method has its name.
    globalTrigger(i): StepResult | null {
      const target = triggerFor(i);
      return target ? { kind: 'call', flow: target.flow, step: target.step, returnTo: entry.step.id } : null;
    },
    recordApiCall(call) {
      result.apiCalls.push({ ...call, stepID: entry.step.id, flowID: entry.flowId });
    },
    recordFunctionCall(call) {
      result.functionCalls.push({ ...call, stepID: entry.step.id, flowID: entry.flowId });
    },
    recordIntegrationCall(call) {
      result.integrationCalls.push({ ...call, stepID: entry.step.id, flowID: entry.flowId });
    },
    recordAgentStep(record) {
      result.agentSteps.push({ ...record, stepID: entry.step.id, flowID: entry.flowId });
    },
  });

  /** Applies a step's result to the stack; true when the turn goes on. */
  const apply = (outcome: StepResult, frame: StackFrame, entry: CompiledStep): boolean => {
    if ('path' in outcome && outcome.path) emit('path', { path: outcome.path });
    switch (outcome.kind) {
      case 'next':
        frame.nodeID = outcome.target ?? null;
        return true;
      case 'wait':
        frame.nodeID = entry.step.id;
        frame.storage.waiting = true;
        return false;
      case 'call':
        frame.nodeID = outcome.returnTo ?? null;
        enterFlow(outcome.flow, outcome.step);
        return true;
      case 'end':
        stack.length = 0;
        result.conversationEnded = true;
        return false;
    }
  };

  const runSteps = async () => {
    while (stack.length) {
      const frame = stack.at(-1)!;
      if (frame.nodeID === null) {
        popFrame();
        continue;
      }
      const entry = program.flows.get(frame.diagramID)?.steps.get(frame.nodeID);
      if (!entry) throw new Error(`no step "${frame.nodeID}" in flow "${frame.diagramID}"`);
      if (result.stepsRun >= opts.stepLimit) throw new StepLimitError(opts.stepLimit);
      if (opts.signal.aborted) throw new TurnTimeoutError(opts.timeLimitMs);
      result.stepsRun++;
      emit('block', { blockID: entry.step.id });
      const outcome = await untilAborted(
        traceStep(entry, 'run', () => entry.type.run(entry.step, contextFor(entry, frame))),
      );
      if (!apply(outcome, frame, entry)) return;
    }
  };

  try {
    if (!stackFits(stack, program)) {
      debug('The agent was published again and this conversation no longer fits it; starting over', 'version');
      stack.length = 0;
    }
    if (input.kind === 'launch') {
      stack.length = 0;
      state.storage = {};
      enterFlow(program.startFlow);
    } else if (stack.length === 0) {
      // A new user, or a conversation that ended: a trigger may start elsewhere, else the start flow.
      const target = triggerFor(input);
      if (target) enterFlow(target.flow, target.step);
      else enterFlow(program.startFlow);
    } else {
      const frame = stack.at(-1)!;
      const entry = frame.nodeID === null ? undefined : program.flows.get(frame.diagramID)?.steps.get(frame.nodeID);
      if (frame.storage.waiting && entry?.type.resume) {
        if (input.kind === 'event' && !triggerFor(input)) {
          // An event nothing listens to changes nothing: the user is still asked the same thing.
          debug(`No trigger for the event "${input.event}"`, 'event');
          return result;
        }
        delete frame.storage.waiting;
        result.stepsRun++;
        const resume = entry.type.resume;
        const outcome = await untilAborted(
          traceStep(entry, 'resume', () => resume.call(entry.type, entry.step, contextFor(entry, frame), input)),
        );
        if (!apply(outcome, frame, entry)) return result;
      } else {
        delete frame.storage.waiting;
      }
    }
    await runSteps();
    if (stack.length === 0) result.conversationEnded = true;
    // A conversation that ran out of steps (or was handed off) ends with an `end` trace, as the
    // original's does: its clients close the session on it.
    if (result.conversationEnded && !endSent) emit('end', null);
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    result.error = error;
    if (error instanceof StepLimitError) result.status = 'step-limit';
    else if (error instanceof TurnTimeoutError || (opts.signal.aborted && error.name === 'AbortError')) {
      result.status = 'timeout';
      result.error = new TurnTimeoutError(opts.timeLimitMs);
    } else result.status = 'failed';
  } finally {
    closed = true;
  }
  return result;
}
