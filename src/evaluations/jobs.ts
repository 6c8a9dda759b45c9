import type { JobRunner } from '../jobs/runner';
import { EVALUATION_QUEUE } from './runs';
import { createEvaluationJobHandler, type EvaluationDeps, failAbandonedEvaluationRun } from './service';

/**
 * Registers the evaluation job handler on an instance's runner: it executes the runs that
 * ./runs.ts enqueues, and records `failed` on a run whose job the runner gave up on.
 */
export function registerEvaluationJobs(jobs: JobRunner, deps: EvaluationDeps): void {
  jobs.register(EVALUATION_QUEUE, createEvaluationJobHandler(deps), {
    onGiveUp: (job) => failAbandonedEvaluationRun(deps, job),
  });
}
