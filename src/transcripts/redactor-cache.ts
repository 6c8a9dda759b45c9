import type { CountryCode } from 'libphonenumber-js/max';
import type { PrismaTx } from '../db/transaction';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import { compileRedactionPatterns, createRedactor, type Redactor } from './redaction';

/**
 * Each project's redactor (its own patterns over the built-in detectors), kept in memory so that
 * recording a turn does not read the project's patterns again (docs/performance.md "Turn path").
 *
 * Patterns change only through `setRedactionPatterns` (src/transcripts/service.ts). That makes the
 * instance that changed them forget its entry before it answers, and announces the change on the
 * `redactionPatternsChanged` topic, in-process or through Redis to every instance. An entry is
 * also read again once it is older than `ttlMs`, so an announcement lost on the way (Redis down)
 * leaves an instance behind by that long at most; and a read that began before a change the
 * instance heard of is not kept, so a slow read never puts old patterns back.
 */
/**
 * Where a project's patterns are read from: a Prisma client or transaction, or a function that
 * reads them (in the order they apply) some other way (the runtime's record batch reads them
 * through its driver transaction).
 */
export type PatternSource = PrismaTx | ((projectId: string) => Promise<readonly string[]>);

export interface RedactorCache {
  /** The project's redactor: from memory, or read from `tx` (the caller's transaction, a client, a reader). */
  get(tx: PatternSource, projectId: string): Promise<Redactor>;
  /** Drops the project's entry (its patterns changed). */
  forget(projectId: string): void;
  /** Ends the subscription to changes made elsewhere. */
  close(): void;
}

/** Projects kept at most; the least recently read goes first. */
const maxEntries = 2000;

/** Reads the project's patterns, in the order they apply, and builds its redactor. */
export async function readRedactor(
  tx: PatternSource,
  projectId: string,
  phoneRegions?: readonly CountryCode[],
): Promise<Redactor> {
  const patterns =
    typeof tx === 'function'
      ? await tx(projectId)
      : (
          await tx.transcriptRedactionPattern.findMany({
            where: { projectId },
            orderBy: { createdAt: 'asc' },
            select: { pattern: true },
          })
        ).map((r) => r.pattern);
  return createRedactor(compileRedactionPatterns(patterns), phoneRegions);
}

export function createRedactorCache(
  pubsub: AppPubSub,
  opts: { ttlMs: number; logger: Logger; phoneRegions?: readonly CountryCode[] },
): RedactorCache {
  const entries = new Map<string, { redactor: Redactor; readAt: number }>();
  /** Bumped by every change heard of: a read that began before one is not kept. */
  let generation = 0;
  let closed = false;

  const forget = (projectId: string) => {
    generation++;
    entries.delete(projectId);
  };

  const iterator = pubsub.subscribe('redactionPatternsChanged')[Symbol.asyncIterator]();
  void (async () => {
    try {
      for (;;) {
        const next = await iterator.next();
        if (next.done || closed) return;
        forget(next.value.projectId);
      }
    } catch (err) {
      opts.logger.warn(
        { err, component: 'transcripts' },
        'the redactionPatternsChanged subscription ended; redaction patterns are re-read by age only',
      );
    }
  })();

  return {
    async get(tx, projectId) {
      const entry = entries.get(projectId);
      if (entry && Date.now() - entry.readAt < opts.ttlMs) {
        // Most recently read last, so the oldest goes first when the cache is full.
        entries.delete(projectId);
        entries.set(projectId, entry);
        return entry.redactor;
      }
      const startedAt = generation;
      const readAt = Date.now();
      const redactor = await readRedactor(tx, projectId, opts.phoneRegions);
      if (generation === startedAt) {
        entries.delete(projectId);
        if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
        entries.set(projectId, { redactor, readAt });
      }
      return redactor;
    },
    forget,
    close() {
      closed = true;
      void iterator.return?.();
    },
  };
}
