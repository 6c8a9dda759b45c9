import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createProject } from '../admin/service';
import type { UsageEvent } from '../analytics/events';
import { writeUsageEvents } from '../analytics/usage-event-writer';
import { hourMs } from '../analytics/usage-metrics';
import { type BulkRow, bulkInsert } from '../db/bulk-insert';
import type { Db } from '../db/client';
import { projectRoot } from '../db/schema-source';
import { createEvaluation } from '../evaluations/service';
import { finishQueuedJob } from '../jobs/queue';
import { documentSelect, KB_INGEST_QUEUE, type KbDocumentRow, uploadDocument } from '../kb/documents';
import { createKbIngestHandler } from '../kb/ingest';
import { AppError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { Logger } from '../lib/logger';
import { createOutboundFetch } from '../lib/outbound-http';
import type { AppPubSub } from '../lib/pubsub';
import type { LlmProvider } from '../llm';
import { DEFAULT_PRICES } from '../llm/prices';
import type { Runtime } from '../runtime/service';
import { type ImportedTranscript, insertTranscripts } from '../transcripts/import';
import { createProperty } from '../transcripts/properties';
import { loadRedactor } from '../transcripts/service';
import { createRng, type Rng } from './random';
import { type SimConversation, type SimUser, SUPPORT_BOT_NAME, simulateConversation } from './support-bot';

/**
 * `parley demo`: a project that looks lived in (docs/demo.md). A published support bot, a few
 * knowledge-base documents ingested for real, and `days` of conversations with it — transcripts
 * with their logs, properties and evaluation results, and the usage events of every metric of the
 * usage query — all derived from one seed. Everything is written through the domain modules'
 * functions (project, agent, properties, evaluations and documents) and, for the bulk, in one
 * transaction per simulated day (transcripts, property values, results and usage events together),
 * so a failed run leaves whole days, never half a conversation.
 */

export interface DemoDeps {
  db: Db;
  pubsub: AppPubSub;
  llm: LlmProvider;
  logger: Logger;
  runtime: Pick<Runtime, 'publish' | 'deploy'>;
  config: { TRANSCRIPT_UNREDACTED_RETENTION_DAYS: number };
}

export interface DemoOptions {
  /** Same seed, same data (modulo IDs, secrets and `now`). Default 1. */
  seed?: number;
  /** Days of history, ending at `now`. Default 30. */
  days?: number;
  /** The end of the history. Default the current time. */
  now?: Date;
  /** The project's name. Default "Support bot (demo)". */
  name?: string;
  /** An existing workspace to put the project in; default a new one. */
  workspaceId?: string | null;
  /** Who the audit log says created it. */
  actor?: string;
}

/** What `parley project create` prints, so scripts use either the same way. */
export interface DemoProject {
  workspaceID: string;
  projectID: string;
  apiKey: string;
  environments: { id: string; alias: string }[];
}

export interface DemoSummary {
  transcripts: number;
  logs: number;
  usageEvents: number;
  evaluationResults: number;
  documents: number;
}

export const demoLimits = { days: { min: 1, max: 90, default: 30 }, seed: { max: 2 ** 32 - 1, default: 1 } } as const;

const judgeModel = 'gpt-4o-mini';
const answerModel = 'gpt-4o-mini';
const embeddingModel = 'text-embedding-3-small';

const firstNames = [
  'ana',
  'ben',
  'chloe',
  'david',
  'elif',
  'farid',
  'greta',
  'hugo',
  'ines',
  'jonas',
  'kaito',
  'lena',
  'marco',
  'nina',
  'omar',
  'paula',
  'quinn',
  'rosa',
  'sam',
  'tariq',
  'uma',
  'victor',
  'wen',
  'yara',
  'zoe',
];
const lastNames = [
  'novak',
  'schmidt',
  'rossi',
  'garcia',
  'dubois',
  'jansen',
  'kowalski',
  'silva',
  'nielsen',
  'moreau',
  'weber',
  'costa',
  'berg',
  'fischer',
  'martin',
  'lopez',
];

function price(model: string, input: number, output: number): number {
  const p = DEFAULT_PRICES[model];
  return p ? (input * p.input + output * p.output) / 1_000_000 : 0;
}

function checkOptions(opts: DemoOptions): { seed: number; days: number; now: Date } {
  const seed = opts.seed ?? demoLimits.seed.default;
  if (!Number.isInteger(seed) || seed < 0 || seed > demoLimits.seed.max) {
    throw new AppError('VALIDATION_FAILED', `seed must be an integer from 0 to ${demoLimits.seed.max}`);
  }
  const days = opts.days ?? demoLimits.days.default;
  if (!Number.isInteger(days) || days < demoLimits.days.min || days > demoLimits.days.max) {
    throw new AppError(
      'VALIDATION_FAILED',
      `days must be an integer from ${demoLimits.days.min} to ${demoLimits.days.max}`,
    );
  }
  const now = opts.now ?? new Date();
  if (Number.isNaN(now.getTime())) throw new AppError('VALIDATION_FAILED', 'now must be a valid date');
  return { seed, days, now };
}

/** Conversations started per hour: office hours, quieter weekends, a little growth over the period. */
function hourlyRate(at: Date, progress: number): number {
  const hour = at.getUTCHours();
  const weekday = at.getUTCDay();
  const daily = [
    0.2, 0.15, 0.1, 0.1, 0.15, 0.3, 0.6, 1.2, 2.0, 2.4, 2.5, 2.4, 2.2, 2.3, 2.4, 2.3, 2.1, 1.9, 1.7, 1.5, 1.3, 1.0, 0.7,
    0.4,
  ];
  const week = weekday === 0 ? 0.55 : weekday === 6 ? 0.65 : 1;
  return (daily[hour] ?? 1) * week * (0.75 + 0.5 * progress);
}

interface Setup {
  projectId: string;
  envs: { development: string; production: string };
  agentId: string;
  properties: Record<'channel' | 'order_id' | 'ticket_priority' | 'handed_off' | 'order_value', string>;
  evaluations: { resolved: string; satisfaction: string; topic: string };
  documents: KbDocumentRow[];
}

/** Creates the demo project and its data. Returns what `project create` returns. */
export async function seedDemo(
  deps: DemoDeps,
  opts: DemoOptions = {},
): Promise<DemoProject & { summary: DemoSummary }> {
  const { seed, days, now } = checkOptions(opts);
  const actor = opts.actor ?? 'demo';
  const rng = createRng(seed);
  const created = await createProject(
    { db: deps.db, pubsub: deps.pubsub },
    { name: opts.name ?? 'Support bot (demo)', workspaceId: opts.workspaceId ?? null, actor, key: {} },
  );
  const projectId = created.project.id;
  const envId = (alias: string) => {
    const env = created.environments.find((e) => e.alias === alias);
    if (!env) throw new Error(`the new project has no ${alias} environment`);
    return env.id;
  };
  const envs = { development: envId('development'), production: envId('production') };

  const program = JSON.parse(readFileSync(join(projectRoot, 'examples/support-bot/agent.json'), 'utf8'));
  const published = await deps.runtime.publish({ projectId, environment: 'development', program, actor });
  await deps.runtime.deploy({ projectId, versionId: published.versionId, environment: 'production', actor });

  const properties = {
    channel: (await createProperty(deps.db, { projectId, name: 'channel', type: 'string' })).id,
    order_id: (await createProperty(deps.db, { projectId, name: 'order_id', type: 'string' })).id,
    ticket_priority: (await createProperty(deps.db, { projectId, name: 'ticket_priority', type: 'string' })).id,
    handed_off: (await createProperty(deps.db, { projectId, name: 'handed_off', type: 'boolean' })).id,
    order_value: (await createProperty(deps.db, { projectId, name: 'order_value', type: 'number' })).id,
  };
  const evaluations = await createEvaluations(deps.db, projectId);
  const documents = await createDocuments(deps, projectId);

  const setup: Setup = { projectId, envs, agentId: published.agentId, properties, evaluations, documents };
  const summary = await seedHistory(deps, setup, { rng: rng.fork('history'), days, now });
  summary.documents = documents.length;
  deps.logger.info({ projectId, seed, days, ...summary }, 'demo project created');
  if (!created.created) throw new Error('the demo project was created without a key');
  return {
    workspaceID: created.project.workspaceId,
    projectID: projectId,
    apiKey: created.created.apiKey,
    environments: created.environments.map((e) => ({ id: e.id, alias: e.alias })),
    summary,
  };
}

async function createEvaluations(db: Db, projectId: string): Promise<Setup['evaluations']> {
  const settings = { model: judgeModel, temperature: 0 };
  const resolved = await createEvaluation(db, {
    projectID: projectId,
    name: 'Resolved',
    description: 'Whether the bot settled the request without a person.',
    type: 'boolean',
    prompt: "Read the conversation. Did the support bot fully answer the customer's request on its own?",
    truePrompt: 'The customer got what they came for from the bot (an order status, a filed ticket).',
    falsePrompt: 'The customer left without an answer, or needed a person.',
    settings,
  });
  const satisfaction = await createEvaluation(db, {
    projectID: projectId,
    name: 'Satisfaction',
    description: 'How satisfied the customer seems, from 1 to 5.',
    type: 'number',
    prompt: 'Rate how satisfied the customer seems at the end of the conversation.',
    minimumValue: 1,
    minimumPrompt: 'Frustrated: misunderstood, stuck or left angry.',
    maximumValue: 5,
    maximumPrompt: 'Delighted: quick, clear and complete help.',
    settings,
  });
  const topic = await createEvaluation(db, {
    projectID: projectId,
    name: 'Topic',
    description: 'What the conversation was about, in a few words.',
    type: 'string',
    prompt: 'Name the topic of the conversation: order tracking, problem report, human handoff or other.',
    settings,
  });
  return { resolved: resolved.id, satisfaction: satisfaction.id, topic: topic.id };
}

const tableItems = [
  {
    status: 'processing',
    meaning: 'The order is being picked and packed in the warehouse.',
    customer_action: 'None; it usually ships within 2 business days.',
  },
  {
    status: 'shipped',
    meaning: 'The carrier has the parcel; the tracking link and expected delivery date are in the e-mail.',
    customer_action: 'Wait for delivery; report a problem if it is more than 3 business days late.',
  },
  {
    status: 'cancelled',
    meaning: 'The order was cancelled by the customer or because payment failed.',
    customer_action: 'Order again; any charge is refunded within 3 business days.',
  },
  {
    status: 'returned',
    meaning: 'The returned parcel reached the warehouse and the refund is being issued.',
    customer_action: 'Expect the refund on the original payment method within about two weeks.',
  },
];

/** Uploads the demo documents and ingests them at once, through the knowledge base's own job handler. */
async function createDocuments(deps: DemoDeps, projectId: string): Promise<KbDocumentRow[]> {
  const kb = { db: deps.db, pubsub: deps.pubsub };
  const file = (name: string) => new Uint8Array(readFileSync(join(projectRoot, 'examples/knowledge-base', name)));
  const uploads = [
    await uploadDocument(kb, {
      projectId,
      source: {
        kind: 'file',
        type: 'markdown',
        filename: 'handbook.md',
        contentType: 'text/markdown',
        bytes: file('handbook.md'),
      },
      metadata: { team: 'support', tags: ['refunds', 'returns', 'tickets'] },
      overwrite: false,
    }),
    await uploadDocument(kb, {
      projectId,
      source: {
        kind: 'file',
        type: 'markdown',
        filename: 'shipping-faq.md',
        contentType: 'text/markdown',
        bytes: file('shipping-faq.md'),
      },
      metadata: { team: 'logistics', tags: ['shipping', 'delivery'] },
      overwrite: false,
    }),
    await uploadDocument(kb, {
      projectId,
      source: {
        kind: 'table',
        name: 'Order statuses',
        schema: { searchableFields: ['status', 'meaning', 'customer_action'], metadataFields: ['status'] },
        items: tableItems,
      },
      metadata: { team: 'support', tags: ['orders'] },
      overwrite: false,
    }),
  ];
  // Files and tables only: the fetch for URL documents is never called, but the handler needs one.
  const fetch = createOutboundFetch({ allowPrivate: false, maxRedirects: 0 });
  try {
    const ingest = createKbIngestHandler({
      db: deps.db,
      pubsub: deps.pubsub,
      llm: deps.llm,
      logger: deps.logger,
      fetch,
      urlTimeoutMs: 10_000,
      maxUrlBytes: 1_000_000,
    });
    for (const doc of uploads) {
      const dedupeKey = `kb-ingest:${doc.id}:${doc.revision}`;
      await ingest({
        id: dedupeKey,
        queue: KB_INGEST_QUEUE,
        payload: { documentId: doc.id, revision: doc.revision },
        attempt: 1,
        maxAttempts: 1,
        projectId,
        signal: new AbortController().signal,
      });
      // Done here: the queued job would find the document ingested and do nothing.
      await finishQueuedJob(deps.db, dedupeKey);
    }
  } finally {
    await fetch.close();
  }
  const docs = await deps.db.prisma.kbDocument.findMany({
    where: { projectId },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
    select: documentSelect,
  });
  const failed = docs.filter((d) => d.status !== 'SUCCESS');
  if (failed.length) {
    throw new Error(`demo documents did not ingest: ${failed.map((d) => `${d.name}: ${d.statusDetail}`).join('; ')}`);
  }
  return docs;
}

const propertyValueColumns = {
  transcriptId: 'text',
  propertyId: 'text',
  value: 'text',
  numberValue: 'float',
  metadata: 'json',
  createdAt: 'timestamp',
  updatedAt: 'timestamp',
} as const;
const resultColumns = {
  id: 'text',
  evaluationId: 'text',
  transcriptId: 'text',
  status: 'text',
  runId: 'text',
  valueBoolean: 'bool',
  valueNumber: 'float',
  valueString: 'text',
  reason: 'text',
  cost: 'float',
  model: 'text',
  inputTokens: 'int',
  outputTokens: 'int',
  error: 'text',
  createdAt: 'timestamp',
  updatedAt: 'timestamp',
} as const;

interface DayBatch {
  transcripts: ImportedTranscript[];
  propertyValues: BulkRow[];
  results: BulkRow[];
  usage: UsageEvent[];
}

/** The users who write to the bot: a few regulars, many occasional ones. */
function makeUsers(rng: Rng, count: number): SimUser[] {
  const users: SimUser[] = [];
  for (let i = 0; i < count; i++) {
    const first = rng.pick(firstNames);
    const last = rng.pick(lastNames);
    users.push({
      id: `cust-${String(i + 1).padStart(4, '0')}`,
      email: `${first}.${last}${i + 1}@example.com`,
      ticketsFiled: 0,
    });
  }
  return users;
}

async function seedHistory(
  deps: DemoDeps,
  setup: Setup,
  opts: { rng: Rng; days: number; now: Date },
): Promise<DemoSummary> {
  const { rng, days, now } = opts;
  const summary: DemoSummary = { transcripts: 0, logs: 0, usageEvents: 0, evaluationResults: 0, documents: 0 };
  const customers = makeUsers(rng.fork('users'), 60 + days * 12);
  const testers = ['qa-mira', 'qa-tom', 'dev-lukas'].map((id) => ({ id, email: `${id}@example.com`, ticketsFiled: 0 }));
  const visitors = Array.from({ length: 40 + days * 6 }, (_, i) => `web-${String(i + 1).padStart(4, '0')}`);
  const redactor = await loadRedactor(deps.db.prisma, setup.projectId);
  const retentionMs = deps.config.TRANSCRIPT_UNREDACTED_RETENTION_DAYS * 24 * hourMs;
  const evaluationCosts = new Map<string, { total: number; count: number }>();

  const start = now.getTime() - days * 24 * hourMs;
  const firstHour = Math.floor(start / hourMs);
  const lastHour = Math.floor(now.getTime() / hourMs);
  let batch: DayBatch = { transcripts: [], propertyValues: [], results: [], usage: [] };

  const flush = async () => {
    if (batch.transcripts.length === 0 && batch.usage.length === 0) return;
    const current = batch;
    batch = { transcripts: [], propertyValues: [], results: [], usage: [] };
    await deps.db.prisma.$transaction(
      async (tx) => {
        const written = await insertTranscripts(tx, deps.db.provider, {
          projectId: setup.projectId,
          transcripts: current.transcripts,
          redactor,
          retentionMs,
          now,
        });
        summary.logs += written.logs;
        await bulkInsert(tx, deps.db.provider, 'TranscriptPropertyValue', propertyValueColumns, current.propertyValues);
        await bulkInsert(tx, deps.db.provider, 'EvaluationResult', resultColumns, current.results);
        for (let i = 0; i < current.usage.length; i += 5000) {
          const usage = await writeUsageEvents(tx, current.usage.slice(i, i + 5000), {
            provider: deps.db.provider,
            now,
          });
          summary.usageEvents += usage.recorded;
        }
      },
      { maxWait: 15_000, timeout: 120_000 },
    );
    summary.transcripts += current.transcripts.length;
    summary.evaluationResults += current.results.length;
  };

  for (let hour = firstHour; hour <= lastHour; hour++) {
    const hourStart = hour * hourMs;
    const progress = (hourStart - start) / (now.getTime() - start);
    const hourRng = rng.fork(`hour:${hour - firstHour}`);
    const at = new Date(hourStart);
    // Production customers, and a few tests in development during working hours.
    const prodCount = Math.round(hourRng.around(hourlyRate(at, progress) * 1.6, 1.5));
    const devCount =
      at.getUTCDay() % 6 !== 0 && at.getUTCHours() >= 8 && at.getUTCHours() < 18 && hourRng.chance(0.35) ? 1 : 0;
    const kbQueries = Math.round(hourRng.around(hourlyRate(at, progress) * 0.7, 1));
    const sessions: { env: 'production' | 'development'; user: SimUser; startAt: number }[] = [];
    for (let i = 0; i < Math.max(0, prodCount); i++) {
      // Regulars come back: the lower IDs are picked more often.
      const index = Math.floor(customers.length * hourRng.next() ** 1.6);
      sessions.push({
        env: 'production',
        user: customers[index] as SimUser,
        startAt: hourStart + hourRng.int(0, hourMs - 1),
      });
    }
    for (let i = 0; i < devCount; i++) {
      sessions.push({
        env: 'development',
        user: hourRng.pick(testers),
        startAt: hourStart + hourRng.int(0, hourMs - 1),
      });
    }
    sessions.sort((a, b) => a.startAt - b.startAt);
    for (const s of sessions) {
      if (s.startAt >= now.getTime()) continue;
      const conversation = simulateConversation(hourRng, s.user, new Date(s.startAt));
      addConversation(batch, setup, hourRng, {
        conversation,
        env: setup.envs[s.env],
        user: s.user,
        now,
        costs: evaluationCosts,
      });
    }
    for (let i = 0; i < Math.max(0, kbQueries); i++) {
      const occurredAt = new Date(hourStart + hourRng.int(0, hourMs - 1));
      if (occurredAt.getTime() >= now.getTime()) continue;
      addKbQuery(batch, setup, hourRng, { occurredAt, userId: hourRng.pick(visitors) });
    }
    // One transaction per simulated day.
    if ((hour - firstHour + 1) % 24 === 0) await flush();
  }
  await flush();

  for (const [evaluationId, c] of evaluationCosts) {
    await deps.db.prisma.evaluation.update({
      where: { id: evaluationId },
      data: { costTotal: c.total, costCount: c.count, averageCost: c.count ? c.total / c.count : null },
    });
  }
  return summary;
}

function addConversation(
  batch: DayBatch,
  setup: Setup,
  rng: Rng,
  input: {
    conversation: SimConversation;
    env: string;
    user: SimUser;
    now: Date;
    costs: Map<string, { total: number; count: number }>;
  },
): void {
  const { user, env, now } = input;
  // A conversation still going on at `now` keeps only the turns that happened so far.
  const turns = input.conversation.turns.filter((t) => t.finishedAt.getTime() <= now.getTime());
  if (turns.length === 0) return;
  const conversation = { ...input.conversation, turns, ended: turns.some((t) => t.ended) };
  const first = turns[0];
  const last = turns[turns.length - 1];
  if (!first || !last) return;
  const createdAt = first.startedAt;
  const endedAt = conversation.ended ? last.finishedAt : null;
  const transcriptId = newId(createdAt.getTime());
  const logs: ImportedTranscript['logs'][number][] = [];
  for (const t of turns) {
    const turnId = newId(t.startedAt.getTime());
    logs.push({ id: turnId, type: 'action', data: t.action, createdAt: t.startedAt });
    for (const trace of t.traces)
      logs.push({ type: 'trace', data: trace, createdAt: new Date(trace.time ?? t.finishedAt.getTime()) });
    if (t.ended) logs.push({ type: 'end', data: null, createdAt: t.finishedAt });
    // The usage events of the turn, as src/runtime/usage-recorder.ts makes them.
    const common = { projectId: setup.projectId, environmentId: env, occurredAt: t.startedAt, userId: user.id };
    const key = (suffix: string) => `turn:${turnId}:${suffix}`;
    batch.usage.push({ ...common, kind: 'interaction', type: t.interactionType, idempotencyKey: key('interaction') });
    batch.usage.push({
      ...common,
      kind: 'agent_invocation',
      agentId: setup.agentId,
      name: SUPPORT_BOT_NAME,
      success: t.success,
      idempotencyKey: key('agent'),
    });
    for (const [i, name] of t.intents.entries()) {
      batch.usage.push({ ...common, kind: 'intent', name, idempotencyKey: key(`intent:${i}`) });
    }
    for (const [i, c] of t.apiCalls.entries()) {
      batch.usage.push({
        ...common,
        kind: 'api_call',
        apiToolId: c.stepID,
        name: c.name,
        success: c.success,
        idempotencyKey: key(`api:${i}`),
      });
    }
    for (const [i, c] of t.functionCalls.entries()) {
      batch.usage.push({
        ...common,
        kind: 'function_call',
        functionId: c.stepID,
        name: c.name,
        success: c.success,
        idempotencyKey: key(`function:${i}`),
      });
    }
  }
  batch.transcripts.push({
    id: transcriptId,
    environmentId: env,
    sessionId: newId(createdAt.getTime()),
    userId: user.id,
    createdAt,
    endedAt,
    logs,
  });
  batch.usage.push({
    kind: 'transcript',
    projectId: setup.projectId,
    environmentId: env,
    occurredAt: createdAt,
    userId: user.id,
    transcriptId,
    idempotencyKey: `transcript:${transcriptId}`,
  });

  const { outcome, topic } = conversation;
  const lastAt = last.finishedAt;
  // The helpdesk integration the operator connected: handoffs and tickets go to it, urgent ones to chat too.
  const integration = (name: string, successRate: number) =>
    batch.usage.push({
      kind: 'integration_call',
      projectId: setup.projectId,
      environmentId: env,
      occurredAt: lastAt,
      userId: user.id,
      integrationToolName: name,
      success: rng.chance(successRate),
    });
  if (outcome.ticketId) integration('zendesk', 0.97);
  if (outcome.handedOff) integration('zendesk', 0.97);
  if (outcome.priority === 'high') integration('slack', 0.99);

  // Properties the operator's integration sets on its transcripts.
  const value = (propertyId: string, text: string, numberValue: number | null = null) =>
    batch.propertyValues.push({
      transcriptId,
      propertyId,
      value: text,
      numberValue,
      createdAt: lastAt,
      updatedAt: lastAt,
    });
  value(
    setup.properties.channel,
    rng.weighted([
      ['web', 60],
      ['ios', 25],
      ['android', 15],
    ] as const),
  );
  if (outcome.orderId) value(setup.properties.order_id, outcome.orderId);
  if (outcome.priority) value(setup.properties.ticket_priority, outcome.priority);
  if (conversation.ended) value(setup.properties.handed_off, String(outcome.handedOff));
  if (outcome.orderId && outcome.orderStatus !== 'not found' && rng.chance(0.6)) {
    const amount = Math.round(rng.around(90, 80) * 100 + 3000) / 100;
    value(setup.properties.order_value, String(amount), amount);
  }

  // Evaluations run when a conversation ends (the enabled ones, with the judge model).
  if (!conversation.ended || rng.chance(0.04)) return;
  const resolved =
    !outcome.handedOff &&
    !outcome.abandoned &&
    outcome.orderStatus !== 'not found' &&
    outcome.orderStatus !== 'no answer' &&
    outcome.failedTurns === 0;
  const base = resolved ? 4.3 : outcome.handedOff && outcome.priority === 'high' ? 3.2 : 2.3;
  const satisfaction = Math.max(1, Math.min(5, Math.round(rng.around(base - 0.4 * outcome.misunderstandings, 1))));
  const reasons = {
    resolved: resolved
      ? outcome.ticketId
        ? `The bot filed ticket ${outcome.ticketId} and confirmed it; the customer needed nothing else.`
        : `The bot looked up order ${outcome.orderId} and gave its status; the customer said goodbye.`
      : outcome.handedOff
        ? 'The conversation was handed to a person, so the bot did not settle it alone.'
        : outcome.orderStatus === 'not found' || outcome.orderStatus === 'no answer'
          ? `The bot could not find order ${outcome.orderId}, so the customer got no status.`
          : 'The customer did not get an answer from the bot.',
    satisfaction:
      satisfaction >= 4
        ? 'Quick and clear: the customer got what they asked for in a few turns.'
        : satisfaction === 3
          ? 'The customer got help, but it took a detour.'
          : outcome.misunderstandings
            ? 'The bot misunderstood the customer and they had to repeat themselves.'
            : 'The customer left without what they came for.',
    topic: `The customer's first request was about ${topic}.`,
  };
  const judged = (
    evaluationId: string,
    at: Date,
    value: { valueBoolean?: boolean; valueNumber?: number; valueString?: string },
    reason: string,
  ) => {
    const inputTokens = Math.round(180 + logs.length * rng.around(38, 10));
    const outputTokens = rng.int(25, 90);
    const cost = price(judgeModel, inputTokens, outputTokens);
    const runId = newId(at.getTime());
    const failed = rng.chance(0.01);
    batch.results.push({
      id: newId(at.getTime()),
      evaluationId,
      transcriptId,
      status: failed ? 'failed' : 'done',
      runId,
      ...(failed ? { error: 'The judge did not answer in time (timed out after 30000 ms).' } : { ...value, reason }),
      cost,
      model: judgeModel,
      inputTokens,
      outputTokens,
      createdAt: at,
      updatedAt: at,
    });
    const totals = input.costs.get(evaluationId) ?? { total: 0, count: 0 };
    totals.total += cost;
    totals.count += 1;
    input.costs.set(evaluationId, totals);
    const credit = {
      kind: 'credit' as const,
      projectId: setup.projectId,
      environmentId: env,
      occurredAt: at,
      model: judgeModel,
    };
    batch.usage.push({ ...credit, type: 'llm-input', tokens: inputTokens, idempotencyKey: `evaluation:${runId}:1:in` });
    batch.usage.push({
      ...credit,
      type: 'llm-output',
      tokens: outputTokens,
      idempotencyKey: `evaluation:${runId}:1:out`,
    });
  };
  const judgedAt = new Date(Math.min(now.getTime(), lastAt.getTime() + rng.int(20_000, 180_000)));
  judged(setup.evaluations.resolved, judgedAt, { valueBoolean: resolved }, reasons.resolved);
  judged(setup.evaluations.satisfaction, judgedAt, { valueNumber: satisfaction }, reasons.satisfaction);
  judged(setup.evaluations.topic, judgedAt, { valueString: topic }, reasons.topic);
}

/** A question to the knowledge base from the help centre: documents retrieved, tokens spent. */
function addKbQuery(batch: DayBatch, setup: Setup, rng: Rng, input: { occurredAt: Date; userId: string }): void {
  const common = {
    projectId: setup.projectId,
    environmentId: setup.envs.production,
    occurredAt: input.occurredAt,
    userId: input.userId,
  };
  const queryId = newId(input.occurredAt.getTime());
  const picked = setup.documents.filter(() => rng.chance(0.5));
  const docs = picked.length ? picked : [rng.pick(setup.documents)];
  for (const doc of docs)
    batch.usage.push({
      ...common,
      kind: 'kb_document',
      documentId: doc.id,
      idempotencyKey: `kb-query:${queryId}:doc:${doc.id}`,
    });
  batch.usage.push({
    ...common,
    kind: 'credit',
    type: 'llm-input',
    model: embeddingModel,
    tokens: rng.int(8, 30),
    idempotencyKey: `kb-query:${queryId}:embed:in`,
  });
  batch.usage.push({
    ...common,
    kind: 'credit',
    type: 'llm-input',
    model: answerModel,
    tokens: rng.int(450, 1600),
    idempotencyKey: `kb-query:${queryId}:answer:in`,
  });
  batch.usage.push({
    ...common,
    kind: 'credit',
    type: 'llm-output',
    model: answerModel,
    tokens: rng.int(40, 220),
    idempotencyKey: `kb-query:${queryId}:answer:out`,
  });
}
