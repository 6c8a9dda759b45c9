/**
 * The vocabulary of usage analytics: the ten query names of SPEC.md "Usage", the kinds of usage
 * event that feed them, and how a stored counter row becomes a result item. docs/usage.md is the
 * user-facing description of the same tables.
 */

/** The `name` of a usage query, in SPEC.md's order. Also the `metric` of a counter row. */
export const usageQueryNames = [
  'interactions',
  'top_intents',
  'unique_users',
  'credit_usage',
  'function_usage',
  'api_calls',
  'kb_documents',
  'integrations',
  'transcripts',
  'agent_usage',
] as const;
export type UsageQueryName = (typeof usageQueryNames)[number];

/** The query names whose result is `items[]` with a `cursor` (all but top_intents). */
export type ItemQueryName = Exclude<UsageQueryName, 'top_intents'>;

/** What a usage event records. Every kind may also carry a user ID, which feeds unique_users. */
export const usageEventKinds = [
  'interaction',
  'credit',
  'function_call',
  'api_call',
  'integration_call',
  'kb_document',
  'transcript',
  'agent_invocation',
  'intent',
] as const;
export type UsageEventKind = (typeof usageEventKinds)[number];

/** The query whose counters an event of each kind increments. */
export const metricOfKind: Record<UsageEventKind, UsageQueryName> = {
  interaction: 'interactions',
  credit: 'credit_usage',
  function_call: 'function_usage',
  api_call: 'api_calls',
  integration_call: 'integrations',
  kb_document: 'kb_documents',
  transcript: 'transcripts',
  agent_invocation: 'agent_usage',
  intent: 'top_intents',
};

export const creditTypes = ['llm-input', 'llm-output'] as const;
export type CreditType = (typeof creditTypes)[number];

/**
 * The dimension columns of a counter row. Each metric uses some of them (the rest hold ''); the
 * meaning of `subjectId` and `name` depends on the metric (see `usageItemOf`).
 */
export interface UsageDimensions {
  type: string;
  model: string;
  diagramId: string;
  nodeId: string;
  subjectId: string;
  name: string;
}

export const emptyDimensions: UsageDimensions = {
  type: '',
  model: '',
  diagramId: '',
  nodeId: '',
  subjectId: '',
  name: '',
};

/** A counter row of one hour, as read from UsageRollup. */
export interface UsageCounterRow extends UsageDimensions {
  projectId: string;
  environmentId: string;
  hour: number;
  count: number;
  successCount: number;
}

interface UsageItemBase {
  /** The start of the UTC hour. */
  period: Date;
  projectID: string;
  environmentID: string;
  count: number;
}

export interface InteractionsItem extends UsageItemBase {
  type: string;
}
export type UniqueUsersItem = UsageItemBase;
export interface CreditUsageItem extends UsageItemBase {
  diagramID: string;
  nodeID: string;
  model: string;
  type: string;
}
export interface FunctionUsageItem extends UsageItemBase {
  functionID: string;
  name: string;
  successCount: number;
}
export interface ApiCallsItem extends UsageItemBase {
  apiToolID: string;
  name: string;
  successCount: number;
}
export interface KbDocumentsItem extends UsageItemBase {
  documentID: string;
}
export interface IntegrationsItem extends UsageItemBase {
  integrationToolName: string;
  successCount: number;
}
export type TranscriptsItem = UsageItemBase;
export interface AgentUsageItem extends UsageItemBase {
  agentID: string;
  name: string;
  successCount: number;
}

export interface UsageItemOf {
  interactions: InteractionsItem;
  unique_users: UniqueUsersItem;
  credit_usage: CreditUsageItem;
  function_usage: FunctionUsageItem;
  api_calls: ApiCallsItem;
  kb_documents: KbDocumentsItem;
  integrations: IntegrationsItem;
  transcripts: TranscriptsItem;
  agent_usage: AgentUsageItem;
}

export const hourMs = 3_600_000;

/** The UTC hour (whole hours since the epoch) that holds `date`. */
export function hourOf(date: Date | number): number {
  return Math.floor((typeof date === 'number' ? date : date.getTime()) / hourMs);
}

/** The UTC day (whole days since the epoch) that holds an hour. */
export function dayOfHour(hour: number): number {
  return Math.floor(hour / 24);
}

export function periodOf(hour: number): Date {
  return new Date(hour * hourMs);
}

function base(row: UsageCounterRow): UsageItemBase {
  return { period: periodOf(row.hour), projectID: row.projectId, environmentID: row.environmentId, count: row.count };
}

/** How a counter row becomes the result item of each query (SPEC.md "Usage result items"). */
export const usageItemOf: { [N in ItemQueryName]: (row: UsageCounterRow) => UsageItemOf[N] } = {
  interactions: (r) => ({ ...base(r), type: r.type }),
  unique_users: base,
  credit_usage: (r) => ({ ...base(r), diagramID: r.diagramId, nodeID: r.nodeId, model: r.model, type: r.type }),
  function_usage: (r) => ({ ...base(r), functionID: r.subjectId, name: r.name, successCount: r.successCount }),
  api_calls: (r) => ({ ...base(r), apiToolID: r.subjectId, name: r.name, successCount: r.successCount }),
  kb_documents: (r) => ({ ...base(r), documentID: r.subjectId }),
  integrations: (r) => ({ ...base(r), integrationToolName: r.subjectId, successCount: r.successCount }),
  transcripts: base,
  agent_usage: (r) => ({ ...base(r), agentID: r.subjectId, name: r.name, successCount: r.successCount }),
};
