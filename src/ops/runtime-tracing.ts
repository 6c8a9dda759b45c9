import type { CompiledStep } from '../runtime/program/compile';
import { tracingActive, withSpan } from './tracing';

/**
 * Spans of the runtime: one per turn, with one child per step it runs. Kept here so the runtime
 * modules need one call each and no OpenTelemetry import.
 *
 * While no SDK is registered these call `run` directly: a no-op span still costs the API's
 * startActiveSpan, a context switch, an attributes object and two promise hops per step, which on
 * a five-step turn of in-memory steps is measurable (docs/performance.md, "Turn front").
 */

export function traceTurn<T>(
  turnId: string,
  request: { projectId: string; environment: string; action: { type: string } },
  run: () => Promise<T>,
): Promise<T> {
  if (!tracingActive()) return run();
  return withSpan(
    'runtime.turn',
    {
      'parley.turn.id': turnId,
      'parley.project.id': request.projectId,
      'parley.environment': request.environment,
      'parley.action.type': request.action.type,
    },
    () => run(),
  );
}

export function traceStep<T>(entry: CompiledStep, phase: 'run' | 'resume', run: () => Promise<T>): Promise<T> {
  if (!tracingActive()) return run();
  return withSpan(
    `runtime.step ${entry.type.type}`,
    {
      'parley.step.id': entry.step.id,
      'parley.step.type': entry.type.type,
      'parley.step.phase': phase,
      'parley.flow.id': entry.flowId,
    },
    () => run(),
  );
}
