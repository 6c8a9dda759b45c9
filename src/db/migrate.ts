import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { MigrationList, SchemaFilter } from '@prisma/schema-engine-wasm/schema_engine_bg';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openSchemaEngine, providerOf, sqliteFilePath } from './schema-engine';
import { migrationsDir, type Provider, projectRoot, providerSchemaFiles } from './schema-source';

/**
 * Tables that migrations create by hand (raw SQL Prisma cannot model, such as full-text indexes).
 * The schema engine must leave them alone when it diffs the database against the models.
 */
export const externalTables: Record<Provider, string[]> = {
  // The knowledge base's full-text index (an FTS5 table and its shadow tables) and embeddings.
  sqlite: [
    'kb_chunk_fts',
    'kb_chunk_fts_data',
    'kb_chunk_fts_idx',
    'kb_chunk_fts_docsize',
    'kb_chunk_fts_config',
    'kb_chunk_embedding',
  ],
  postgresql: ['public.kb_chunk_search', 'public.kb_chunk_embedding'],
};

/**
 * Indexes that migrations create by hand on tables Prisma does models (an index type or operator
 * class the schema shared by both providers cannot declare). The schema engine would drop them to
 * match the models, so the drift check removes exactly those statements from its diff.
 */
export const migrationOnlyIndexes: Record<Provider, string[]> = {
  sqlite: [],
  // GIN (jsonb_path_ops) over KbChunk.metadata: the metadata filter's containment tests (docs/performance.md).
  postgresql: ['KbChunk_metadata_gin_idx'],
};

/** The diff without the statements that would drop `migrationOnlyIndexes`. */
export function withoutExpectedDrift(provider: Provider, sql: string): string {
  let out = sql;
  for (const name of migrationOnlyIndexes[provider]) {
    const quoted = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(`(-- DropIndex\\s*)?DROP INDEX (IF EXISTS )?("public"\\.)?"${quoted}";\\s*`, 'g'), '');
  }
  return out;
}

function schemaFilter(provider: Provider): SchemaFilter {
  return { externalTables: externalTables[provider], externalEnums: [] };
}

/** The committed migrations of a provider, as the schema engine wants them. */
export function readMigrationsList(provider: Provider): MigrationList {
  const baseDir = migrationsDir(provider);
  const lockPath = join(baseDir, 'migration_lock.toml');
  const names = existsSync(baseDir)
    ? readdirSync(baseDir, { withFileTypes: true })
        .filter((d) => d.isDirectory() && existsSync(join(baseDir, d.name, 'migration.sql')))
        .map((d) => d.name)
        .sort()
    : [];
  return {
    baseDir,
    lockfile: { path: 'migration_lock.toml', content: existsSync(lockPath) ? readFileSync(lockPath, 'utf8') : null },
    shadowDbInitScript: '',
    migrationDirectories: names.map((name) => ({
      path: name,
      migrationFile: {
        path: 'migration.sql',
        content: { tag: 'ok', value: readFileSync(join(baseDir, name, 'migration.sql'), 'utf8') },
      },
    })),
  };
}

export function migrationNames(provider: Provider): string[] {
  return readMigrationsList(provider).migrationDirectories.map((d) => d.path);
}

/**
 * Serialises migrations between instances that start together on one PostgreSQL database, with a
 * session advisory lock held on a connection of its own.
 */
async function withMigrationLock<T>(url: string, fn: () => Promise<T>): Promise<T> {
  if (providerOf(url) !== 'postgresql') return fn();
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {}); // a lost connection fails the awaited query instead
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock(7270736901)');
    return await fn();
  } finally {
    await client.query('SELECT pg_advisory_unlock(7270736901)').catch(() => {});
    await client.end();
  }
}

/**
 * Names of the migrations the database at `url` has finished applying, read with a plain query
 * (no schema engine). An empty list when the database, or its migrations table, does not exist yet.
 */
export async function readAppliedMigrations(url: string): Promise<string[]> {
  const sql = 'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL';
  if (providerOf(url) === 'sqlite') {
    const file = sqliteFilePath(url);
    if (file === ':memory:' || !existsSync(file)) return [];
    const db = new Database(file, { readonly: true, fileMustExist: true, timeout: 5000 });
    try {
      const hasTable = db
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_prisma_migrations'")
        .get();
      return hasTable ? (db.prepare(sql).all() as { migration_name: string }[]).map((r) => r.migration_name) : [];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {}); // a lost connection fails the awaited query instead
  await client.connect();
  try {
    const { rows } = await client.query<{ migration_name: string }>(sql);
    return rows.map((r) => r.migration_name);
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return []; // undefined_table: nothing applied yet
    throw err;
  } finally {
    await client.end();
  }
}

/**
 * Applies pending migrations and records them in `_prisma_migrations` exactly as
 * `prisma migrate deploy` does, so the normal Prisma CLI can take over the same history.
 * Returns the names of the migrations applied now.
 */
export async function applyMigrations(url: string, log: (line: string) => void = () => {}): Promise<string[]> {
  const provider = providerOf(url);
  if (provider === 'sqlite') {
    const file = sqliteFilePath(url);
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  }
  // The schema engine locks a SQLite database exclusively, which fails while a server has it open;
  // so open the engine only when there is something to apply (a CLI command next to a running
  // server then works), which also spares every start the engine's load time.
  const applied = new Set(await readAppliedMigrations(url));
  if (migrationNames(provider).every((name) => applied.has(name))) return [];
  return withMigrationLock(url, async () => {
    const { engine, close } = await openSchemaEngine(url, log);
    try {
      const result = await engine.applyMigrations({
        migrationsList: readMigrationsList(provider),
        filters: schemaFilter(provider),
      });
      return result.appliedMigrationNames;
    } finally {
      await close();
    }
  });
}

/**
 * The SQL that would bring the database at `url` to the models in prisma/schema; an empty string
 * when they agree. Used to author migrations and, in tests, to prove the history matches the models.
 */
export async function diffDatabaseToSchema(url: string): Promise<string> {
  const provider = providerOf(url);
  const files = providerSchemaFiles(provider);
  const { engine, close } = await openSchemaEngine(url);
  try {
    const result = await engine.diff({
      from: { tag: 'schemaDatasource', files, configDir: projectRoot },
      to: { tag: 'schemaDatamodel', files },
      script: true,
      exitCode: null,
      filters: schemaFilter(provider),
    });
    const sql = withoutExpectedDrift(provider, result.stdout ?? '');
    return /^\s*(-- This is an empty migration\.)?\s*$/.test(sql) ? '' : sql;
  } finally {
    await close();
  }
}
