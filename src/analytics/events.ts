import { z } from 'zod';
import { idPattern } from '../lib/ids';
import { isStorableText, UNSTORABLE_TEXT_MESSAGE } from '../lib/storable-text';
import {
  type CreditType,
  creditTypes,
  emptyDimensions,
  hourOf,
  type UsageDimensions,
  type UsageEventKind,
} from './usage-metrics';

/**
 * A usage event as the usage event writer (./usage-event-writer.ts) takes it (docs/usage.md "Recording events"). The runtime,
 * evaluations and the knowledge base build these with resolved IDs; ingestion builds them from
 * the JSON of `POST /v1/usage/events`.
 */
interface UsageEventCommon {
  projectId: string;
  /** An environment ID of the project (not an alias: callers resolve aliases first). */
  environmentId: string;
  /** When it happened; default now. May lie in the past (late or backfilled events). */
  occurredAt?: Date;
  /** The end user; every event that names one counts towards unique_users of its hour. */
  userId?: string | null;
  /** The sender's ID of the event: an event recorded again with the same key is not counted twice. */
  idempotencyKey?: string | null;
}

export type UsageEvent = UsageEventCommon &
  (
    | { kind: 'interaction' /** The action type: launch, text, intent, button, event, no-reply... */; type: string }
    | {
        kind: 'credit';
        type: CreditType;
        model: string;
        tokens: number;
        /** The flow and step that called the model; '' or absent when not from a flow. */
        diagramId?: string;
        nodeId?: string;
      }
    | { kind: 'function_call'; functionId: string; name?: string; success: boolean }
    | { kind: 'api_call'; apiToolId: string; name?: string; success: boolean }
    | { kind: 'integration_call'; integrationToolName: string; success: boolean }
    | { kind: 'kb_document'; documentId: string }
    | { kind: 'transcript'; transcriptId?: string }
    | {
        kind: 'agent_invocation';
        agentId: string;
        name?: string;
        success: boolean;
        /**
         * How many invocations the event counts: 1 (the default), or 0 for the success of an
         * invocation counted by an earlier event (an agent step counted on entry, successful when left).
         */
        invocations?: 0 | 1;
      }
    | { kind: 'intent' /** The intent the NLU matched. */; name: string }
  );

/**
 * Length limits of what an event carries. They keep every counter key within PostgreSQL's B-tree
 * entry size, and they are the same for the writer and for ingestion.
 */
export const usageLimits = {
  actionType: 64,
  id: 128,
  name: 256,
  userId: 256,
  idempotencyKey: 128,
  tokens: 1_000_000_000,
  /** Events per ingestion request (POST /v1/usage/events). */
  batch: 1000,
  /** Events per `recordUsageEvents` call from inside Parley. */
  writeBatch: 10_000,
} as const;

/**
 * A string both engines store as sent: at most `max` characters, no NUL, well-formed Unicode
 * (otherwise PostgreSQL would fail the write, with a 500, rather than the request with a 400).
 */
export const storableText = (max: number) => z.string().max(max).refine(isStorableText, UNSTORABLE_TEXT_MESSAGE);

const text = (max: number) => storableText(max).min(1);
const optionalText = (max: number) => storableText(max).optional();
const tokens = z.number().int().min(0).max(usageLimits.tokens);

/** The fields each kind carries besides the common ones, as the writer names them. */
export const usageEventShapes = {
  interaction: { type: text(usageLimits.actionType) },
  credit: {
    type: z.enum(creditTypes),
    model: text(usageLimits.id),
    tokens,
    diagramId: optionalText(usageLimits.id),
    nodeId: optionalText(usageLimits.id),
  },
  function_call: { functionId: text(usageLimits.id), name: optionalText(usageLimits.name), success: z.boolean() },
  api_call: { apiToolId: text(usageLimits.id), name: optionalText(usageLimits.name), success: z.boolean() },
  integration_call: { integrationToolName: text(usageLimits.name), success: z.boolean() },
  kb_document: { documentId: text(usageLimits.id) },
  transcript: { transcriptId: text(usageLimits.id).optional() },
  agent_invocation: {
    agentId: text(usageLimits.id),
    name: optionalText(usageLimits.name),
    success: z.boolean(),
    invocations: z.union([z.literal(0), z.literal(1)]).optional(),
  },
  intent: { name: text(usageLimits.name) },
} satisfies Record<UsageEventKind, z.ZodRawShape>;

const commonShape = {
  projectId: z.string().regex(idPattern, 'must be a 24-character lowercase hex ID'),
  environmentId: z.string().regex(idPattern, 'must be a 24-character lowercase hex ID'),
  // Hours from 1970 on: the paging cursor packs the hour into the high bits of a safe integer.
  occurredAt: z.date().min(new Date(0)).max(new Date('2200-01-01T00:00:00Z')).optional(),
  userId: text(usageLimits.userId).nullish(),
  idempotencyKey: text(usageLimits.idempotencyKey).nullish(),
};

/** Checks what internal callers hand the writer, so a bug elsewhere cannot corrupt counters. */
export const usageEventSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('interaction'), ...commonShape, ...usageEventShapes.interaction }),
  z.object({ kind: z.literal('credit'), ...commonShape, ...usageEventShapes.credit }),
  z.object({ kind: z.literal('function_call'), ...commonShape, ...usageEventShapes.function_call }),
  z.object({ kind: z.literal('api_call'), ...commonShape, ...usageEventShapes.api_call }),
  z.object({ kind: z.literal('integration_call'), ...commonShape, ...usageEventShapes.integration_call }),
  z.object({ kind: z.literal('kb_document'), ...commonShape, ...usageEventShapes.kb_document }),
  z.object({ kind: z.literal('transcript'), ...commonShape, ...usageEventShapes.transcript }),
  z.object({ kind: z.literal('agent_invocation'), ...commonShape, ...usageEventShapes.agent_invocation }),
  z.object({ kind: z.literal('intent'), ...commonShape, ...usageEventShapes.intent }),
]);

/** An event as stored in UsageEvent: its kind's fields mapped onto the shared dimension columns. */
export interface UsageEventRow extends UsageDimensions {
  id: string;
  projectId: string;
  environmentId: string;
  kind: UsageEventKind;
  occurredAt: Date;
  hour: number;
  userId: string | null;
  quantity: number;
  success: boolean | null;
  idempotencyKey: string | null;
}

/**
 * The dimension values of the counter an event row increments. A transcript event keeps its
 * transcript ID in the event row, but transcripts are counted per hour, not per transcript.
 */
export function counterDimensionsOf(row: UsageEventRow): UsageDimensions {
  // The row holds the dimension columns itself: read, never copied (this runs for every event).
  return row.kind === 'transcript' ? emptyDimensions : row;
}

/**
 * The row of an event: its kind's fields mapped onto the dimension columns, quantity and success
 * (see metrics.ts `usageItemOf`). One object literal per kind, every member set in the same order: this runs
 * for every event of a batch, and spreading partial objects into one another cost more than the rest.
 */
export function toEventRow(event: UsageEvent, id: string, now: Date): UsageEventRow {
  const occurredAt = event.occurredAt ?? now;
  const row: UsageEventRow = {
    id,
    projectId: event.projectId,
    environmentId: event.environmentId,
    kind: event.kind,
    occurredAt,
    hour: hourOf(occurredAt),
    userId: event.userId ?? null,
    idempotencyKey: event.idempotencyKey ?? null,
    type: '',
    model: '',
    diagramId: '',
    nodeId: '',
    subjectId: '',
    name: '',
    quantity: 1,
    success: null,
  };
  switch (event.kind) {
    case 'interaction':
      row.type = event.type;
      break;
    case 'credit':
      row.type = event.type;
      row.model = event.model;
      row.diagramId = event.diagramId ?? '';
      row.nodeId = event.nodeId ?? '';
      row.quantity = event.tokens;
      break;
    case 'function_call':
      row.subjectId = event.functionId;
      row.name = event.name ?? '';
      row.success = event.success;
      break;
    case 'api_call':
      row.subjectId = event.apiToolId;
      row.name = event.name ?? '';
      row.success = event.success;
      break;
    case 'integration_call':
      row.subjectId = event.integrationToolName;
      row.success = event.success;
      break;
    case 'kb_document':
      row.subjectId = event.documentId;
      break;
    case 'transcript':
      row.subjectId = event.transcriptId ?? '';
      break;
    case 'agent_invocation':
      row.subjectId = event.agentId;
      row.name = event.name ?? '';
      row.success = event.success;
      row.quantity = event.invocations ?? 1;
      break;
    case 'intent':
      row.subjectId = event.name;
      break;
  }
  return row;
}
