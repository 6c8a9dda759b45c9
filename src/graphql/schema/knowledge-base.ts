import DataLoader from 'dataloader';
import { z } from 'zod';
import { resolveEnvironment } from '../../admin/environments';
import {
  deleteDocument,
  type KbDeps,
  type KbDocumentRow,
  type KbDocumentRowWithTags,
  type KbDocumentStatus,
  type KbSourceInput,
  kbDocumentStatuses,
  kbDocumentTypes,
  listDocuments,
  replaceDocument,
  settledTagLabels,
  updateChunkMetadata,
  updateDocumentMetadata,
  uploadDocument,
  waitForDocument,
} from '../../kb/documents';
import { parseMetadataFilter } from '../../kb/filter';
import { kbFileTypeOfContentType, kbFileTypeOfExtension, kbFileTypes } from '../../kb/parse';
import {
  type KbAnswerEvent,
  type KbQueryChunk,
  type KbQueryRequest,
  type KbQueryResult,
  queryKnowledgeBase,
  streamKnowledgeBaseAnswer,
} from '../../kb/query';
import { uploadTagLabelsSchema } from '../../kb/tags';
import {
  documentUrlSchema,
  type KbQueryInput,
  kbLimits,
  kbQueryInputSchema,
  maxChunkSizeSchema,
  metadataSchema,
  tableInputSchema,
} from '../../kb/validation';
import { AppError } from '../../lib/errors';
import { isStorableText, UNSTORABLE_TEXT_MESSAGE } from '../../lib/storable-text';
import { requireOwned, requireProjectOrKeyProject } from '../access';
import { builder } from '../builder';
import type { Context } from '../context';
import { KbQueryTagsInput } from './knowledge-base-tags';

/**
 * The knowledge base (DECISIONS.md §7): documents uploaded as files, URLs or tables, their chunks,
 * and the query with metadata filters and synthesis. A project key works on its own project; a
 * workspace key or the operator names the project with `projectID`.
 */

const kbDeps = (ctx: Context): KbDeps => ({
  db: ctx.services.db,
  pubsub: ctx.services.pubsub,
  jobs: ctx.services.jobs,
});

/** After an upload: the document as stored, or, with `wait`, once its ingestion finished. */
async function afterUpload(ctx: Context, doc: KbDocumentRow, wait: boolean | null | undefined): Promise<KbDocumentRow> {
  if (!wait) return doc;
  return waitForDocument(kbDeps(ctx), {
    projectId: doc.projectId,
    documentId: doc.id,
    revision: doc.revision,
    timeoutMs: ctx.services.config.KB_WAIT_TIMEOUT_MS,
    written: doc,
  });
}

/**
 * The answer of an upload: with `wait`, the row `waitForDocument` read once the ingestion settled
 * (a driver SELECT of every column the type exposes, made after the job committed), unless the
 * selection asks for a relation (`chunks`): then, as without `wait`, Prisma reads the document with
 * the selection. Reading the same row again through Prisma cost one more Prisma operation per
 * upload. `tags` are not a Prisma selection: the settled row carries them (settledTagLabels),
 * else they are read as for any document.
 */
async function uploadAnswer(
  ctx: Context,
  query: { include?: object; select?: object },
  doc: KbDocumentRow,
  wait: boolean | null | undefined,
) {
  const settled = await afterUpload(ctx, doc, wait);
  if (wait && !query.select && Object.keys(query.include ?? {}).length === 0) return settled;
  return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: settled.id } });
}

/** An uploaded file as a source; 413 over the size limit, 415 for a type we do not read. */
async function fileSource(ctx: Context, file: File): Promise<Extract<KbSourceInput, { kind: 'file' }>> {
  const limit = ctx.services.config.KB_MAX_FILE_BYTES;
  if (file.size > limit) {
    throw new AppError('PAYLOAD_TOO_LARGE', `The file is larger than ${limit} bytes.`);
  }
  // Control characters (NUL above all, which PostgreSQL cannot store) have no place in a name.
  const filename = [...(file.name || '')]
    .filter((ch) => ch >= ' ' && ch !== '\u007f')
    .join('')
    .trim()
    .slice(0, kbLimits.name);
  // The extension decides (a .exe sent as text/plain is still a .exe); a name without one falls
  // back to the part's content type.
  const type = /\.[A-Za-z0-9]+$/.test(filename)
    ? kbFileTypeOfExtension(filename)
    : kbFileTypeOfContentType(file.type || null);
  if (!type) {
    throw new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      `"${filename || 'the file'}" is not a supported type: upload ${kbFileTypes.map((t) => `.${t.extension}`).join(', ')}.`,
    );
  }
  if (!filename) {
    throw new AppError('VALIDATION_FAILED', 'file: needs a file name', {
      details: [{ path: 'file', message: 'needs a file name' }],
    });
  }
  return {
    kind: 'file',
    type,
    filename,
    contentType: file.type || null,
    bytes: new Uint8Array(await file.arrayBuffer()),
  };
}

/**
 * The tag labels of documents, sorted, read for all the documents a response carries in one
 * statement (a join of KbDocumentTag and KbTag) on the driver adapter, without Prisma's client.
 * Batching only, no cache: a mutation that attaches or detaches tags is followed by a fresh read.
 */
const tagLabelLoaders = new WeakMap<Context, DataLoader<string, string[]>>();

function documentTagLabels(ctx: Context): DataLoader<string, string[]> {
  let loader = tagLabelLoaders.get(ctx);
  if (!loader) {
    const { db } = ctx.services;
    loader = new DataLoader(
      async (ids) => {
        const placeholders = ids.map((_, i) => (db.provider === 'sqlite' ? '?' : `$${i + 1}`)).join(', ');
        const rows = await db.queryRows(
          `SELECT dt."documentId" AS "documentId", t."label" AS "label"
           FROM "KbDocumentTag" dt JOIN "KbTag" t ON t."id" = dt."tagId"
           WHERE dt."documentId" IN (${placeholders})`,
          ids,
        );
        const labels = new Map<string, string[]>(ids.map((id) => [id, []]));
        for (const row of rows) labels.get(row.documentId as string)?.push(row.label as string);
        return ids.map((id) => (labels.get(id) as string[]).sort());
      },
      { cache: false, maxBatchSize: 500 },
    );
    tagLabelLoaders.set(ctx, loader);
  }
  return loader;
}

// ── Types ───────────────────────────────────────────────────────────────────────────────────────

const KbDocumentStatusEnum = builder.enumType('KnowledgeBaseDocumentStatusType', { values: kbDocumentStatuses });

const KbDocumentTypeEnum = builder.enumType('KnowledgeBaseDocumentType', { values: kbDocumentTypes });

const KbDocumentDataType = builder
  .objectRef<{ type: string; name: string; url: string | null; rowsCount: number | null }>('KnowledgeBaseDocumentData')
  .implement({
    description: 'What the document is: its type, file name, URL or table name, and its row count for tables.',
    fields: (t) => ({
      type: t.exposeString('type', { description: 'text, markdown, html, pdf, docx, csv, json, url or table.' }),
      name: t.exposeString('name'),
      url: t.exposeString('url', { nullable: true }),
      rowsCount: t.exposeInt('rowsCount', { nullable: true }),
    }),
  });

const KbDocumentStatusType = builder
  .objectRef<{ type: string; data: string | null }>('KnowledgeBaseDocumentStatus')
  .implement({
    fields: (t) => ({
      type: t.field({ type: KbDocumentStatusEnum, resolve: (s) => s.type as KbDocumentStatus }),
      data: t.exposeString('data', { nullable: true, description: 'For ERROR: why, and what to do about it.' }),
    }),
  });

builder.prismaObject('KbChunk', {
  name: 'KnowledgeBaseChunk',
  description: 'A token-sized piece of a document, as retrieval sees it.',
  fields: (t) => ({
    chunkID: t.exposeID('id'),
    position: t.exposeInt('position', { description: 'Order in the document, from 0.' }),
    content: t.exposeString('content'),
    tokens: t.exposeInt('tokens'),
    metadata: t.field({
      type: 'JSONObject',
      description: "The document's metadata (with a table row's metadataFields): what filters see.",
      select: { metadata: true },
      resolve: (c) => c.metadata as Record<string, unknown>,
    }),
  }),
});

const KbDocumentType = builder.prismaObject('KbDocument', {
  name: 'KnowledgeBaseDocument',
  description: 'A document of a knowledge base: a file, a web page or a table, with its metadata and chunks.',
  fields: (t) => ({
    documentID: t.exposeID('id'),
    projectID: t.exposeID('projectId'),
    data: t.field({
      type: KbDocumentDataType,
      select: { type: true, name: true, url: true, rowsCount: true },
      resolve: (d) => ({ type: d.type, name: d.name, url: d.url, rowsCount: d.rowsCount }),
    }),
    metadata: t.field({
      type: 'JSONObject',
      select: { metadata: true },
      resolve: (d) => d.metadata as Record<string, unknown>,
    }),
    status: t.field({
      type: KbDocumentStatusType,
      select: { status: true, statusDetail: true },
      resolve: (d) => ({ type: d.status, data: d.statusDetail }),
    }),
    tags: t.field({
      type: ['String'],
      description: 'The labels of the tags attached to the document, in order.',
      // Not a Prisma selection: that made every read of a document three SELECTs (the document,
      // its links, their tags). One driver statement reads the labels of all the documents of
      // the response. A waited upload's row carries the labels its ingestion read as it settled
      // the document (settledTagLabels): no statement.
      resolve: (d, _args, ctx) => (d as KbDocumentRowWithTags)[settledTagLabels] ?? documentTagLabels(ctx).load(d.id),
    }),
    chunkCount: t.exposeInt('chunkCount', { description: 'Chunks currently searchable.' }),
    maxChunkSize: t.exposeInt('maxChunkSize', { description: 'Most tokens per chunk.' }),
    revision: t.exposeInt('revision', { description: 'Counts uploads of new content, from 1.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    chunks: t.relation('chunks', {
      description: 'In document order.',
      query: { orderBy: { position: 'asc' } },
    }),
  }),
});

const KbDocumentPageType = builder
  .objectRef<{ total: number; documents: KbDocumentRow[] }>('KnowledgeBaseDocumentPage')
  .implement({
    fields: (t) => ({
      total: t.exposeInt('total', { description: 'Documents matching, on all pages.' }),
      documents: t.field({
        type: [KbDocumentType],
        resolve: (page) => page.documents,
      }),
    }),
  });

const KbChunkSourceType = builder.objectRef<KbQueryChunk['source']>('KnowledgeBaseChunkSource').implement({
  fields: (t) => ({
    type: t.exposeString('type'),
    name: t.exposeString('name'),
    url: t.string({ nullable: true, resolve: (s) => s.url ?? null }),
    tags: t.exposeStringList('tags', { description: "The labels of the document's tags." }),
  }),
});

const KbQueryChunkType = builder.objectRef<KbQueryChunk>('KnowledgeBaseQueryChunk').implement({
  fields: (t) => ({
    score: t.exposeFloat('score', { description: 'Higher is better; comparable within one answer only.' }),
    chunkID: t.exposeID('chunkID'),
    documentID: t.exposeID('documentID'),
    content: t.exposeString('content'),
    metadata: t.expose('metadata', { type: 'JSONObject' }),
    source: t.field({ type: KbChunkSourceType, resolve: (c) => c.source }),
  }),
});

const KbQueryResultType = builder.objectRef<KbQueryResult>('KnowledgeBaseQueryResult').implement({
  fields: (t) => ({
    output: t.exposeString('output', {
      nullable: true,
      description: 'The synthesised answer; null without synthesis or when nothing was retrieved.',
    }),
    chunks: t.field({ type: [KbQueryChunkType], resolve: (r) => r.chunks }),
    queryTokens: t.exposeInt('queryTokens', { description: 'Tokens of the synthesis prompt (0 without synthesis).' }),
    answerTokens: t.exposeInt('answerTokens'),
    totalTokens: t.exposeInt('totalTokens'),
    model: t.exposeString('model', { nullable: true, description: 'The model that wrote the output.' }),
  }),
});

const KbAnswerEventKind = builder.enumType('KnowledgeBaseAnswerEventType', {
  values: ['CHUNKS', 'DELTA', 'END'] as const,
});

const KbAnswerEventType = builder.objectRef<KbAnswerEvent>('KnowledgeBaseAnswerEvent').implement({
  description: 'CHUNKS first (what was retrieved), then a DELTA per piece of the answer, then END with the totals.',
  fields: (t) => ({
    type: t.field({
      type: KbAnswerEventKind,
      resolve: (e) => (e.type === 'chunks' ? 'CHUNKS' : e.type === 'delta' ? 'DELTA' : 'END'),
    }),
    chunks: t.field({
      type: [KbQueryChunkType],
      nullable: true,
      resolve: (e) => (e.type === 'chunks' ? e.chunks : null),
    }),
    text: t.string({ nullable: true, resolve: (e) => (e.type === 'delta' ? e.text : null) }),
    result: t.field({ type: KbQueryResultType, nullable: true, resolve: (e) => (e.type === 'end' ? e.result : null) }),
  }),
});

// ── Inputs ──────────────────────────────────────────────────────────────────────────────────────

const KbTableSchemaInput = builder.inputType('KnowledgeBaseTableSchemaInput', {
  fields: (t) => ({
    searchableFields: t.stringList({ required: true, description: "Fields whose values form a row's text." }),
    metadataFields: t.stringList({ description: "Fields copied into a row's metadata (nested values kept)." }),
  }),
});

const KbTableInput = builder.inputType('KnowledgeBaseTableInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    schema: t.field({ type: KbTableSchemaInput, required: true }),
    items: t.field({ type: ['JSONObject'], required: true, description: 'The rows: one chunk each.' }),
    metadata: t.field({ type: 'JSONObject', description: "Metadata of the whole table, under each row's own." }),
  }),
});

const KbQuerySettingsInput = builder.inputType('KnowledgeBaseQuerySettings', {
  fields: (t) => ({
    model: t.string(),
    temperature: t.float(),
    system: t.string({ description: 'Instructions for the answer (default: answer from the passages only).' }),
    maxTokens: t.int(),
  }),
});

const KbQueryInputType = builder.inputType('KnowledgeBaseQueryInput', {
  fields: (t) => ({
    question: t.string({ required: true }),
    chunkLimit: t.int({
      description: `Chunks to retrieve, ${kbLimits.chunkLimit.min}..${kbLimits.chunkLimit.max}; default ${kbLimits.chunkLimit.default}.`,
    }),
    synthesis: t.boolean({ description: 'Answer from the chunks with the language model (default true).' }),
    settings: t.field({ type: KbQuerySettingsInput }),
    filters: t.field({
      type: 'JSON',
      description: 'A metadata filter object (docs/knowledge-base-filters.md); 422 when invalid.',
    }),
    tags: t.field({ type: KbQueryTagsInput, description: 'Which documents may answer, by their tags.' }),
    projectID: t.id({ description: "Default: the API key's project." }),
    environment: t.string({
      description: 'The environment usage is counted under (ID or alias; default development).',
    }),
  }),
});

/** Turns the query input into a request: project, environment and filter are checked here, before any work. */
async function queryRequest(ctx: Context, input: KbQueryInput, signal?: AbortSignal): Promise<KbQueryRequest> {
  const project = await requireProjectOrKeyProject(ctx, input.projectID);
  const filter = parseMetadataFilter(input.filters ?? {});
  const { id: environmentId } = await resolveEnvironment(ctx.services.db.prisma, project.id, input.environment);
  return {
    projectId: project.id,
    environmentId,
    question: input.question,
    chunkLimit: input.chunkLimit,
    synthesis: input.synthesis,
    settings: input.settings,
    filter,
    tags: input.tags,
    signal,
  };
}

const kbQueryDeps = (ctx: Context) => ({
  db: ctx.services.db,
  llm: ctx.services.llm,
  pubsub: ctx.services.pubsub,
  logger: ctx.services.logger.child({ component: 'kb', requestId: ctx.requestId }),
});

const environmentArg = (t: Parameters<Parameters<typeof builder.mutationFields>[0]>[0]) =>
  t.arg.string({
    description:
      'The environment (ID or alias) the document is used in: its embedding tokens are charged there. Default: development (an overwritten document keeps its own).',
    validate: z.string().min(1).max(100).nullish(),
  });

const uploadArgs = (t: Parameters<Parameters<typeof builder.mutationFields>[0]>[0]) => ({
  projectID: t.arg.id({ description: "Default: the API key's project." }),
  metadata: t.arg({ type: 'JSONObject', validate: metadataSchema.nullish() }),
  overwrite: t.arg.boolean({
    defaultValue: false,
    description: 'Replace the newest document with the same file name, URL or table name (same documentID).',
  }),
  maxChunkSize: t.arg.int({ defaultValue: kbLimits.chunkSize.default, validate: maxChunkSizeSchema.nullish() }),
  wait: t.arg.boolean({ defaultValue: false, description: 'Answer once ingestion finished (SUCCESS or ERROR).' }),
  environment: environmentArg(t),
  tags: t.arg.stringList({
    validate: uploadTagLabelsSchema.nullish(),
    description: 'Labels of tags to attach (created when the project has none by that label).',
  }),
});

// ── Root fields ─────────────────────────────────────────────────────────────────────────────────

builder.queryFields((t) => ({
  knowledgeBaseDocuments: t.field({
    type: KbDocumentPageType,
    description: "A page of the project's documents, newest first.",
    authScopes: { scope: 'kb:read' },
    args: {
      projectID: t.arg.id({ description: "Default: the API key's project." }),
      page: t.arg.int({ defaultValue: 1, validate: z.number().int().min(1, 'must be at least 1').nullish() }),
      limit: t.arg.int({
        defaultValue: kbLimits.listLimit.default,
        validate: z
          .number()
          .int()
          .min(1, 'must be at least 1')
          .max(kbLimits.listLimit.max, `must be at most ${kbLimits.listLimit.max}`)
          .nullish(),
      }),
      type: t.arg({ type: KbDocumentTypeEnum }),
      status: t.arg({ type: KbDocumentStatusEnum }),
    },
    resolve: async (_root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      return listDocuments(ctx.services.db, {
        projectId: project.id,
        page: args.page ?? 1,
        limit: args.limit ?? kbLimits.listLimit.default,
        type: args.type ?? undefined,
        status: args.status ?? undefined,
      });
    },
  }),
  knowledgeBaseDocument: t.prismaField({
    type: KbDocumentType,
    description: 'One document, with its chunks.',
    authScopes: { scope: 'kb:read' },
    args: { documentID: t.arg.id({ required: true }) },
    resolve: async (query, _root, args, ctx) => {
      const id = String(args.documentID);
      await requireOwned(ctx, 'Document', id);
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id } });
    },
  }),
  knowledgeBaseQuery: t.field({
    type: KbQueryResultType,
    description: 'Retrieves the chunks that best answer a question (with metadata filters), and answers it from them.',
    authScopes: { scope: 'kb:read' },
    args: { input: t.arg({ type: KbQueryInputType, required: true }).validate(kbQueryInputSchema) },
    resolve: async (_root, args, ctx) =>
      queryKnowledgeBase(kbQueryDeps(ctx), await queryRequest(ctx, args.input as KbQueryInput)),
  }),
}));

builder.mutationFields((t) => ({
  uploadKnowledgeBaseFile: t.prismaField({
    type: KbDocumentType,
    description: `Uploads a file (${kbFileTypes.map((f) => `.${f.extension}`).join(', ')}) to be parsed, chunked and indexed.`,
    authScopes: { scope: 'kb:write' },
    args: { file: t.arg({ type: 'File', required: true }), ...uploadArgs(t) },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      const doc = await uploadDocument(kbDeps(ctx), {
        projectId: project.id,
        source: await fileSource(ctx, args.file),
        metadata: args.metadata ?? {},
        overwrite: args.overwrite ?? false,
        maxChunkSize: args.maxChunkSize ?? undefined,
        environment: args.environment ?? null,
        tags: args.tags ?? undefined,
        runHere: args.wait ?? false,
      });
      return uploadAnswer(ctx, query, doc, args.wait);
    },
  }),
  uploadKnowledgeBaseUrl: t.prismaField({
    type: KbDocumentType,
    description: 'Adds a web page (or a file at a URL): the server fetches, parses, chunks and indexes it.',
    authScopes: { scope: 'kb:write' },
    args: {
      url: t.arg.string({ required: true, validate: documentUrlSchema }),
      name: t.arg.string({
        validate: z.string().min(1).max(kbLimits.name).refine(isStorableText, UNSTORABLE_TEXT_MESSAGE).nullish(),
      }),
      ...uploadArgs(t),
    },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      const doc = await uploadDocument(kbDeps(ctx), {
        projectId: project.id,
        source: { kind: 'url', url: args.url, name: args.name ?? undefined },
        metadata: args.metadata ?? {},
        overwrite: args.overwrite ?? false,
        maxChunkSize: args.maxChunkSize ?? undefined,
        environment: args.environment ?? null,
        tags: args.tags ?? undefined,
        runHere: args.wait ?? false,
      });
      return uploadAnswer(ctx, query, doc, args.wait);
    },
  }),
  uploadKnowledgeBaseTable: t.prismaField({
    type: KbDocumentType,
    description: 'Uploads a table: one chunk per row, searchableFields as its text, metadataFields as its metadata.',
    authScopes: { scope: 'kb:write' },
    args: {
      projectID: t.arg.id({ description: "Default: the API key's project." }),
      input: t.arg({ type: KbTableInput, required: true }).validate(tableInputSchema),
      overwrite: t.arg.boolean({ defaultValue: false, description: 'Replace the newest table with the same name.' }),
      wait: t.arg.boolean({ defaultValue: false }),
      environment: environmentArg(t),
      tags: t.arg.stringList({
        validate: uploadTagLabelsSchema.nullish(),
        description: 'Labels of tags to attach (created when the project has none by that label).',
      }),
    },
    resolve: async (query, _root, args, ctx) => {
      const project = await requireProjectOrKeyProject(ctx, args.projectID ? String(args.projectID) : null);
      const input = args.input as z.infer<typeof tableInputSchema>;
      const doc = await uploadDocument(kbDeps(ctx), {
        projectId: project.id,
        source: { kind: 'table', name: input.name, schema: input.schema, items: input.items },
        metadata: input.metadata ?? {},
        overwrite: args.overwrite ?? false,
        environment: args.environment ?? null,
        tags: args.tags ?? undefined,
        runHere: args.wait ?? false,
      });
      return uploadAnswer(ctx, query, doc, args.wait);
    },
  }),
  replaceKnowledgeBaseDocument: t.prismaField({
    type: KbDocumentType,
    description: 'Gives a document new content (a file or a URL, exactly one), keeping its documentID.',
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      file: t.arg({ type: 'File' }),
      url: t.arg.string({ validate: documentUrlSchema.nullish() }),
      metadata: t.arg({
        type: 'JSONObject',
        validate: metadataSchema.nullish(),
        description: "Default: keep the document's.",
      }),
      maxChunkSize: t.arg.int({ validate: maxChunkSizeSchema.nullish() }),
      wait: t.arg.boolean({ defaultValue: false }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      if (Boolean(args.file) === Boolean(args.url)) {
        throw new AppError('VALIDATION_FAILED', 'Send either a file or a url.', {
          details: [{ path: 'file', message: 'send either a file or a url' }],
        });
      }
      const { id: projectId } = await requireOwned(ctx, 'Document', documentId);
      const current = await ctx.services.db.prisma.kbDocument.findUniqueOrThrow({
        where: { id: documentId },
        select: { kind: true },
      });
      if (current.kind === 'table') {
        throw new AppError('VALIDATION_FAILED', 'A table is replaced by uploading it again with overwrite=true.');
      }
      const doc = await replaceDocument(kbDeps(ctx), {
        projectId,
        documentId,
        source: args.file ? await fileSource(ctx, args.file) : { kind: 'url', url: args.url as string },
        metadata: args.metadata ?? undefined,
        maxChunkSize: args.maxChunkSize ?? undefined,
      });
      const settled = await afterUpload(ctx, doc, args.wait);
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: settled.id } });
    },
  }),
  replaceKnowledgeBaseUrl: t.prismaField({
    type: KbDocumentType,
    description:
      'Gives a URL document a new URL (and name), fetched and indexed anew, keeping its documentID. Other documents: 400.',
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      url: t.arg.string({ required: true, validate: documentUrlSchema }),
      name: t.arg.string({
        description: 'Default: the URL.',
        validate: z.string().min(1).max(kbLimits.name).refine(isStorableText, UNSTORABLE_TEXT_MESSAGE).nullish(),
      }),
      metadata: t.arg({
        type: 'JSONObject',
        validate: metadataSchema.nullish(),
        description: "Default: keep the document's.",
      }),
      maxChunkSize: t.arg.int({ validate: maxChunkSizeSchema.nullish() }),
      wait: t.arg.boolean({ defaultValue: false }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      const { id: projectId } = await requireOwned(ctx, 'Document', documentId);
      const current = await ctx.services.db.prisma.kbDocument.findUniqueOrThrow({
        where: { id: documentId },
        select: { kind: true },
      });
      if (current.kind !== 'url') {
        throw new AppError(
          'VALIDATION_FAILED',
          `Document "${documentId}" is a ${current.kind}, not a URL: replace it with PUT /v1/knowledge-base/docs/{documentID}/upload.`,
        );
      }
      const doc = await replaceDocument(kbDeps(ctx), {
        projectId,
        documentId,
        source: { kind: 'url', url: args.url, name: args.name ?? undefined },
        metadata: args.metadata ?? undefined,
        maxChunkSize: args.maxChunkSize ?? undefined,
      });
      const settled = await afterUpload(ctx, doc, args.wait);
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: settled.id } });
    },
  }),
  updateKnowledgeBaseDocumentMetadata: t.prismaField({
    type: KbDocumentType,
    description: 'Replaces the metadata of a document and, at once, of its chunks.',
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      metadata: t.arg({ type: 'JSONObject', required: true, validate: metadataSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      const { id: projectId } = await requireOwned(ctx, 'Document', documentId);
      await updateDocumentMetadata(kbDeps(ctx), { projectId, documentId, metadata: args.metadata });
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: documentId } });
    },
  }),
  updateKnowledgeBaseChunkMetadata: t.prismaField({
    type: KbDocumentType,
    description:
      "Sets metadata keys on one chunk, over its own and the document's; other chunks are unchanged. Returns the document.",
    authScopes: { scope: 'kb:write' },
    args: {
      documentID: t.arg.id({ required: true }),
      chunkID: t.arg.id({ required: true }),
      metadata: t.arg({ type: 'JSONObject', required: true, validate: metadataSchema }),
    },
    resolve: async (query, _root, args, ctx) => {
      const documentId = String(args.documentID);
      const { id: projectId } = await requireOwned(ctx, 'Document', documentId);
      await updateChunkMetadata(ctx.services.db, {
        projectId,
        documentId,
        chunkId: String(args.chunkID),
        metadata: args.metadata,
      });
      return ctx.services.db.prisma.kbDocument.findUniqueOrThrow({ ...query, where: { id: documentId } });
    },
  }),
  deleteKnowledgeBaseDocument: t.boolean({
    description: 'Deletes a document, its chunks and their index entries.',
    authScopes: { scope: 'kb:write' },
    args: { documentID: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => {
      const documentId = String(args.documentID);
      const { id: projectId } = await requireOwned(ctx, 'Document', documentId);
      await deleteDocument(ctx.services.db, { projectId, documentId });
      return true;
    },
  }),
}));

builder.subscriptionField('knowledgeBaseAnswer', (t) =>
  t.field({
    type: KbAnswerEventType,
    description:
      'The knowledge-base query, streamed: the retrieved chunks, then the answer piece by piece, then the totals.',
    authScopes: { scope: 'kb:read' },
    args: { input: t.arg({ type: KbQueryInputType, required: true }).validate(kbQueryInputSchema) },
    // Everything that can be refused (project, environment, filter) is checked before the first event.
    subscribe: async (_root, args, ctx) => {
      const controller = new AbortController();
      const request = await queryRequest(ctx, args.input as KbQueryInput, controller.signal);
      const events = streamKnowledgeBaseAnswer(kbQueryDeps(ctx), request);
      return {
        [Symbol.asyncIterator]: () => ({
          next: () => events.next(),
          return: async () => {
            // The client went away: stop the model call.
            controller.abort();
            return events.return(undefined);
          },
        }),
      };
    },
    resolve: (event: KbAnswerEvent) => event,
  }),
);
