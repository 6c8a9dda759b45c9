import { timingSafeEqual } from 'node:crypto';
import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import { constantTimeEqual, parseApiKey, parseScopes, secretDigest } from './keys';
import type { KeyProject, Principal } from './principal';

interface CachedKey {
  workspaceId: string;
  projectId: string | null;
  /** The project of a project key, read with the key (null for a workspace key). */
  project: KeyProject | null;
  /** SHA-256 of the secret (the stored hex `secretHash`, as bytes). */
  secretDigest: Buffer;
  scopes: Principal & { kind: 'key' } extends { scopes: infer S } ? S : never;
  revokedAt: Date | null;
  expiresAt: Date | null;
  fetchedAt: number;
  lastUsedWrite: number;
}

export interface Authenticator {
  authenticate(authorization: string | null | undefined): Promise<Principal>;
  /**
   * Forget a key at once (after revocation or rotation): on this instance before it returns, and on
   * every other instance once it hears the `apiKeyChanged` announcement (through Redis with REDIS_URL).
   */
  invalidate(keyId: string): void;
  /** Ends the subscription to changes announced by other instances. */
  close(): void;
}

const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/**
 * Whether `secret` hashes to `digest`, in time independent of where they differ: both are SHA-256
 * digests, of equal length, so they are compared as they are (one hash per request, not three).
 */
function secretMatches(secret: string, digest: Buffer): boolean {
  const presented = secretDigest(secret);
  return presented.length === digest.length && timingSafeEqual(presented, digest);
}

/**
 * Turns an Authorization header into a principal. Accepts the raw key or `Bearer <key>`, and
 * ADMIN_TOKEN for the operator. Verified keys are cached for `cacheTtlMs`, so most requests cost
 * one SHA-256 and no query; `lastUsedAt` is written at most once a minute per key.
 *
 * A project key's project (ID, workspace, name) is read with the key, in the same query, and kept
 * in the same entry, so the ownership check of an operation on the key's own project
 * (`requireProject`, src/graphql/access.ts) needs no query either. A project is never renamed,
 * moved or deleted without its keys going too (projects are only created; a deleted project takes
 * its keys with it, `onDelete: Cascade`), so the entry is exactly as fresh as the key itself.
 *
 * An entry is dropped when the key changes (`invalidate`, announced on the `apiKeyChanged` topic to
 * every instance), and read again once it is older than `cacheTtlMs`, so an announcement lost on
 * the way (Redis down) or a change made without one (the CLI, another process) leaves an instance
 * behind by that long at most. A read that began before a change this instance heard of is not
 * kept, so a slow read never puts a revoked key back.
 */
export function createAuthenticator(opts: {
  db: Db;
  adminToken?: string;
  cacheTtlMs: number;
  logger: Logger;
  /** Where key changes are announced; without it, changes reach other instances by age only. */
  pubsub?: AppPubSub;
}): Authenticator {
  const cache = new Map<string, CachedKey>();
  /** Bumped by every change heard of: a read that began before one is not kept. */
  let generation = 0;
  let closed = false;

  const forget = (keyId: string) => {
    generation++;
    cache.delete(keyId);
  };

  const iterator = opts.pubsub?.subscribe('apiKeyChanged')[Symbol.asyncIterator]();
  if (iterator) {
    void (async () => {
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done || closed) return;
          forget(next.value.keyId);
        }
      } catch (err) {
        opts.logger.warn(
          { err, component: 'auth' },
          'the apiKeyChanged subscription ended; API keys are re-read by age only',
        );
      }
    })();
  }

  async function load(keyId: string): Promise<CachedKey | null> {
    const now = Date.now();
    const hit = cache.get(keyId);
    if (hit && now - hit.fetchedAt < opts.cacheTtlMs) return hit;
    const startedAt = generation;
    const row = await opts.db.prisma.apiKey.findUnique({
      where: { id: keyId },
      include: { project: { select: { id: true, workspaceId: true, name: true } } },
    });
    if (!row) {
      cache.delete(keyId);
      return null;
    }
    const entry: CachedKey = {
      workspaceId: row.workspaceId,
      projectId: row.projectId,
      project: row.project,
      secretDigest: Buffer.from(row.secretHash, 'hex'),
      scopes: new Set(parseScopes(row.scopes)),
      revokedAt: row.revokedAt,
      expiresAt: row.expiresAt,
      fetchedAt: now,
      lastUsedWrite: hit?.lastUsedWrite ?? row.lastUsedAt?.getTime() ?? 0,
    };
    if (generation === startedAt) {
      if (cache.size > 10_000) cache.clear();
      cache.set(keyId, entry);
    }
    return entry;
  }

  return {
    invalidate(keyId) {
      forget(keyId);
      opts.pubsub?.publish('apiKeyChanged', { keyId });
    },
    close() {
      closed = true;
      void iterator?.return?.();
    },
    async authenticate(header) {
      const raw = header?.trim();
      if (!raw) return { kind: 'anonymous', reason: 'Missing Authorization header: send your API key in it.' };
      const token = /^bearer\s+/i.test(raw) ? raw.replace(/^bearer\s+/i, '') : raw;
      if (opts.adminToken && constantTimeEqual(token, opts.adminToken)) return { kind: 'operator' };
      const parsed = parseApiKey(token);
      if (!parsed) return { kind: 'anonymous', reason: 'Malformed API key: expected ak.<keyID>.<secret>.' };
      const key = await load(parsed.keyId);
      if (!key || !secretMatches(parsed.secret, key.secretDigest)) {
        return { kind: 'anonymous', reason: 'Unknown API key.' };
      }
      const now = Date.now();
      if (key.revokedAt) return { kind: 'anonymous', reason: 'This API key has been revoked.' };
      if (key.expiresAt && key.expiresAt.getTime() <= now) {
        return { kind: 'anonymous', reason: 'This API key was rotated and its grace period has ended.' };
      }
      if (now - key.lastUsedWrite > LAST_USED_WRITE_INTERVAL_MS) {
        key.lastUsedWrite = now;
        opts.db.prisma.apiKey
          .update({ where: { id: parsed.keyId }, data: { lastUsedAt: new Date(now) } })
          .catch((err: unknown) => opts.logger.warn({ err, keyId: parsed.keyId }, 'could not record key use'));
      }
      return {
        kind: 'key',
        keyId: parsed.keyId,
        workspaceId: key.workspaceId,
        projectId: key.projectId,
        project: key.project,
        scopes: key.scopes,
      };
    },
  };
}
