import type { AppPubSub } from '../lib/pubsub';
import type { RecordTx, TurnRecord, TurnRecorder } from '../runtime/turn-record';
import { type UsageEvent, usageLimits } from './events';
import {
  publishUsageCounters,
  type RecordedUsage,
  recordUsageEvents,
  type UsageTx,
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
 * The writer's transaction client (`UsageTx`: the two raw-statement methods it calls) over a
 * batch's driver transaction: the writer's statements, already in the engine's dialect, run on
 * the batch's connection, with no Prisma operation.
 */
function usageTxOf(tx: RecordTx): UsageTx {
  const client = {
    $queryRawUnsafe: (sql: string, ...params: unknown[]) => tx.all(sql, params),
    $executeRawUnsafe: (sql: string, ...params: unknown[]) => tx.run(sql, params),
  };
  // The writer awaits these and uses nothing of Prisma's promise but its result.
  return client as unknown as UsageTx;
}

/** The usage events a batch's recorders added, written by one writer call before the batch commits. */
const batchUsage = new WeakMap<RecordTx, { events: UsageEvent[]; pubsubs: Set<AppPubSub> }>();

/**
 * Adds usage events to the batch's one usage write (`tx.beforeCommit`): the turns' own events
 * (`createUsageTurnRecorder`) and those of the transcripts the batch created
 * (src/transcripts/transcript-turn-recorder.ts) go in the same statements, with the counters
 * updated once. `pubsub` is told the changed counters after the commit.
 */
export function addBatchUsage(tx: RecordTx, events: readonly UsageEvent[], pubsub?: AppPubSub): void {
  let entry = batchUsage.get(tx);
  if (!entry) {
    const added = { events: [] as UsageEvent[], pubsubs: new Set<AppPubSub>() };
    entry = added;
    batchUsage.set(tx, added);
    tx.beforeCommit(async () => {
      const recorded: RecordedUsage[] = [];
      for (let i = 0; i < added.events.length; i += usageLimits.writeBatch) {
        recorded.push(
          await writeUsageEvents(usageTxOf(tx), added.events.slice(i, i + usageLimits.writeBatch), {
            provider: tx.provider,
          }),
        );
      }
      return () => {
        for (const p of added.pubsubs) for (const r of recorded) publishUsageCounters(p, r);
      };
    });
  }
  entry.events.push(...events);
  if (pubsub) entry.pubsubs.add(pubsub);
}

/**
 * The TurnRecorder of usage analytics: writes each turn's usage events (`usageEventsOfTurn`) in a
 * transaction of their own (or, for a batch of turns, in the batch's one usage write, see
 * `addBatchUsage`) and announces the changed counters.
 */
export function createUsageTurnRecorder(deps: UsageWriterDeps): TurnRecorder {
  return {
    async record(turn) {
      await recordUsageEvents(deps, usageEventsOfTurn(turn));
    },

    async recordBatch(tx, turns) {
      // The events of many turns in a few multi-row statements, rollups updated once per batch;
      // the counters are announced by the write itself once the batch commits.
      addBatchUsage(tx, turns.flatMap(usageEventsOfTurn), deps.pubsub);
      return () => {};
    },
  };
}
