import type { TurnRecord, TurnRecorder } from '../runtime/turn-record';
import type { UsageEvent } from './events';
import { recordUsageEvents, type UsageWriterDeps } from './usage-event-writer';

/**
 * The usage events of one turn (DECISIONS.md §4): an interaction by action type (its user counts
 * towards unique_users), the agent invocation with its success, every intent matched or given, and
 * every API, code-step and integration tool call with its success. Keys derive from the turn ID, so recording a turn
 * twice (a retried recorder) counts it once.
 */
export function usageEventsOfTurn(turn: TurnRecord): UsageEvent[] {
  const common = {
    projectId: turn.projectID,
    environmentId: turn.environmentID,
    occurredAt: turn.startedAt,
    userId: turn.userID,
  };
  const key = (suffix: string) => `turn:${turn.turnID}:${suffix}`;
  const events: UsageEvent[] = [
    { ...common, kind: 'interaction', type: turn.interactionType, idempotencyKey: key('interaction') },
  ];
  if (turn.agent) {
    events.push({
      ...common,
      kind: 'agent_invocation',
      agentId: turn.agent.agentID,
      name: turn.agent.name,
      success: turn.success,
      idempotencyKey: key('agent'),
    });
  }
  turn.intents.forEach((intent, i) => {
    events.push({ ...common, kind: 'intent', name: intent.name, idempotencyKey: key(`intent:${i}`) });
  });
  turn.apiCalls.forEach((call, i) => {
    // An API tool is an API step of the program: its step ID names it, its name labels it.
    events.push({
      ...common,
      kind: 'api_call',
      apiToolId: call.stepID,
      name: call.name,
      success: call.success,
      idempotencyKey: key(`api:${i}`),
    });
  });
  (turn.integrationCalls ?? []).forEach((call, i) => {
    events.push({
      ...common,
      kind: 'integration_call',
      integrationToolName: call.integrationToolName,
      success: call.success,
      idempotencyKey: key(`integration:${i}`),
    });
  });
  turn.functionCalls.forEach((call, i) => {
    events.push({
      ...common,
      kind: 'function_call',
      functionId: call.stepID,
      name: call.name,
      success: call.success,
      idempotencyKey: key(`function:${i}`),
    });
  });
  return events;
}

/**
 * The TurnRecorder of usage analytics: writes each turn's usage events (`usageEventsOfTurn`) in a
 * transaction of their own and announces the changed counters.
 */
export function createUsageTurnRecorder(deps: UsageWriterDeps): TurnRecorder {
  return {
    async record(turn) {
      await recordUsageEvents(deps, usageEventsOfTurn(turn));
    },
  };
}
