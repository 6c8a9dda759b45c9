import type { TurnRecord, TurnRecorder } from '../runtime/turn-record';
import { type UsageEvent, usageLimits } from './events';
import {
  publishUsageCounters,
  type RecordedUsage,
  recordUsageEvents,
  type UsageWriterDeps,
  writeUsageEvents,
} from './usage-event-writer';

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
      apiToolId: call.toolID ?? call.stepID,
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
      functionId: call.toolID ?? call.stepID,
      name: call.name,
      success: call.success,
      idempotencyKey: key(`function:${i}`),
    });
  });
  if (turn.agent) {
    const agentID = turn.agent.agentID;
    (turn.agentSteps ?? []).forEach((step, i) => {
      // One invocation per agent step entered, beside the turn's own count of its program
      // (docs/agent-step.md "Usage and cost"); its success is counted when it is left cleanly.
      const agent = {
        ...common,
        kind: 'agent_invocation' as const,
        agentId: `${agentID}:${step.stepID}`,
        name: step.name,
      };
      if (step.event === undefined || step.invocationID === undefined) {
        // A record written before invocations were counted on entry: a step left, counted now.
        if (step.event !== 'entered') {
          events.push({ ...agent, success: step.success, idempotencyKey: key(`agent-step:${i}`) });
        }
        return;
      }
      if (step.event === 'entered') {
        events.push({ ...agent, success: false, idempotencyKey: `agent-step:${step.invocationID}:entered` });
      } else if (step.success) {
        events.push({
          ...agent,
          success: true,
          invocations: 0,
          // In the hour of its invocation, so an hour's successCount never exceeds its count.
          occurredAt: step.enteredAt === undefined ? common.occurredAt : new Date(step.enteredAt),
          idempotencyKey: `agent-step:${step.invocationID}:success`,
        });
      }
    });
  }
  return events;
}

/**
 * The TurnRecorder of usage analytics: writes each turn's usage events (`usageEventsOfTurn`) in a
 * transaction of their own (or, for a batch of turns, in the batch's transaction) and announces the
 * changed counters.
 */
export function createUsageTurnRecorder(deps: UsageWriterDeps): TurnRecorder {
  return {
    async record(turn) {
      await recordUsageEvents(deps, usageEventsOfTurn(turn));
    },

    async recordBatch(tx, turns) {
      // The events of many turns in a few multi-row statements, rollups updated once per batch.
      const events = turns.flatMap(usageEventsOfTurn);
      const recorded: RecordedUsage[] = [];
      for (let i = 0; i < events.length; i += usageLimits.writeBatch) {
        recorded.push(
          await writeUsageEvents(tx, events.slice(i, i + usageLimits.writeBatch), { provider: deps.db.provider }),
        );
      }
      return () => {
        if (deps.pubsub) for (const r of recorded) publishUsageCounters(deps.pubsub, r);
      };
    },
  };
}
