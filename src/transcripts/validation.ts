import { z } from 'zod';
import { idSchema } from '../admin/validation';
import { parseTimestamp, timestampProblemMessage } from '../lib/time';

/**
 * The rules of SPEC.md and DECISIONS.md §5 for transcripts, properties and values, as zod schemas.
 * REST route schemas (strict bodies) and the Pothos arguments use the same ones, so both
 * interfaces refuse the same inputs with the same messages.
 */

export { idSchema };

/** A date-time as SPEC.md "Timestamps" wants it; GraphQL's DateTime scalar hands over a Date already. */
export const timestampSchema = z
  .union([z.date(), z.string()], { error: 'must be an ISO 8601 date-time string' })
  .transform((value, ctx) => {
    if (value instanceof Date) return value;
    const parsed = parseTimestamp(value);
    if (!parsed.ok) {
      ctx.addIssue({ code: 'custom', message: timestampProblemMessage[parsed.problem] });
      return z.NEVER;
    }
    return parsed.date;
  });

export const propertyTypes = ['string', 'number', 'boolean'] as const;
export type PropertyType = (typeof propertyTypes)[number];
export const propertyTypeSchema = z.enum(propertyTypes);

/** Names of properties and evaluations: 1 to 100 characters (surrounding blanks do not count). */
export const nameSchema = z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters');

/** A value is sent as a string; whether it parses as the property's type is checked against the property. */
export const propertyValueTextSchema = z.string().max(10_000, 'must be at most 10000 characters');
export const metadataSchema = z.record(z.string(), z.unknown(), { error: 'must be an object or null' }).nullable();

export const createPropertyBody = z.strictObject({ projectID: idSchema, name: nameSchema, type: propertyTypeSchema });
export const updatePropertyBody = z.strictObject({ name: nameSchema.optional(), type: propertyTypeSchema.optional() });
export const setPropertyValueBody = z.strictObject({
  propertyID: idSchema,
  transcriptID: idSchema,
  value: propertyValueTextSchema,
  metadata: metadataSchema.optional(),
});

// ── Search ──────────────────────────────────────────────────────────────────────────────────────

export const filterOps = [
  'eq',
  'neq',
  'gt',
  'gte',
  'lt',
  'lte',
  'between',
  'in',
  'nin',
  'contains',
  'exists',
  'not_exists',
] as const;
export type FilterOp = (typeof filterOps)[number];

const scalar = z.union([z.string().max(10_000), z.number(), z.boolean()], {
  error: 'must be a string, a number or a boolean',
});
export type FilterScalar = z.infer<typeof scalar>;

export const transcriptFilterSchema = z
  .object({
    id: idSchema,
    op: z.enum(filterOps),
    value: z.unknown().optional(),
  })
  .superRefine((filter, ctx) => {
    const at = (message: string) => ctx.addIssue({ code: 'custom', path: ['value'], message });
    const value = filter.value;
    switch (filter.op) {
      case 'exists':
      case 'not_exists':
        if (value !== undefined && value !== null) at(`must be absent for "${filter.op}"`);
        return;
      case 'between':
        if (!Array.isArray(value) || value.length !== 2 || !value.every((v) => scalar.safeParse(v).success))
          at('must be an array of two values [low, high] for "between"');
        return;
      case 'in':
      case 'nin':
        if (
          !Array.isArray(value) ||
          value.length < 1 ||
          value.length > 100 ||
          !value.every((v) => scalar.safeParse(v).success)
        )
          at(`must be an array of 1 to 100 strings, numbers or booleans for "${filter.op}"`);
        return;
      case 'contains':
        if (typeof value !== 'string' || value.length === 0) at('must be a non-empty string for "contains"');
        return;
      default:
        if (!scalar.safeParse(value).success) at(`must be a string, a number or a boolean for "${filter.op}"`);
    }
  });
export type TranscriptFilter = { id: string; op: FilterOp; value?: unknown };

const searchText = z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters');

/**
 * The search criteria of DECISIONS.md §5; every member is optional, null counts as absent. SPEC.md
 * does not close this body, so members Parley does not know are accepted and ignored.
 */
export const searchCriteriaSchema = z.object({
  sessionID: searchText.nullish(),
  userID: searchText.nullish(),
  environmentID: searchText.nullish(),
  startDate: timestampSchema.nullish(),
  endDate: timestampSchema.nullish(),
  updatedAfter: timestampSchema.nullish(),
  updatedBefore: timestampSchema.nullish(),
  ended: z.boolean().nullish(),
  filters: z.array(transcriptFilterSchema).max(50, 'must have at most 50 filters').nullish(),
});
export type SearchCriteria = z.output<typeof searchCriteriaSchema>;

/**
 * `customTraceTypes` of a transcript read: at most 50 trace type names of 1 to 100 characters, in
 * REST (`?customTraceTypes=a&customTraceTypes[]=b`) and GraphQL alike.
 */
export const customTraceTypesSchema = z
  .array(z.string().min(1, 'must not be empty').max(100, 'must be at most 100 characters'))
  .max(50, 'must have at most 50 items');

export const sortOrders = ['ASC', 'DESC'] as const;
export type SortOrder = (typeof sortOrders)[number];
export const takeSchema = z
  .number()
  .int('must be an integer')
  .min(1, 'must be at least 1')
  .max(100, 'must be at most 100');
export const skipSchema = z.number().int('must be an integer').min(0, 'must be at least 0');

// ── Ingestion ───────────────────────────────────────────────────────────────────────────────────

export const logTypes = ['action', 'trace', 'end'] as const;
export type LogType = (typeof logTypes)[number];

export const logInputSchema = z
  .strictObject({
    type: z.enum(logTypes),
    data: z.unknown(),
    createdAt: timestampSchema.nullish(),
  })
  .superRefine((log, ctx) => {
    const data = log.data;
    if (log.type === 'trace') {
      const ok =
        typeof data === 'object' &&
        data !== null &&
        !Array.isArray(data) &&
        typeof (data as { type?: unknown }).type === 'string';
      if (!ok)
        ctx.addIssue({ code: 'custom', path: ['data'], message: 'a trace must be an object with a string "type"' });
    } else if (log.type === 'action') {
      const ok = typeof data === 'object' && data !== null && !Array.isArray(data);
      if (!ok)
        ctx.addIssue({
          code: 'custom',
          path: ['data'],
          message: 'an action must be an object such as {"type": "text", "payload": "hi"}',
        });
    }
  });
/** A log to append. `id` lets the runtime use its turn ID for the action that starts a turn. */
export type LogInput = { id?: string; type: LogType; data: unknown; createdAt?: Date | null };

/** The stored `traceType` of a log: a trace's `data.type` (empty when it has none), null for other logs. */
export function traceTypeOf(log: Pick<LogInput, 'type' | 'data'>): string | null {
  return log.type === 'trace' && log.data && typeof log.data === 'object'
    ? String((log.data as { type?: unknown }).type ?? '')
    : null;
}

export const logsSchema = z.array(logInputSchema).max(1000, 'must have at most 1000 logs per request');

export const sessionIdSchema = z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters');
export const userIdSchema = z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters');
export const environmentRefSchema = z.string().min(1, 'must not be empty').max(64, 'must be at most 64 characters');

export const createTranscriptBody = z.strictObject({
  projectID: idSchema,
  sessionID: sessionIdSchema,
  userID: userIdSchema.nullish(),
  environment: environmentRefSchema.nullish(),
  logs: logsSchema.nullish(),
});

export const appendLogsBody = z.strictObject({ logs: logsSchema.min(1, 'must have at least 1 item(s)') });

// ── Redaction patterns ──────────────────────────────────────────────────────────────────────────

export const redactionPatternSchema = z.string().min(1, 'must not be empty').max(500, 'must be at most 500 characters');
export const redactionPatternsSchema = z.array(redactionPatternSchema).max(20, 'must have at most 20 patterns');
export const setRedactionPatternsBody = z.strictObject({ patterns: redactionPatternsSchema });
