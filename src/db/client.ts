import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient as PostgresClient } from '../generated/postgresql/client';
import { PrismaClient as SqliteClient } from '../generated/sqlite/client';
import { migrationNames } from './migrate';
import { providerOf, sqliteFilePath } from './schema-engine';
import type { Provider } from './schema-source';

/**
 * The Prisma client. Both providers are generated from the same models; the type is SQLite's,
 * whose query API is the narrower of the two, so code written against it runs on both.
 */
export type PrismaDb = SqliteClient;

/** One Prisma model operation, as seen by query listeners (tests use it to catch N+1 queries). */
export interface QueryEvent {
  model: string | undefined;
  operation: string;
  durationMs: number;
}

export interface Db {
  prisma: PrismaDb;
  provider: Provider;
  url: string;
  /** Called after every Prisma operation. */
  queryListeners: Set<(event: QueryEvent) => void>;
  /** Names of committed migrations that this database has not applied. */
  pendingMigrations(): Promise<string[]>;
  close(): Promise<void>;
}

export interface CreateDbOptions {
  /** PostgreSQL pool size (default 10). */
  poolSize?: number;
  /** SQLite busy timeout in milliseconds (default 5000). */
  busyTimeoutMs?: number;
}

/** Opens the database at `url` with the driver adapter its scheme calls for. */
export async function createDb(url: string, opts: CreateDbOptions = {}): Promise<Db> {
  const provider = providerOf(url);
  let base: PrismaDb;
  if (provider === 'sqlite') {
    const file = sqliteFilePath(url);
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    base = new SqliteClient({ adapter: new PrismaBetterSqlite3({ url: file, timeout: opts.busyTimeoutMs ?? 5000 }) });
  } else {
    const adapter = new PrismaPg({ connectionString: url, max: opts.poolSize ?? 10 });
    base = new PostgresClient({ adapter }) as unknown as PrismaDb;
  }
  await base.$connect();
  if (provider === 'sqlite') {
    // The adapter holds one connection, so these hold for every query made through this client.
    await base.$queryRawUnsafe('PRAGMA journal_mode = WAL');
    await base.$executeRawUnsafe('PRAGMA synchronous = NORMAL');
    await base.$executeRawUnsafe('PRAGMA foreign_keys = ON');
    await base.$queryRawUnsafe(`PRAGMA busy_timeout = ${Math.trunc(opts.busyTimeoutMs ?? 5000)}`);
  }

  const queryListeners = new Set<(event: QueryEvent) => void>();
  const prisma = base.$extends({
    query: {
      async $allOperations({ model, operation, args, query }) {
        if (queryListeners.size === 0) return query(args);
        const started = performance.now();
        try {
          return await query(args);
        } finally {
          const event = { model, operation, durationMs: performance.now() - started };
          for (const listener of queryListeners) listener(event);
        }
      },
    },
  }) as unknown as PrismaDb;

  return {
    prisma,
    provider,
    url,
    queryListeners,
    async pendingMigrations() {
      const rows = await base.$queryRawUnsafe<{ migration_name: string }[]>(
        'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
      );
      const applied = new Set(rows.map((r) => r.migration_name));
      return migrationNames(provider).filter((name) => !applied.has(name));
    },
    async close() {
      await base.$disconnect();
    },
  };
}
