import { z } from 'zod';
import type { PrismaDb } from '../db/client';
import { AppError } from '../lib/errors';
import { newId } from '../lib/ids';
import { userIdSchema } from '../runtime/validation';

/**
 * What the web chat widget reports about its conversation (docs/web-chat.md "Transcripts and
 * feedback"): the client it runs in, and thumbs up/down on the agent's answers. Both land on the
 * transcript the runtime already keeps for the widget's user ID — the session its conversation
 * state names — never on a new one, and never on another user's.
 */

const shortText = z.string().max(200);

/** The body of `POST /public/{projectID}/transcripts` as the widget (1.65.2) sends it. */
export const clientInfoSchema = z.strictObject({
  sessionID: userIdSchema,
  device: shortText.optional(),
  browser: shortText.optional(),
  os: shortText.optional(),
  user: z
    .strictObject({
      name: shortText.optional(),
      image: z.string().max(2000).optional(),
    })
    .optional(),
});
export type ClientInfo = z.infer<typeof clientInfoSchema>;

export const feedbackRatings = { 'Thumbs up': 'positive', 'Thumbs down': 'negative' } as const;

/** The body of `POST /feedback/{projectID}/user/{userID}`: the button, the answer's texts, the user turn before it. */
export const feedbackSchema = z.strictObject({
  name: z.enum(['Thumbs up', 'Thumbs down']),
  text: z.array(z.string().max(10_000)).max(50).default([]),
  lastUserTurn: z
    .object({
      message: z.string().max(10_000).optional(),
    })
    .passthrough()
    .nullable()
    .optional(),
});
export type FeedbackInput = z.infer<typeof feedbackSchema>;

const noConversation = () => new AppError('NOT_FOUND', 'This user ID has no conversation yet.');

/**
 * The transcript of the conversation a user ID holds in one of `environmentIds` (the most recently
 * active, when the user talked in several): its state's session. 404 when there is none.
 */
async function conversationTranscript(
  db: PrismaDb,
  key: { projectId: string; environmentIds: readonly string[]; userId: string },
) {
  const state = await db.runtimeState.findFirst({
    where: { projectId: key.projectId, environmentId: { in: [...key.environmentIds] }, userId: key.userId },
    orderBy: { updatedAt: 'desc' },
    select: { environmentId: true, sessionId: true },
  });
  if (!state) throw noConversation();
  const transcript = await db.transcript.findUnique({
    where: {
      projectId_environmentId_sessionId: {
        projectId: key.projectId,
        environmentId: state.environmentId,
        sessionId: state.sessionId,
      },
    },
    select: { id: true, environmentId: true, sessionId: true },
  });
  if (!transcript) throw noConversation();
  return transcript;
}

/** Records the widget's client description on the user's current transcript. */
export async function recordClientInfo(
  db: PrismaDb,
  key: { projectId: string; environmentIds: readonly string[] },
  info: ClientInfo,
): Promise<{ sessionID: string; device: string | null; browser: string | null; os: string | null }> {
  const transcript = await conversationTranscript(db, { ...key, userId: info.sessionID });
  const updated = await db.transcript.update({
    where: { id: transcript.id },
    data: {
      device: info.device ?? null,
      browser: info.browser ?? null,
      os: info.os ?? null,
      userName: info.user?.name ?? null,
      userImage: info.user?.image ?? null,
    },
    select: { device: true, browser: true, os: true },
  });
  return { sessionID: info.sessionID, ...updated };
}

interface Turn {
  id: string;
  action: unknown;
  texts: string[];
}

/** The text a user turn shows for an action: a typed message, a button's label or an intent's query. */
function userTextOf(action: unknown): string | null {
  if (!action || typeof action !== 'object') return null;
  const payload = (action as { payload?: unknown }).payload;
  if (typeof payload === 'string') return payload;
  if (payload && typeof payload === 'object') {
    const { label, query } = payload as { label?: unknown; query?: unknown };
    if (typeof label === 'string') return label;
    if (typeof query === 'string') return query;
  }
  return null;
}

function isLaunch(action: unknown): boolean {
  return !!action && typeof action === 'object' && (action as { type?: unknown }).type === 'launch';
}

function sameTexts(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((text, i) => text === b[i]);
}

/**
 * The turn a feedback click refers to, newest first: one whose text answers are exactly the texts
 * the widget sent, preferring one whose user input matches `lastUserTurn`; failing that (an answer
 * with no text, or text changed by redaction), the newest turn whose input matches `lastUserTurn`
 * (no `lastUserTurn`: the answer to the launch).
 */
export function turnOfFeedback(turns: readonly Turn[], input: FeedbackInput): Turn | null {
  const newestFirst = [...turns].reverse();
  const last = input.lastUserTurn;
  const inputMatches = (turn: Turn) =>
    last ? last.message !== undefined && userTextOf(turn.action) === last.message : isLaunch(turn.action);
  if (input.text.length) {
    const byText = newestFirst.filter((turn) => sameTexts(turn.texts, input.text));
    const best = byText.find(inputMatches) ?? byText[0];
    if (best) return best;
  }
  return newestFirst.find(inputMatches) ?? null;
}

/** Stores a thumbs up/down with the turn it refers to (one rating per turn: a new click replaces it). */
export async function recordFeedback(
  db: PrismaDb,
  key: { projectId: string; environmentId: string; userId: string },
  input: FeedbackInput,
): Promise<{ rating: 'positive' | 'negative'; turnID: string }> {
  const transcript = await conversationTranscript(db, {
    projectId: key.projectId,
    environmentIds: [key.environmentId],
    userId: key.userId,
  });
  const logs = await db.transcriptLog.findMany({
    where: { transcriptId: transcript.id, type: { in: ['action', 'trace'] } },
    orderBy: { seq: 'asc' },
    select: { id: true, type: true, traceType: true, data: true },
  });
  const turns: Turn[] = [];
  for (const log of logs) {
    if (log.type === 'action') turns.push({ id: log.id, action: log.data, texts: [] });
    else if (log.traceType === 'text' && turns.length) {
      const message = (log.data as { payload?: { message?: unknown } } | null)?.payload?.message;
      if (typeof message === 'string') turns.at(-1)?.texts.push(message);
    }
  }
  const turn = turnOfFeedback(turns, input);
  if (!turn) throw new AppError('NOT_FOUND', 'The feedback refers to no turn of this conversation.');
  const rating = feedbackRatings[input.name];
  await db.transcriptFeedback.upsert({
    where: { transcriptId_turnId: { transcriptId: transcript.id, turnId: turn.id } },
    create: {
      id: newId(),
      transcriptId: transcript.id,
      projectId: key.projectId,
      environmentId: transcript.environmentId,
      turnId: turn.id,
      rating,
    },
    update: { rating },
  });
  return { rating, turnID: turn.id };
}

/** The current ratings of a project (or one environment), given or changed in [from, to). */
export async function countFeedback(
  db: PrismaDb,
  filter: { projectId: string; environmentId?: string | null; from?: Date | null; to?: Date | null },
): Promise<{ positive: number; negative: number; total: number }> {
  const groups = await db.transcriptFeedback.groupBy({
    by: ['rating'],
    where: {
      projectId: filter.projectId,
      ...(filter.environmentId ? { environmentId: filter.environmentId } : {}),
      ...(filter.from || filter.to
        ? { updatedAt: { ...(filter.from ? { gte: filter.from } : {}), ...(filter.to ? { lt: filter.to } : {}) } }
        : {}),
    },
    _count: { _all: true },
  });
  const of = (rating: string) => groups.find((g) => g.rating === rating)?._count._all ?? 0;
  const positive = of('positive');
  const negative = of('negative');
  return { positive, negative, total: positive + negative };
}
