import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import { constantTimeEqual, hashSecret, parseApiKey, parseScopes } from './keys';
import type { Principal } from './principal';

interface CachedKey {
  workspaceId: string;
  projectId: string | null;
  secretHash: string;
  scopes: Principal & { kind: 'key' } extends { scopes: infer S } ? S : never;
  revokedAt: Date | null;
  expiresAt: Date | null;
  fetchedAt: number;
  lastUsedWrite: number;
}

export interface Authenticator {
  authenticate(authorization: string | null | undefined): Promise<Principal>;
  /** Forget a key at once on this instance (after revocation or rotation). */
  invalidate(keyId: string): void;
}

const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/**
 * Turns an Authorization header into a principal. Accepts the raw key or `Bearer <key>`, and
 * ADMIN_TOKEN for the operator. Verified keys are cached for `cacheTtlMs`, so most requests cost
 * one SHA-256 and no query; `lastUsedAt` is written at most once a minute per key.
 */
export function createAuthenticator(opts: {
  db: Db;
  adminToken?: string;
  cacheTtlMs: number;
  logger: Logger;
}): Authenticator {
  const cache = new Map<string, CachedKey>();

  async function load(keyId: string): Promise<CachedKey | null> {
    const now = Date.now();
    const hit = cache.get(keyId);
    if (hit && now - hit.fetchedAt < opts.cacheTtlMs) return hit;
    const row = await opts.db.prisma.apiKey.findUnique({ where: { id: keyId } });
    if (!row) {
      cache.delete(keyId);
      return null;
    }
    const entry: CachedKey = {
      workspaceId: row.workspaceId,
      projectId: row.projectId,
      secretHash: row.secretHash,
      scopes: new Set(parseScopes(row.scopes)),
      revokedAt: row.revokedAt,
      expiresAt: row.expiresAt,
      fetchedAt: now,
      lastUsedWrite: hit?.lastUsedWrite ?? row.lastUsedAt?.getTime() ?? 0,
    };
    if (cache.size > 10_000) cache.clear();
    cache.set(keyId, entry);
    return entry;
  }

  return {
    invalidate: (keyId) => cache.delete(keyId),
    async authenticate(header) {
      const raw = header?.trim();
      if (!raw) return { kind: 'anonymous', reason: 'Missing Authorization header: send your API key in it.' };
      const token = /^bearer\s+/i.test(raw) ? raw.replace(/^bearer\s+/i, '') : raw;
      if (opts.adminToken && constantTimeEqual(token, opts.adminToken)) return { kind: 'operator' };
      const parsed = parseApiKey(token);
      if (!parsed) return { kind: 'anonymous', reason: 'Malformed API key: expected ak.<keyID>.<secret>.' };
      const key = await load(parsed.keyId);
      if (!key || !constantTimeEqual(hashSecret(parsed.secret), key.secretHash)) {
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
        scopes: key.scopes,
      };
    },
  };
}
