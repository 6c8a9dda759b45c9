import { newId } from '../lib/ids';
import type { Trace } from './types';

/**
 * What each output makes of the interpreter's traces. The interpreter emits one canonical form;
 * a model's answer streams as `completion` traces (`payload.state` start / content / end), which
 *
 * - the v2 stream with `completion_events=true` passes on as they are;
 * - the v2 stream without it, the non-stream endpoint and the turn record merge into one `text`
 *   trace with `ai: true`, sent when the answer ends;
 * - the beta stream turns into `completion-start` / `completion-continue` / `completion-end` with
 *   token counts.
 *
 * The beta stream's traces are `{type, payload}` without `time` (SPEC.md "Stream trace event data").
 * `excludeTypes` drops trace types (the non-stream endpoint drops `block`, `debug` and `flow`
 * unless the request's `config.excludeTypes` says otherwise).
 */

export type TraceProfile = 'v2' | 'v2-completion-events' | 'beta' | 'non-stream' | 'record';

export interface OutputTrace {
  type: string;
  payload: unknown;
  time?: number;
  paths?: Trace['paths'];
  defaultPath?: number;
}

export interface TraceFormatter {
  /** The output traces for one interpreter trace (none while a completion is being merged). */
  push(trace: Trace): OutputTrace[];
}

/**
 * The original's rich-text object for a message: `{id, content}` with one paragraph
 * (`{children: [{text}]}`) per line. Its clients (the web chat widget among them) render
 * `payload.slate` and drop a text trace without it.
 */
export function slateOf(message: string): { id: string; content: { children: { text: string }[] }[] } {
  return { id: newId(), content: message.split('\n').map((text) => ({ children: [{ text }] })) };
}

/** A client-facing `text` trace's payload: the message with its `slate` beside it. */
function withSlate(trace: OutputTrace): OutputTrace {
  if (trace.type !== 'text' || !trace.payload || typeof trace.payload !== 'object') return trace;
  const payload = trace.payload as Record<string, unknown>;
  if (payload.slate !== undefined || typeof payload.message !== 'string') return trace;
  return { ...trace, payload: { slate: slateOf(payload.message), ...payload } };
}

/** The types the non-stream endpoint leaves out unless asked (RUNTIME-NOTES.md). */
export const nonStreamDefaultExcludes = ['block', 'debug', 'flow'] as const;

interface CompletionPayload {
  state: 'start' | 'content' | 'end';
  content?: string;
  model?: string;
  tokens?: { answer?: number; query?: number; total?: number };
}

function tokensOf(payload: CompletionPayload) {
  return { answer: payload.tokens?.answer ?? 0, query: payload.tokens?.query ?? 0, total: payload.tokens?.total ?? 0 };
}

export function createTraceFormatter(
  profile: TraceProfile,
  opts: { excludeTypes?: readonly string[] | null } = {},
): TraceFormatter {
  const excluded = new Set(opts.excludeTypes ?? (profile === 'non-stream' ? nonStreamDefaultExcludes : []));
  let merged: string[] | null = null;
  let betaStarted = false;
  let model: string | undefined;

  // Every client-facing text trace carries the original's full payload (`slate` beside `message`);
  // the turn record keeps the canonical payload.
  const finish = (traces: OutputTrace[]): OutputTrace[] =>
    traces.filter((t) => !excluded.has(t.type)).map((t) => (profile === 'record' ? t : withSlate(t)));

  const withTime = (trace: Trace): OutputTrace => {
    const out: OutputTrace = { type: trace.type, payload: trace.payload, time: trace.time };
    if (trace.paths) out.paths = trace.paths;
    if (trace.defaultPath !== undefined) out.defaultPath = trace.defaultPath;
    return out;
  };

  const beta = (trace: Trace): OutputTrace => {
    const out: OutputTrace = { type: trace.type, payload: trace.payload };
    if (trace.paths) out.paths = trace.paths;
    if (trace.defaultPath !== undefined) out.defaultPath = trace.defaultPath;
    return out;
  };

  return {
    push(trace) {
      if (trace.type !== 'completion') return finish([profile === 'beta' ? beta(trace) : withTime(trace)]);
      const payload = trace.payload as CompletionPayload;
      switch (profile) {
        case 'v2-completion-events': {
          const out: Record<string, unknown> = { state: payload.state };
          if (payload.state === 'content') out.content = payload.content ?? '';
          if (payload.state === 'end') out.tokens = tokensOf(payload);
          return finish([{ type: 'completion', payload: out, time: trace.time }]);
        }
        case 'beta': {
          if (payload.state === 'start') {
            betaStarted = false;
            model = payload.model;
            return [];
          }
          if (payload.state === 'content') {
            if (!betaStarted) {
              betaStarted = true;
              return finish([
                {
                  type: 'completion-start',
                  payload: {
                    completion: payload.content ?? '',
                    type: 'text',
                    tokens: { model: model ?? '', answer: 0, query: 0, total: 0 },
                  },
                },
              ]);
            }
            return finish([
              {
                type: 'completion-continue',
                payload: { completion: payload.content ?? '', tokens: { answer: 0, query: 0, total: 0 } },
              },
            ]);
          }
          const out: OutputTrace[] = [];
          if (!betaStarted) {
            out.push({
              type: 'completion-start',
              payload: { completion: '', type: 'text', tokens: { model: model ?? '', answer: 0, query: 0, total: 0 } },
            });
          }
          betaStarted = false;
          out.push({ type: 'completion-end', payload: { completion: '', tokens: tokensOf(payload) } });
          return finish(out);
        }
        default: {
          if (payload.state === 'start') {
            merged = [];
            return [];
          }
          if (payload.state === 'content') {
            const pieces = merged ?? [];
            pieces.push(payload.content ?? '');
            merged = pieces;
            return [];
          }
          const message = (merged ?? []).join('');
          merged = null;
          return finish([{ type: 'text', payload: { message, ai: true }, time: trace.time }]);
        }
      }
    },
  };
}
