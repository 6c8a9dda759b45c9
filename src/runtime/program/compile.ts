import type { EntitySpec } from '../nlu/entities';
import { createIntentMatcher, type IntentMatcher } from '../nlu/matcher';
import type { StepRegistry } from '../steps/registry';
import type { AnyStepType, StepBase } from '../steps/step-type';
import { type AgentProgram, defaultConfidenceThreshold, type ProgramFlow } from './schema';

/**
 * A program indexed for running: flows and steps by ID, variables with defaults, the intent
 * matcher and the triggers. Built once per published version and cached (versions never change).
 */

/** Variables every agent has, kept up to date by the runtime (RUNTIME-NOTES.md "State"). */
export const builtInVariables = [
  'user_id',
  'sessions',
  'timestamp',
  'last_utterance',
  'last_event',
  'intent_confidence',
  'last_response',
] as const;

export interface CompiledStep {
  step: StepBase;
  type: AnyStepType;
  flowId: string;
  /** Index within its flow, for problem paths. */
  index: number;
}

export interface CompiledFlow {
  id: string;
  name: string;
  start: string;
  index: number;
  source: ProgramFlow;
  steps: Map<string, CompiledStep>;
}

export interface TriggerTarget {
  flow: string;
  step?: string;
}

export interface AgentIdentity {
  agentID: string;
  agentName: string;
  versionID: string;
  versionNumber: number;
}

export interface CompiledProgram {
  source: AgentProgram;
  identity: AgentIdentity | null;
  startFlow: string;
  flows: Map<string, CompiledFlow>;
  /** Every step by ID (step IDs are unique in a program). */
  steps: Map<string, CompiledStep>;
  /** Declared variables and their defaults (null when none). */
  variables: Map<string, unknown>;
  entities: Map<string, EntitySpec>;
  intents: Set<string>;
  matcher: IntentMatcher;
  confidenceThreshold: number;
  intentTriggers: Map<string, TriggerTarget>;
  eventTriggers: Map<string, TriggerTarget>;
}

/**
 * Indexes a program that passed the schema. Lookups of things that do not exist (a step type the
 * registry lacks) are left out; `checkProgram` reports them before a program is published.
 */
export function compileProgram(
  program: AgentProgram,
  registry: StepRegistry,
  identity: AgentIdentity | null = null,
): CompiledProgram {
  const flows = new Map<string, CompiledFlow>();
  const steps = new Map<string, CompiledStep>();
  program.flows.forEach((flow, flowIndex) => {
    const compiled: CompiledFlow = {
      id: flow.id,
      name: flow.name ?? flow.id,
      start: flow.start,
      index: flowIndex,
      source: flow,
      steps: new Map(),
    };
    flow.steps.forEach((step, index) => {
      const type = registry.get(step.type);
      if (!type) return;
      const entry: CompiledStep = { step, type, flowId: flow.id, index };
      if (!compiled.steps.has(step.id)) compiled.steps.set(step.id, entry);
      if (!steps.has(step.id)) steps.set(step.id, entry);
    });
    if (!flows.has(flow.id)) flows.set(flow.id, compiled);
  });
  const entities = new Map<string, EntitySpec>();
  for (const { name, ...spec } of program.entities ?? []) entities.set(name, spec);
  const intentTriggers = new Map<string, TriggerTarget>();
  const eventTriggers = new Map<string, TriggerTarget>();
  for (const trigger of program.triggers ?? []) {
    if (trigger.intent && !intentTriggers.has(trigger.intent)) intentTriggers.set(trigger.intent, trigger.goTo);
    if (trigger.event && !eventTriggers.has(trigger.event)) eventTriggers.set(trigger.event, trigger.goTo);
  }
  const intents = program.intents ?? [];
  return {
    source: program,
    identity,
    startFlow: program.startFlow,
    flows,
    steps,
    variables: new Map((program.variables ?? []).map((v) => [v.name, v.default ?? null])),
    entities,
    intents: new Set(intents.map((i) => i.name)),
    matcher: createIntentMatcher(intents, entities),
    confidenceThreshold: program.nlu?.confidenceThreshold ?? defaultConfidenceThreshold,
    intentTriggers,
    eventTriggers,
  };
}
