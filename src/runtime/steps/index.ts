import { createStepRegistry, type StepRegistry } from './registry';
import type { AnyStepType } from './step-type';
import { agentStep } from './types/agent';
import { aiStep } from './types/ai';
import { apiStep } from './types/api';
import { captureStep } from './types/capture';
import { choiceStep } from './types/choice';
import { codeStep } from './types/code';
import { conditionStep } from './types/condition';
import { customActionStep } from './types/custom-action';
import { endStep } from './types/end';
import { gotoStep } from './types/goto';
import { handoffStep } from './types/handoff';
import { knowledgeBaseStep } from './types/knowledge-base';
import { messageStep } from './types/message';
import { setStep } from './types/set';
import { waitStep } from './types/wait';

/** The built-in step types, in the order docs list them. */
export const builtInStepTypes: readonly AnyStepType[] = [
  messageStep,
  choiceStep,
  captureStep,
  conditionStep,
  setStep,
  apiStep,
  codeStep,
  waitStep,
  gotoStep,
  endStep,
  handoffStep,
  customActionStep,
  aiStep,
  knowledgeBaseStep,
  agentStep,
];

/** The built-in step types plus `extra` (a deployment's or a test's own). */
export function createDefaultStepRegistry(extra: readonly AnyStepType[] = []): StepRegistry {
  return createStepRegistry([...builtInStepTypes, ...extra]);
}
