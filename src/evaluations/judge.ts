import type { ChatMessage } from '../llm/types';

/**
 * The judge: how a transcript and an evaluation become a request to a language model, and how its
 * reply becomes a typed value. Pure functions, tested on their own (test/evaluations/judge.test.ts).
 */

export interface JudgedEvaluation {
  name: string;
  type: string;
  prompt: string;
  truePrompt?: string | null;
  falsePrompt?: string | null;
  minimumValue?: number | null;
  minimumPrompt?: string | null;
  maximumValue?: number | null;
  maximumPrompt?: string | null;
}

export interface ConversationLog {
  type: string;
  data: unknown;
}

/** The most of a conversation sent to the judge; older turns are cut first. */
export const MAX_CONVERSATION_CHARS = 24_000;

const asRecord = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const text = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v.trim() : null);

function renderAction(data: Record<string, unknown>): string | null {
  const type = String(data.type ?? '');
  const payload = data.payload;
  const p = asRecord(payload);
  switch (type) {
    case 'launch':
      return '(the user started the conversation)';
    case 'text':
      return text(payload) ? `User: ${text(payload)}` : null;
    case 'intent': {
      const said = text(p.query) ?? text(asRecord(p.intent).name);
      return said ? `User: ${said}` : null;
    }
    case 'no-reply':
      return '(the user did not reply)';
    case 'event': {
      const name = text(asRecord(p.event).name);
      return name ? `(event: ${name})` : null;
    }
    default: {
      // A button's request carries its label, which counts as what the user said.
      const label = text(p.label);
      return label ? `User: ${label}` : null;
    }
  }
}

function renderTrace(data: Record<string, unknown>): string | null {
  const payload = asRecord(data.payload);
  switch (data.type) {
    case 'text':
    case 'speak': {
      const message = text(payload.message);
      return message ? `Agent: ${message}` : null;
    }
    case 'live-agent-handoff':
      return '(the conversation was handed to a live agent)';
    default:
      return null;
  }
}

/**
 * The conversation as lines a judge can read: what the user said or did, and what the agent said
 * (text and speak traces). Diagnostic traces are left out.
 */
export function renderConversation(logs: readonly ConversationLog[], maxChars = MAX_CONVERSATION_CHARS): string {
  const lines: string[] = [];
  for (const log of logs) {
    const data = asRecord(log.data);
    const line =
      log.type === 'action'
        ? renderAction(data)
        : log.type === 'trace'
          ? renderTrace(data)
          : log.type === 'end'
            ? '(the conversation ended)'
            : null;
    if (line) lines.push(line);
  }
  let total = 0;
  let start = lines.length;
  while (start > 0 && total + lines[start - 1]!.length + 1 <= maxChars) {
    total += lines[start - 1]!.length + 1;
    start--;
  }
  const kept = lines.slice(start);
  if (start > 0) kept.unshift(`(${start} earlier line${start === 1 ? '' : 's'} omitted)`);
  return kept.length ? kept.join('\n') : '(the transcript has no messages)';
}

function answerRule(e: JudgedEvaluation): string {
  switch (e.type) {
    case 'boolean':
      return [
        '"value" must be the JSON boolean true or false.',
        `Answer true when: ${e.truePrompt}`,
        `Answer false when: ${e.falsePrompt}`,
      ].join('\n');
    case 'number':
      return [
        `"value" must be a number from ${e.minimumValue} to ${e.maximumValue}.`,
        `${e.minimumValue} means: ${e.minimumPrompt}`,
        `${e.maximumValue} means: ${e.maximumPrompt}`,
      ].join('\n');
    default:
      return '"value" must be a short JSON string (at most a sentence).';
  }
}

/** The judge request: instructions and answer format as the system message, the transcript as the user's. */
export function buildJudgeMessages(e: JudgedEvaluation, conversation: string): ChatMessage[] {
  return [
    {
      role: 'system',
      content: [
        'You evaluate a conversation between a user and an automated agent, impartially and only from the transcript.',
        'Reply with exactly one JSON object and nothing else, in this form:',
        '{"value": <your answer>, "reason": "<one or two sentences explaining it>"}',
        answerRule(e),
      ].join('\n'),
    },
    {
      role: 'user',
      content: [
        `Evaluation: ${e.name}`,
        `Question: ${e.prompt}`,
        '',
        'Transcript:',
        '<transcript>',
        conversation,
        '</transcript>',
      ].join('\n'),
    },
  ];
}

export type TypedValue = boolean | number | string;

export type Verdict = { ok: true; value: TypedValue; reason: string } | { ok: false; message: string };

/** JSON objects in a text: the whole text, a fenced block, then every balanced {...} in order. */
function objectCandidates(reply: string): unknown[] {
  const found: unknown[] = [];
  const tryParse = (s: string) => {
    try {
      const parsed = JSON.parse(s);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) found.push(parsed);
    } catch {}
  };
  tryParse(reply.trim());
  for (const m of reply.matchAll(/```(?:json)?\s*([\s\S]*?)```/gi)) tryParse(m[1]!.trim());
  // Balanced braces outside JSON strings, so `{"reason": "a } b"}` is one object.
  for (let start = reply.indexOf('{'); start !== -1; start = reply.indexOf('{', start + 1)) {
    let depth = 0;
    let inString = false;
    for (let i = start; i < reply.length; i++) {
      const c = reply[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) {
        tryParse(reply.slice(start, i + 1));
        break;
      }
    }
  }
  return found;
}

function typedValue(
  e: JudgedEvaluation,
  raw: unknown,
): { ok: true; value: TypedValue } | { ok: false; message: string } {
  switch (e.type) {
    case 'boolean': {
      if (typeof raw === 'boolean') return { ok: true, value: raw };
      const s = typeof raw === 'string' ? raw.trim().toLowerCase() : null;
      if (s === 'true' || s === 'false') return { ok: true, value: s === 'true' };
      return { ok: false, message: `"value" is not true or false: ${JSON.stringify(raw)}` };
    }
    case 'number': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && /^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/.test(raw)
            ? Number(raw)
            : Number.NaN;
      if (!Number.isFinite(n)) return { ok: false, message: `"value" is not a number: ${JSON.stringify(raw)}` };
      const min = e.minimumValue ?? Number.NEGATIVE_INFINITY;
      const max = e.maximumValue ?? Number.POSITIVE_INFINITY;
      return { ok: true, value: Math.min(max, Math.max(min, n)) };
    }
    default: {
      if (typeof raw === 'string') return { ok: true, value: raw.trim().slice(0, 2000) };
      if (typeof raw === 'number' || typeof raw === 'boolean') return { ok: true, value: String(raw) };
      return { ok: false, message: `"value" is not a string: ${JSON.stringify(raw)}` };
    }
  }
}

/**
 * Reads the judge's reply: the first JSON object with a `value` member, even inside other text;
 * the value must have the evaluation's type (a number is clamped to the range; a boolean must be
 * true/false, never 1/0 or "yes").
 */
export function parseVerdict(e: JudgedEvaluation, reply: string): Verdict {
  const candidates = objectCandidates(reply).filter((o) => 'value' in (o as object)) as Record<string, unknown>[];
  if (candidates.length === 0) {
    return {
      ok: false,
      message: `the judge's reply holds no JSON object with a "value": ${JSON.stringify(reply.slice(0, 200))}`,
    };
  }
  const first = candidates[0]!;
  const value = typedValue(e, first.value);
  if (!value.ok) return value;
  const reason = typeof first.reason === 'string' ? first.reason.trim().slice(0, 4000) : '';
  return { ok: true, value: value.value, reason };
}
