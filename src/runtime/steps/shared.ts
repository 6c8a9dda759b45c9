import { hash } from 'node:crypto';
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
  const key = `${stepId}:${index}`;
  let type = buttonTypes.get(key);
  if (type === undefined) {
    type = `path-${hash('sha256', key, 'hex').slice(0, 10)}`;
    // A bound, not an expected size: the buttons of the programs in use.
    if (buttonTypes.size >= maxButtonTypes) buttonTypes.clear();
    buttonTypes.set(key, type);
  }
  return type;
}

/**
 * Button types already computed: a choice step names each of its buttons on every turn that
 * reaches it (and again to match the answer), always the same few hashes (docs/performance.md,
 * fourth 25 November session).
 */
const buttonTypes = new Map<string, string>();
const maxButtonTypes = 10_000;

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
