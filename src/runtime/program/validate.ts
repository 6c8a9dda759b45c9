import { issuesToDetails } from '../../lib/errors';
import { checkExpression, expressionVariables, jsonTemplateVariables, templateVariables } from '../expressions';
import { checkEntitySpec } from '../nlu/entities';
import type { StepRegistry } from '../steps/registry';
import type { StepReferences } from '../steps/step-type';
import { builtInVariables, type CompiledProgram, compileProgram } from './compile';
import { type AgentProgram, buildProgramSchema } from './schema';

/**
 * Checks a program before it is published and lists every problem, each at its JSON path:
 * schema violations, duplicate IDs and names, dangling transitions, unknown variables, intents,
 * entities and flows, invalid expressions and patterns, and (as warnings) steps and flows that
 * nothing leads to.
 */

export interface ProgramProblem {
  severity: 'error' | 'warning';
  /** Dotted JSON path, e.g. `flows.0.steps.2.next`. */
  path: string;
  message: string;
}

export interface ProgramCheck {
  /** The parsed program when it has no errors (warnings allowed). */
  program: AgentProgram | null;
  compiled: CompiledProgram | null;
  errors: ProgramProblem[];
  warnings: ProgramProblem[];
}

const schemaCache = new WeakMap<StepRegistry, ReturnType<typeof buildProgramSchema>>();

function programSchema(registry: StepRegistry) {
  let schema = schemaCache.get(registry);
  if (!schema) {
    schema = buildProgramSchema(registry);
    schemaCache.set(registry, schema);
  }
  return schema;
}

export function checkProgram(raw: unknown, registry: StepRegistry): ProgramCheck {
  const parsed = programSchema(registry).safeParse(raw);
  if (!parsed.success) {
    const errors = issuesToDetails(parsed.error.issues).map((d) => ({
      severity: 'error' as const,
      path: d.path,
      message: d.message,
    }));
    return { program: null, compiled: null, errors, warnings: [] };
  }
  const program = parsed.data;
  const compiled = compileProgram(program, registry);
  const problems: ProgramProblem[] = [];
  const error = (path: string, message: string) => problems.push({ severity: 'error', path, message });
  const warning = (path: string, message: string) => problems.push({ severity: 'warning', path, message });

  // Names and IDs.
  const builtIns = new Set<string>(builtInVariables);
  const variables = new Set<string>();
  (program.variables ?? []).forEach((v, i) => {
    if (builtIns.has(v.name)) error(`variables.${i}.name`, `"${v.name}" is a built-in variable; choose another name`);
    else if (variables.has(v.name)) error(`variables.${i}.name`, `duplicate variable "${v.name}"`);
    variables.add(v.name);
  });
  const knownVariables = new Set([...variables, ...builtIns]);
  const entities = new Set<string>();
  (program.entities ?? []).forEach((e, i) => {
    if (entities.has(e.name)) error(`entities.${i}.name`, `duplicate entity "${e.name}"`);
    entities.add(e.name);
    const { name: _name, ...spec } = e;
    const problem = checkEntitySpec(spec);
    if (problem) error(`entities.${i}.pattern`, problem);
    if (e.type === 'regex' && !e.pattern) error(`entities.${i}.pattern`, 'a regex entity needs a pattern');
    if (e.type === 'list' && !e.values?.length) error(`entities.${i}.values`, 'a list entity needs values');
  });
  const intents = new Set<string>();
  (program.intents ?? []).forEach((intent, i) => {
    if (intents.has(intent.name)) error(`intents.${i}.name`, `duplicate intent "${intent.name}"`);
    intents.add(intent.name);
    const declared = new Set(intent.entities ?? []);
    (intent.entities ?? []).forEach((name, j) => {
      if (!entities.has(name)) error(`intents.${i}.entities.${j}`, `unknown entity "${name}"`);
    });
    intent.utterances.forEach((u, j) => {
      for (const placeholder of templateVariables(u)) {
        if (!declared.has(placeholder)) {
          error(`intents.${i}.utterances.${j}`, `placeholder {${placeholder}} is not one of the intent's entities`);
        }
      }
    });
  });
  const flowIds = new Set<string>();
  const stepLocations = new Map<string, string>();
  program.flows.forEach((flow, f) => {
    if (flowIds.has(flow.id)) error(`flows.${f}.id`, `duplicate flow ID "${flow.id}"`);
    flowIds.add(flow.id);
    flow.steps.forEach((step, s) => {
      const where = `flows.${f}.steps.${s}`;
      if (stepLocations.has(step.id)) {
        error(
          `${where}.id`,
          `duplicate step ID "${step.id}" (also at ${stepLocations.get(step.id)}); step IDs are unique in a program`,
        );
      } else stepLocations.set(step.id, where);
    });
  });
  if (!flowIds.has(program.startFlow)) error('startFlow', `unknown flow "${program.startFlow}"`);

  const checkFlowTarget = (path: string, flow: string, step?: string) => {
    const target = compiled.flows.get(flow);
    if (!target) {
      error(path, `unknown flow "${flow}"`);
      return;
    }
    if (step !== undefined && !target.steps.has(step)) error(path, `flow "${flow}" has no step "${step}"`);
  };

  (program.triggers ?? []).forEach((trigger, i) => {
    if (Boolean(trigger.intent) === Boolean(trigger.event)) {
      error(`triggers.${i}`, 'a trigger names exactly one of intent or event');
    }
    if (trigger.intent && !intents.has(trigger.intent))
      error(`triggers.${i}.intent`, `unknown intent "${trigger.intent}"`);
    checkFlowTarget(`triggers.${i}.goTo`, trigger.goTo.flow, trigger.goTo.step);
  });

  // Steps: transitions, references, their own checks.
  const flowEdges = new Map<string, Set<string>>();
  program.flows.forEach((flow, f) => {
    const compiledFlow = compiled.flows.get(flow.id);
    if (!compiledFlow || compiledFlow.index !== f) return;
    if (!compiledFlow.steps.has(flow.start)) error(`flows.${f}.start`, `flow "${flow.id}" has no step "${flow.start}"`);
    const calls = new Set<string>();
    flowEdges.set(flow.id, calls);
    flow.steps.forEach((step, s) => {
      const where = `flows.${f}.steps.${s}`;
      const type = registry.get(step.type);
      if (!type) return;
      for (const exit of type.exits(step)) {
        if (exit.target === undefined || compiledFlow.steps.has(exit.target)) continue;
        const elsewhere = compiled.steps.get(exit.target);
        error(
          `${where}.${exit.field}`,
          elsewhere
            ? `dangling transition: step "${exit.target}" is in flow "${elsewhere.flowId}", not "${flow.id}"; use a goto step with flow`
            : `dangling transition: no step "${exit.target}"`,
        );
      }
      const refs: StepReferences = type.references?.(step) ?? {};
      for (const t of refs.templates ?? []) {
        for (const name of templateVariables(t.text)) {
          if (!knownVariables.has(name)) error(`${where}.${t.field}`, `unknown variable "${name}"`);
        }
      }
      for (const t of refs.jsonTemplates ?? []) {
        for (const name of jsonTemplateVariables(t.value)) {
          if (!knownVariables.has(name)) error(`${where}.${t.field}`, `unknown variable "${name}"`);
        }
      }
      for (const e of refs.expressions ?? []) {
        const syntax = checkExpression(e.source);
        if (syntax) {
          error(`${where}.${e.field}`, syntax);
          continue;
        }
        for (const name of expressionVariables(e.source)) {
          if (!knownVariables.has(name)) error(`${where}.${e.field}`, `unknown variable "${name}"`);
        }
      }
      for (const w of refs.writes ?? []) {
        if (!variables.has(w.name)) {
          error(
            `${where}.${w.field}`,
            builtIns.has(w.name)
              ? `"${w.name}" is a built-in variable and cannot be assigned`
              : `unknown variable "${w.name}"`,
          );
        }
      }
      for (const i of refs.intents ?? []) {
        if (!intents.has(i.name)) error(`${where}.${i.field}`, `unknown intent "${i.name}"`);
      }
      for (const e of refs.entities ?? []) {
        if (!entities.has(e.name)) error(`${where}.${e.field}`, `unknown entity "${e.name}"`);
      }
      for (const target of refs.flows ?? []) {
        checkFlowTarget(`${where}.${target.field}`, target.flow, target.step);
        calls.add(target.flow);
      }
      for (const p of type.validate?.(step, { program: compiled, flowId: flow.id }) ?? []) {
        problems.push({ severity: p.severity, path: p.field ? `${where}.${p.field}` : where, message: p.message });
      }
    });
  });

  // Reachability: flows from the start flow and the triggers; steps from their flow's start.
  const reachableFlows = new Set<string>();
  const pending = [program.startFlow, ...(program.triggers ?? []).map((t) => t.goTo.flow)];
  while (pending.length) {
    const id = pending.pop()!;
    if (reachableFlows.has(id) || !compiled.flows.has(id)) continue;
    reachableFlows.add(id);
    pending.push(...(flowEdges.get(id) ?? []));
  }
  const entryStepsByFlow = new Map<string, Set<string>>();
  const addEntry = (flow: string, step: string | undefined) => {
    const compiledFlow = compiled.flows.get(flow);
    if (!compiledFlow) return;
    const set = entryStepsByFlow.get(flow) ?? new Set<string>();
    set.add(step ?? compiledFlow.start);
    entryStepsByFlow.set(flow, set);
  };
  for (const flow of compiled.flows.values()) addEntry(flow.id, undefined);
  for (const t of program.triggers ?? []) addEntry(t.goTo.flow, t.goTo.step);
  for (const entry of compiled.steps.values()) {
    for (const target of entry.type.references?.(entry.step).flows ?? []) addEntry(target.flow, target.step);
  }
  program.flows.forEach((flow, f) => {
    const compiledFlow = compiled.flows.get(flow.id);
    if (!compiledFlow || compiledFlow.index !== f) return;
    if (!reachableFlows.has(flow.id)) {
      warning(`flows.${f}`, `flow "${flow.id}" is never run: no goto step or trigger leads to it`);
      return;
    }
    const seen = new Set<string>();
    const queue = [...(entryStepsByFlow.get(flow.id) ?? [])];
    while (queue.length) {
      const id = queue.pop()!;
      const entry = compiledFlow.steps.get(id);
      if (!entry || seen.has(id)) continue;
      seen.add(id);
      for (const exit of entry.type.exits(entry.step)) if (exit.target !== undefined) queue.push(exit.target);
    }
    flow.steps.forEach((step, s) => {
      if (!seen.has(step.id) && compiledFlow.steps.get(step.id)?.index === s) {
        warning(`flows.${f}.steps.${s}`, `unreachable step "${step.id}": no transition leads to it`);
      }
    });
  });

  const errors = problems.filter((p) => p.severity === 'error');
  const warnings = problems.filter((p) => p.severity === 'warning');
  return errors.length ? { program: null, compiled: null, errors, warnings } : { program, compiled, errors, warnings };
}
