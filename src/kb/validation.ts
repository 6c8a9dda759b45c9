import { z } from 'zod';
import { idSchema } from '../admin/validation';
import { isStorableText, UNSTORABLE_TEXT_MESSAGE, unstorablePathOf } from '../lib/storable-text';
import { tagFilterSchema } from './tags';

/**
 * The rules of knowledge-base requests (SPEC.md "Knowledge base", DECISIONS.md §7), shared by the
 * GraphQL arguments and the REST routes so both interfaces refuse the same things the same way.
 */

export const kbLimits = {
  /** A document's metadata, as JSON text (DECISIONS.md §7). */
  metadataBytes: 10 * 1024,
  chunkSize: { min: 500, max: 1500, default: 1000 },
  chunkLimit: { min: 1, max: 10, default: 2 },
  question: 4000,
  /** Rows of one table upload (one chunk each). */
  tableRows: 10_000,
  tableFields: 100,
  fieldName: 100,
  name: 255,
  url: 2048,
  system: 10_000,
  model: 200,
  listLimit: { max: 100, default: 10 },
} as const;

const byteLength = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');

/** Refuses text PostgreSQL cannot store anywhere inside a JSON value (src/lib/storable-text.ts). */
const storableJson = (value: unknown, ctx: z.RefinementCtx) => {
  const at = unstorablePathOf(value);
  if (at) ctx.addIssue({ code: 'custom', path: at, message: UNSTORABLE_TEXT_MESSAGE });
};

/** A JSON object of arbitrary members, at most 10 KB as JSON. */
export const metadataSchema = z
  .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
  .refine((value) => byteLength(value) <= kbLimits.metadataBytes, {
    message: `must be at most ${kbLimits.metadataBytes} bytes as JSON`,
  })
  .superRefine(storableJson);

export const maxChunkSizeSchema = z
  .number()
  .int('must be an integer')
  .min(kbLimits.chunkSize.min, `must be at least ${kbLimits.chunkSize.min}`)
  .max(kbLimits.chunkSize.max, `must be at most ${kbLimits.chunkSize.max}`);

export const documentUrlSchema = z
  .string()
  .max(kbLimits.url, `must be at most ${kbLimits.url} characters`)
  .refine(isStorableText, UNSTORABLE_TEXT_MESSAGE)
  .refine(
    (value) => {
      try {
        const url = new URL(value);
        return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
      } catch {
        return false;
      }
    },
    { message: 'must be an http:// or https:// URL' },
  );

/** `POST /v1/knowledge-base/docs/upload` with a JSON body (a URL upload). */
export const urlUploadBody = z.strictObject({
  data: z.strictObject({
    type: z.literal('url', { error: 'must be "url" (upload files as multipart/form-data)' }),
    url: documentUrlSchema,
    /** The page's name in listings; defaults to the URL. Parley addition. */
    name: z.string().min(1).max(kbLimits.name).refine(isStorableText, UNSTORABLE_TEXT_MESSAGE).optional(),
    metadata: metadataSchema.optional(),
  }),
});

const fieldName = z
  .string()
  .min(1, 'must not be empty')
  .max(kbLimits.fieldName, `must be at most ${kbLimits.fieldName} characters`);

export const tableSchemaSchema = z
  .strictObject({
    searchableFields: z
      .array(fieldName)
      .min(1, 'must name at least one field')
      .max(kbLimits.tableFields, `must name at most ${kbLimits.tableFields} fields`),
    metadataFields: z
      .array(fieldName)
      .max(kbLimits.tableFields, `must name at most ${kbLimits.tableFields} fields`)
      .default([]),
  })
  .superRefine((schema, ctx) => {
    for (const key of ['searchableFields', 'metadataFields'] as const) {
      const seen = new Set<string>();
      schema[key].forEach((name, i) => {
        if (seen.has(name)) ctx.addIssue({ code: 'custom', path: [key, i], message: `names "${name}" twice` });
        seen.add(name);
      });
    }
  });

export const tableInputSchema = z.strictObject({
  name: z
    .string()
    .min(1, 'must not be empty')
    .max(kbLimits.name, `must be at most ${kbLimits.name} characters`)
    .refine(isStorableText, UNSTORABLE_TEXT_MESSAGE),
  schema: tableSchemaSchema,
  items: z
    .array(z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }).superRefine(storableJson))
    .min(1, 'must hold at least one row')
    .max(kbLimits.tableRows, `must hold at most ${kbLimits.tableRows} rows`),
  /** Metadata of the whole table, under each row's metadataFields. Parley addition. */
  metadata: metadataSchema.optional(),
});

/** `POST /v1/knowledge-base/docs/upload/table`. */
export const tableUploadBody = z.strictObject({ data: tableInputSchema });

/** `PATCH /v1/knowledge-base/docs/{documentID}`. */
export const updateMetadataBody = z.strictObject({ data: z.strictObject({ metadata: metadataSchema }) });

export const querySettingsSchema = z.strictObject({
  model: z.string().min(1).max(kbLimits.model).optional(),
  temperature: z.number().min(0, 'must be at least 0').max(2, 'must be at most 2').optional(),
  system: z.string().max(kbLimits.system, `must be at most ${kbLimits.system} characters`).optional(),
  /** Longest answer, in tokens. Parley addition. */
  maxTokens: z.number().int().min(1).max(16_000).optional(),
});

/** The knowledge-base query (DECISIONS.md §7); `filters` are checked by src/kb/filter. */
export const kbQueryInputSchema = z.strictObject({
  question: z
    .string()
    .min(1, 'must not be empty')
    .max(kbLimits.question, `must be at most ${kbLimits.question} characters`),
  chunkLimit: z
    .number()
    .int('must be an integer')
    .min(kbLimits.chunkLimit.min, `must be at least ${kbLimits.chunkLimit.min}`)
    .max(kbLimits.chunkLimit.max, `must be at most ${kbLimits.chunkLimit.max}`)
    .default(kbLimits.chunkLimit.default),
  synthesis: z.boolean().default(true),
  settings: querySettingsSchema.optional(),
  filters: z.unknown().optional(),
  /** Which documents may answer, by their tags (src/kb/tags.ts `compileTagFilter`). */
  tags: tagFilterSchema.optional(),
  /** For workspace keys: the project whose knowledge base to search. Parley addition. */
  projectID: idSchema.optional(),
  /** The environment that usage is counted under (ID or alias; default development). Parley addition. */
  environment: z.string().min(1).max(64).optional(),
});

export type KbQueryInput = z.infer<typeof kbQueryInputSchema>;
export type TableInput = z.infer<typeof tableInputSchema>;
export type QuerySettings = z.infer<typeof querySettingsSchema>;
