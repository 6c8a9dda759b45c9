import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Authenticated encryption of small secrets at rest (AES-256-GCM, a random 96-bit IV per value).
 * A sealed value is `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts); the key ID (the first
 * 8 hex characters of the key's SHA-256) says which key sealed it, so a wrong key is reported as
 * such. `context` is bound to the value as additional authenticated data: a value copied to
 * another row (another context) does not open.
 *
 * A box may also hold previous keys (key rotation): it seals with its key only, and opens a value
 * sealed with any of its keys.
 */
export interface SecretBox {
  /** The ID of the key that seals. */
  keyId: string;
  /** The IDs of the previous keys, which only open. */
  previousKeyIds: string[];
  seal(plaintext: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** The key ID a sealed value names, or null when the text is not a sealed value. */
export function keyIdOf(sealed: string): string | null {
  const parts = sealed.split('.');
  return parts.length === 5 && parts[0] === 'v1' ? (parts[1] ?? null) : null;
}

const keyIdOfKey = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 8);

/** A 32-byte key given as 64 hex characters or as base64 (standard or URL-safe). */
export function parseSecretKey(text: string): Buffer | null {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) {
    const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  return null;
}

export const isSealed = (value: string) =>
  /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value);

/** A box that seals with `key` and opens values sealed with it or with one of `previous`. */
export function createSecretBox(key: Buffer, previous: readonly Buffer[] = []): SecretBox {
  for (const k of [key, ...previous]) if (k.length !== 32) throw new Error('the secret key must be 32 bytes');
  const keyId = keyIdOfKey(key);
  const keys = new Map<string, Buffer>([[keyId, key]]);
  for (const k of previous) if (!keys.has(keyIdOfKey(k))) keys.set(keyIdOfKey(k), k);
  const previousKeyIds = [...keys.keys()].filter((id) => id !== keyId);
  return {
    keyId,
    previousKeyIds,
    seal(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return ['v1', keyId, iv.toString('base64url'), tag.toString('base64url'), body.toString('base64url')].join('.');
    },
    open(sealed, context) {
      const [version, id, iv, tag, body] = sealed.split('.');
      if (version !== 'v1' || id === undefined || iv === undefined || tag === undefined || body === undefined) {
        throw new Error('not a sealed value');
      }
      const opening = keys.get(id);
      if (!opening) {
        const configured = previousKeyIds.length ? `${keyId}, previous ${previousKeyIds.join(', ')}` : keyId;
        throw new Error(`sealed with another key (key id ${id}, configured ${configured})`);
      }
      const decipher = createDecipheriv('aes-256-gcm', opening, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

/**
 * The box of integration header values from the configuration: INTEGRATION_SECRETS_KEY seals,
 * INTEGRATION_SECRETS_PREVIOUS_KEYS only open (both checked by loadConfig); null without a key.
 */
export function integrationSecretBox(config: {
  INTEGRATION_SECRETS_KEY?: string | undefined;
  INTEGRATION_SECRETS_PREVIOUS_KEYS?: string[] | undefined;
}): SecretBox | null {
  if (!config.INTEGRATION_SECRETS_KEY) return null;
  const key = parseSecretKey(config.INTEGRATION_SECRETS_KEY);
  if (!key) throw new Error('INTEGRATION_SECRETS_KEY is not a 32-byte key');
  const previous = (config.INTEGRATION_SECRETS_PREVIOUS_KEYS ?? []).map((text) => {
    const k = parseSecretKey(text);
    if (!k) throw new Error('INTEGRATION_SECRETS_PREVIOUS_KEYS holds a key that is not 32 bytes');
    return k;
  });
  return createSecretBox(key, previous);
}
