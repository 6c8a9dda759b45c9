import type { UsageEvent } from '../analytics/events';
import { recordUsageEvents } from '../analytics/usage-event-writer';
import type { Db } from '../db/client';
import { Prisma } from '../generated/sqlite/client';
import { newId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import type { ChatMessage, LlmAccounting, LlmProvider } from '../llm';
import { compileMetadataFilter, type MetadataFilter } from './filter';
import { metadataColumn, type RetrievedChunk, searchChunks } from './search';
import { compileTagFilter, type TagFilter } from './tags';
import type { QuerySettings } from './validation';

/**
 * The knowledge-base query (DECISIONS.md §7): retrieve the best chunks that pass the metadata
 * filter, then, with `synthesis`, have the language model answer from them. Every query records
 * its usage: one `kb_document` event per document it retrieved from, and `credit_usage` for the
 * tokens of the question's embedding and of the answer.
 */

export interface KbQueryDeps {
  db: Db;
  llm: LlmProvider;
  pubsub?: AppPubSub;
  logger?: Logger;
}

export interface KbQueryRequest {
  projectId: string;
  /** The environment usage is counted under. */
  environmentId: string;
  question: string;
  chunkLimit: number;
  synthesis: boolean;
  settings?: QuerySettings;
  filter: MetadataFilter;
  /** The documents eligible by their tags (the query's `tags` member); absent: all. */
  tags?: TagFilter;
  /** Who asked, when known (the runtime's user): counts towards unique users. */
  userId?: string | null;
  /** Where the question came from, for credit usage (the runtime's flow and step). */
  diagramId?: string;
  nodeId?: string;
  signal?: AbortSignal;
}

export interface KbChunkSource {
  type: string;
  name: string;
  url?: string;
  /** The labels of the document's tags, in order. */
  tags: string[];
}

export interface KbQueryChunk {
  score: number;
  chunkID: string;
  documentID: string;
  content: string;
  metadata: Record<string, unknown>;
  source: KbChunkSource;
}

export interface KbQueryResult {
  output: string | null;
  chunks: KbQueryChunk[];
  queryTokens: number;
  answerTokens: number;
  totalTokens: number;
  /** The model that wrote the output (null without synthesis). Parley addition. */
  model: string | null;
}

/** What the streaming query yields: the chunks, then the answer piece by piece, then the totals. */
export type KbAnswerEvent =
  | { type: 'chunks'; chunks: KbQueryChunk[] }
  | { type: 'delta'; text: string }
  | { type: 'end'; result: KbQueryResult };

export const DEFAULT_SYSTEM_PROMPT =
  "Answer the user's question from the numbered passages only. If they do not hold the answer, say that you do not know. Be brief.";

/** The synthesis prompt: instructions, the passages, then the question (the built-in provider reads it the same way). */
export function synthesisMessages(question: string, chunks: readonly KbQueryChunk[], system?: string): ChatMessage[] {
  const passages = chunks.map((c, i) => `[${i + 1}] ${c.source.name}\n${c.content}`).join('\n\n');
  return [
    { role: 'system', content: system || DEFAULT_SYSTEM_PROMPT },
    { role: 'user', content: `Passages:\n\n${passages}` },
    { role: 'user', content: question },
  ];
}

/** The chunk's document ID in retrieval's queries (the alias `c` of src/kb/search.ts). */
const documentIdColumn = Prisma.raw('c."documentId"');

async function withSources(db: Db, chunks: readonly RetrievedChunk[]): Promise<KbQueryChunk[]> {
  if (chunks.length === 0) return [];
  const docs = await db.prisma.kbDocument.findMany({
    where: { id: { in: [...new Set(chunks.map((c) => c.documentId))] } },
    select: { id: true, type: true, name: true, url: true, tags: { select: { tag: { select: { label: true } } } } },
  });
  const byId = new Map(docs.map((d) => [d.id, d]));
  return chunks.map((c) => {
    const doc = byId.get(c.documentId);
    return {
      score: c.score,
      chunkID: c.chunkId,
      documentID: c.documentId,
      content: c.content,
      metadata: c.metadata,
      source: {
        type: doc?.type ?? 'unknown',
        name: doc?.name ?? '',
        ...(doc?.url ? { url: doc.url } : {}),
        tags: (doc?.tags ?? []).map((t) => t.tag.label).sort(),
      },
    };
  });
}

function creditEvents(request: KbQueryRequest, accounting: LlmAccounting, key: string, output: boolean): UsageEvent[] {
  const common = {
    projectId: request.projectId,
    environmentId: request.environmentId,
    userId: request.userId ?? null,
    kind: 'credit' as const,
    model: accounting.model,
    diagramId: request.diagramId ?? '',
    nodeId: request.nodeId ?? '',
  };
  const events: UsageEvent[] = [
    { ...common, type: 'llm-input', tokens: accounting.inputTokens, idempotencyKey: `${key}:in` },
  ];
  if (output)
    events.push({ ...common, type: 'llm-output', tokens: accounting.outputTokens, idempotencyKey: `${key}:out` });
  return events;
}

/** Retrieves, then streams the answer. Usage is recorded when the stream ends, or is abandoned. */
export async function* streamKnowledgeBaseAnswer(
  deps: KbQueryDeps,
  request: KbQueryRequest,
): AsyncGenerator<KbAnswerEvent, void, undefined> {
  const queryId = newId();
  const usage: UsageEvent[] = [];
  try {
    let queryVector: { model: string; vector: number[] } | null = null;
    if (deps.llm.supportsEmbeddings) {
      try {
        const embedded = await deps.llm.embed({ texts: [request.question], signal: request.signal });
        queryVector = { model: embedded.model, vector: embedded.vectors[0] ?? [] };
        usage.push(...creditEvents(request, embedded.accounting, `kb-query:${queryId}:embed`, false));
      } catch (err) {
        // Embeddings only improve the ranking: without them the full-text ranking still answers.
        if (request.signal?.aborted) throw err;
        deps.logger?.warn({ err }, 'knowledge-base query: embedding the question failed; using full-text ranking only');
      }
    }
    // Tags restrict which documents' chunks are searched: one more condition beside the metadata
    // filter. A query with neither searches with no condition at all (filter null), which
    // PostgreSQL ranks without reading the chunks it does not return (src/kb/search.ts).
    const conditions: Prisma.Sql[] = [];
    if (!(request.filter.kind === 'and' && request.filter.filters.length === 0))
      conditions.push(Prisma.sql`(${compileMetadataFilter(request.filter, deps.db.provider, metadataColumn)})`);
    if (request.tags) conditions.push(Prisma.sql`(${compileTagFilter(request.tags, documentIdColumn)})`);
    const filter = conditions.length ? Prisma.join(conditions, ' AND ') : null;
    const retrieved = await searchChunks(deps.db, {
      projectId: request.projectId,
      question: request.question,
      limit: request.chunkLimit,
      filter,
      queryVector,
    });
    const chunks = await withSources(deps.db, retrieved);
    for (const documentId of new Set(chunks.map((c) => c.documentID))) {
      usage.push({
        projectId: request.projectId,
        environmentId: request.environmentId,
        userId: request.userId ?? null,
        kind: 'kb_document',
        documentId,
        idempotencyKey: `kb-query:${queryId}:doc:${documentId}`,
      });
    }
    yield { type: 'chunks', chunks };

    const result: KbQueryResult = {
      output: null,
      chunks,
      queryTokens: 0,
      answerTokens: 0,
      totalTokens: 0,
      model: null,
    };
    // Nothing retrieved: there is nothing to answer from, and no model is asked to invent it.
    if (request.synthesis && chunks.length > 0) {
      const stream = deps.llm.stream({
        messages: synthesisMessages(request.question, chunks, request.settings?.system),
        model: request.settings?.model,
        temperature: request.settings?.temperature,
        maxTokens: request.settings?.maxTokens,
        signal: request.signal,
      });
      for await (const event of stream) {
        if (event.type === 'delta') {
          yield { type: 'delta', text: event.text };
          continue;
        }
        const { accounting } = event.result;
        result.output = event.result.text;
        result.model = accounting.model;
        result.queryTokens = accounting.inputTokens;
        result.answerTokens = accounting.outputTokens;
        result.totalTokens = accounting.inputTokens + accounting.outputTokens;
        usage.push(...creditEvents(request, accounting, `kb-query:${queryId}:answer`, true));
      }
    }
    yield { type: 'end', result };
  } finally {
    if (usage.length) {
      try {
        await recordUsageEvents({ db: deps.db, pubsub: deps.pubsub }, usage);
      } catch (err) {
        deps.logger?.error({ err }, 'knowledge-base query: recording usage failed');
      }
    }
  }
}

/** The whole answer at once (the REST query and the GraphQL query field). */
export async function queryKnowledgeBase(deps: KbQueryDeps, request: KbQueryRequest): Promise<KbQueryResult> {
  for await (const event of streamKnowledgeBaseAnswer(deps, request)) {
    if (event.type === 'end') return event.result;
  }
  throw new Error('the knowledge-base answer stream ended without a result');
}
