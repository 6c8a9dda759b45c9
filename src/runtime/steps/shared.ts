import { createHash } from 'node:crypto';
import type { StepContext, StepResult } from './step-type';

/** Helpers shared by several step types. */

export function pickRandom<T>(items: readonly T[], random: () => number): T | undefined {
  if (items.length === 0) return undefined;
  return items[Math.min(items.length - 1, Math.floor(random() * items.length))];
}

/**
 * The request `type` of a button, stable for a step and position across versions (the client
 * sends it back as the next action): `path-` and 10 hex characters.
 */
export function buttonRequestType(stepId: string, index: number): string {
  return `path-${createHash('sha256').update(`${stepId}:${index}`).digest('hex').slice(0, 10)}`;
}

export const defaultNoMatchReprompt = "Sorry, I didn't get that.";

/** Compares a user's words with a button label: case, accents and extra spaces do not matter. */
export function sameWords(a: string, b: string): boolean {
  const norm = (s: string) =>
    s
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}]+/gu, ' ')
      .trim();
  return norm(a) === norm(b);
}

export interface Fallback {
  next?: string;
  reprompts?: string[];
}

/**
 * What a waiting step does when the input does not fit (no match) or never came (no reply): go
 * to the fallback's step, or say a reprompt and ask again.
 */
export async function followFallback(
  ctx: StepContext,
  fallback: Fallback | undefined,
  path: string,
  defaultReprompt: string | null,
  askAgain: () => Promise<StepResult>,
): Promise<StepResult> {
  if (fallback?.next) return { kind: 'next', target: fallback.next, path };
  ctx.emit('path', { path });
  const reprompt = pickRandom(fallback?.reprompts ?? [], () => ctx.random()) ?? defaultReprompt;
  if (reprompt) ctx.emit('text', { message: ctx.interpolate(reprompt) });
  return askAgain();
}
