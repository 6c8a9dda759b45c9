import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Provider } from './schema-source';

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Where throwaway PostgreSQL databases are created (tests, migration authoring). */
export const defaultPgAdminUrl = 'postgresql://postgres@127.0.0.1:5432/postgres';

export function withDatabaseName(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A new, empty database: a file in a temporary directory for SQLite, a new database on the server
 * of `pgAdminUrl` for PostgreSQL (optionally copied from a template database).
 */
export async function createScratchDatabase(
  provider: Provider,
  opts: { pgAdminUrl?: string; prefix?: string; template?: string } = {},
): Promise<ScratchDatabase> {
  const prefix = opts.prefix ?? 'parley_scratch';
  if (provider === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
    return {
      url: `file:${join(dir, 'parley.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const adminUrl = opts.pgAdminUrl ?? defaultPgAdminUrl;
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE "${name}"${opts.template ? ` TEMPLATE "${opts.template}"` : ''}`);
  return {
    url: withDatabaseName(adminUrl, name),
    drop: async () => {
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

export async function adminQuery(adminUrl: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: adminUrl });
  // A connection ended by the server between queries surfaces in the awaited call, not as an event.
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}
