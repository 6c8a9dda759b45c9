import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { newId } from '../lib/ids';

export const scopes = [
  'analytics:read',
  /** Ingest usage events from another runtime (POST /v1/usage/events); granted only when asked for. */
  'analytics:write',
  'transcripts:read',
  /**
   * Read transcript logs as they were before redaction (`unredacted=true`), while the originals are
   * kept; granted only when asked for (docs/transcripts.md).
   */
  'transcripts:read-unredacted',
  'transcripts:write',
  'runtime:interact',
  'kb:read',
  'kb:write',
  'admin',
] as const;
export type Scope = (typeof scopes)[number];

/**
 * What a new project key may do unless narrowed: everything but administration, usage ingestion (a
 * key that can read analytics should not be able to forge them: docs/usage.md) and reading
 * unredacted transcripts (the personal data redaction exists to keep out of ordinary reads).
 */
export const defaultKeyScopes: Scope[] = scopes.filter(
  (s) => s !== 'admin' && s !== 'analytics:write' && s !== 'transcripts:read-unredacted',
);

export function isScope(value: string): value is Scope {
  return (scopes as readonly string[]).includes(value);
}

const keyPattern = /^ak\.([0-9a-f]{24})\.([A-Za-z0-9_-]{43,128})$/;

export interface NewApiKey {
  keyId: string;
  /** The whole key, `ak.<keyID>.<secret>`: shown once, never stored. */
  apiKey: string;
  secretHash: string;
}

/**
 * A new API key. The secret is 32 random bytes, so a plain SHA-256 is the right hash: slow
 * password hashes protect low-entropy secrets, and would only slow every request down here.
 */
export function generateApiKey(): NewApiKey {
  const keyId = newId();
  const secret = randomBytes(32).toString('base64url');
  return { keyId, apiKey: `ak.${keyId}.${secret}`, secretHash: hashSecret(secret) };
}

export function parseApiKey(raw: string): { keyId: string; secret: string } | null {
  const match = keyPattern.exec(raw);
  return match ? { keyId: match[1]!, secret: match[2]! } : null;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** `hashSecret` as bytes. */
export function secretDigest(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** Compares two strings in time independent of where they differ. */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** Scopes are stored space-separated. */
export function formatScopes(list: readonly Scope[]): string {
  return [...new Set(list)].sort().join(' ');
}

export function parseScopes(stored: string): Scope[] {
  return stored.split(' ').filter(isScope);
}
