import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, inject } from 'vitest';
import type { Provider } from '../../src/db/schema-source';
import { adminQuery, type ScratchDatabase, withDatabaseName } from '../../src/db/scratch';

export interface Lanes {
  runId: string;
  sqlite: { templateFile: string; dir: string } | null;
  postgres: { adminUrl: string; templateName: string; prefix: string } | null;
  redis: { url: string } | null;
  /** Debian's chromium for the console's browser tests (test/console/). */
  chromium: { executablePath: string } | null;
  skipped: Partial<Record<'sqlite' | 'postgres' | 'redis' | 'chromium', string>>;
}

export function lanes(): Lanes {
  return inject('lanes');
}

/** The database lanes of this run, e.g. ['sqlite', 'postgresql']. */
export function databaseLanes(): Provider[] {
  const l = lanes();
  return [...(l.sqlite ? (['sqlite'] as const) : []), ...(l.postgres ? (['postgresql'] as const) : [])];
}

/**
 * A fresh, migrated database for one test file: a copy of the run's template (a file copy for
 * SQLite, CREATE DATABASE … TEMPLATE for PostgreSQL).
 */
export async function createTestDatabase(provider: Provider): Promise<ScratchDatabase> {
  const l = lanes();
  const suffix = randomBytes(4).toString('hex');
  if (provider === 'sqlite') {
    if (!l.sqlite) throw new Error('the sqlite lane is not running');
    const dir = mkdtempSync(join(l.sqlite.dir, 'db-'));
    const file = join(dir, 'parley.db');
    copyFileSync(l.sqlite.templateFile, file);
    return { url: `file:${file}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  if (!l.postgres) throw new Error('the postgres lane is not running');
  const { adminUrl, templateName, prefix } = l.postgres;
  const name = `${prefix}_${suffix}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(adminUrl, `CREATE DATABASE "${name}" TEMPLATE "${templateName}"`);
      break;
    } catch (err) {
      // Two files copying the template at the same moment: PostgreSQL refuses one; try again.
      if (attempt >= 20 || !/being accessed by other users/.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
    }
  }
  return {
    url: withDatabaseName(adminUrl, name),
    drop: async () => {
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

/**
 * Registers `fn` once per database lane: `describe('name [sqlite]')`, `describe('name [postgresql]')`.
 * A lane that is not running shows as a skipped suite with the reason.
 */
export function describeEachDatabase(name: string, fn: (provider: Provider) => void): void {
  const l = lanes();
  for (const provider of ['sqlite', 'postgresql'] as const) {
    const running = provider === 'sqlite' ? l.sqlite : l.postgres;
    if (running) describe(`${name} [${provider}]`, () => fn(provider));
    else
      describe.skip(`${name} [${provider}] — skipped: ${l.skipped[provider === 'sqlite' ? 'sqlite' : 'postgres']}`, () =>
        fn(provider));
  }
}

/** Like describe, only when the Redis lane runs; otherwise a skipped suite that says why. */
export function describeWithRedis(name: string, fn: (redisUrl: string) => void): void {
  const l = lanes();
  if (l.redis) {
    const url = l.redis.url;
    describe(`${name} [redis]`, () => fn(url));
  } else describe.skip(`${name} [redis] — skipped: ${l.skipped.redis}`, () => fn(''));
}
