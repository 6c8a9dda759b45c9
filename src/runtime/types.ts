/**
 * The shapes the runtime exchanges with clients (docs/runtime.md, ../shared/guide/RUNTIME-NOTES.md):
 * traces, actions and the user state. They follow the original service's public types so that its
 * clients work unchanged; Parley additions are extra fields or new trace types.
 */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** A trace as produced by the interpreter: `{type, payload, time}` plus, for custom actions, `paths`. */
export interface Trace {
  type: string;
  payload: unknown;
  /** Epoch milliseconds at creation. */
  time: number;
  /** Custom action traces: the requests that resume the conversation. */
  paths?: { event: { type: string } }[];
  defaultPath?: number;
}

/** A request's `action`, as validated at the edge (src/runtime/validation.ts). */
export interface RuntimeAction {
  type: string;
  payload?: unknown;
}

/** One entry of the conversation stack: a flow being run and the step to continue at. */
export interface StackFrame {
  /**
   * Only in states given out (src/runtime/service.ts `presentState`): the flow's ID again, as the
   * original's state frames carry both. Not stored; a state put back with it is accepted.
   */
  programID?: string;
  /** The flow's ID. */
  diagramID: string;
  /** The step to run (or, when `storage.waiting` is set, the step waiting for the user). */
  nodeID: string | null;
  /** Flow-scoped variables (kept for compatibility with the state shape; Parley's are global). */
  variables: Record<string, unknown>;
  storage: Record<string, unknown>;
}

/** `{stack, storage, variables}` per (project, environment, user). */
export interface RuntimeState {
  stack: StackFrame[];
  storage: Record<string, unknown>;
  variables: Record<string, unknown>;
}

export function emptyState(): RuntimeState {
  return { stack: [], storage: {}, variables: {} };
}

export function cloneState(state: RuntimeState): RuntimeState {
  return structuredClone(state);
}
