import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import { PrismaPg } from '@prisma/adapter-pg';
import {
  bindMigrationAwareSqlAdapterFactory,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
} from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm/schema_engine_bg';
import * as engineGlue from '@prisma/schema-engine-wasm/schema_engine_bg';
import pg from 'pg';
import { type Provider, providerSchemaFiles } from './schema-source';

export type { SchemaEngine };

let wasmReady = false;

/**
 * Instantiates Prisma's WASM schema engine once per process. The package entry imports the .wasm
 * file as an ES module, which Node 20 cannot load, so the module is instantiated by hand with the
 * JS glue as its imports (what a bundler would do).
 */
function initWasm(): void {
  if (wasmReady) return;
  const gluePath = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm/schema_engine_bg');
  const wasmPath = join(dirname(gluePath), 'schema_engine_bg.wasm');
  const module = new WebAssembly.Module(readFileSync(wasmPath));
  const instance = new WebAssembly.Instance(module, {
    './schema_engine_bg.js': engineGlue as unknown as WebAssembly.ModuleImports,
  });
  const exports = instance.exports as WebAssembly.Exports & { __wbindgen_start: () => void };
  engineGlue.__wbg_set_wasm(exports);
  exports.__wbindgen_start();
  wasmReady = true;
}

export function providerOf(url: string): Provider {
  if (/^postgres(ql)?:\/\//.test(url)) return 'postgresql';
  if (url.startsWith('file:')) return 'sqlite';
  throw new Error(`DATABASE_URL must start with file:, postgres:// or postgresql:// (got "${url.split(':')[0]}:")`);
}

export function sqliteFilePath(url: string): string {
  return url.replace(/^file:(\/\/)?/, '').split('?')[0] ?? '';
}

const PG_INTERNAL_CHAR_OID = 18;
const PG_TEXT_OID = 25;

type QueryResultLike = { fields?: { dataTypeID: number }[] };

function reportCatalogCharAsText<T>(result: T): T {
  for (const r of (Array.isArray(result) ? result : [result]) as QueryResultLike[]) {
    for (const field of r?.fields ?? []) if (field.dataTypeID === PG_INTERNAL_CHAR_OID) field.dataTypeID = PG_TEXT_OID;
  }
  return result;
}

/**
 * The schema engine reads catalog columns of PostgreSQL's internal "char" type (pg_class.relkind
 * and others) when it describes a database, and the pg driver adapter has no mapping for that
 * type, so a diff from a live database fails. Its values are one-character strings: report the
 * column as text. Only the schema engine's connections use this client.
 */
class CatalogCharAsTextClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: pg's query() has a dozen overloads; this passes them all through.
  override query(...args: any[]): any {
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (err: Error | null, res: unknown) => last(err, res && reportCatalogCharAsText(res));
      // biome-ignore lint/suspicious/noExplicitAny: see above.
      return (super.query as any)(...args);
    }
    // biome-ignore lint/suspicious/noExplicitAny: see above.
    const out = (super.query as any)(...args);
    return out && typeof out.then === 'function' ? out.then(reportCatalogCharAsText) : out;
  }
}

/**
 * The pg driver adapter runs a migration script by splitting it on every `;`, which breaks any
 * statement with a semicolon inside it: a PL/pgSQL function body (the knowledge base's full-text
 * trigger), a string literal, a comment. PostgreSQL's simple query protocol takes the whole script
 * at once and runs it as one implicit transaction, as `psql -1` and `prisma migrate deploy` do.
 */
function runScriptsWhole(adapter: SqlDriverAdapter, pool: pg.Pool): SqlDriverAdapter {
  const onError = (adapter as unknown as { onError?: (err: unknown) => never }).onError?.bind(adapter);
  adapter.executeScript = async (script: string) => {
    try {
      await pool.query(script);
    } catch (err) {
      if (onError) onError(err);
      throw err;
    }
  };
  return adapter;
}

/**
 * The schema engine reads a SQLite partial index's predicate with
 * `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = "<name>"`: the name in double
 * quotes, which SQLite takes for a string only when double-quoted strings are allowed, and
 * better-sqlite3 builds SQLite without them, so describing a database with a partial index (the
 * usage events' idempotency key, prisma/migrations/sqlite) failed. The name is written as the
 * string literal it means. Only the schema engine's connections use this.
 */
function quotePartialIndexNames(adapter: SqlDriverAdapter): SqlDriverAdapter {
  const queryRaw = adapter.queryRaw.bind(adapter);
  const described = /^(SELECT sql FROM sqlite_master WHERE type = 'index' AND name = )"((?:[^"]|"")*)"(;?)$/;
  adapter.queryRaw = (query) => {
    const match = described.exec(query.sql);
    if (!match) return queryRaw(query);
    const name = match[2]!.replaceAll('""', '"').replaceAll("'", "''");
    return queryRaw({ ...query, sql: `${match[1]}'${name}'${match[3]}` });
  };
  return adapter;
}

function adapterFactory(url: string): { factory: SqlMigrationAwareDriverAdapterFactory; pool?: pg.Pool } {
  if (providerOf(url) === 'postgresql') {
    const pool = new pg.Pool({ connectionString: url, Client: CatalogCharAsTextClient, max: 2 });
    // An idle connection the server ends is replaced on the next query; unheard, it would end the process.
    pool.on('error', () => {});
    return { factory: new PrismaPg(pool), pool };
  }
  return { factory: new PrismaBetterSqlite3({ url: sqliteFilePath(url) }) };
}

export interface OpenSchemaEngine {
  engine: SchemaEngine;
  /** Frees the engine and closes the connections it opened (freeing alone leaves them open, and
   * on SQLite the last one keeps the database locked). */
  close(): Promise<void>;
}

/** A schema engine bound to the database at `url`, through the same driver adapter the app uses. */
export async function openSchemaEngine(
  url: string,
  log: (message: string) => void = () => {},
): Promise<OpenSchemaEngine> {
  initWasm();
  const provider = providerOf(url);
  const datamodels = providerSchemaFiles(provider).map((f) => [f.path, f.content] as [string, string]);
  const { factory: inner, pool } = adapterFactory(url);
  const opened: SqlDriverAdapter[] = [];
  const tracked: SqlMigrationAwareDriverAdapterFactory = {
    provider: inner.provider,
    adapterName: inner.adapterName,
    connect: async () => {
      const adapter = await inner.connect();
      opened.push(adapter);
      return pool ? runScriptsWhole(adapter, pool) : quotePartialIndexNames(adapter);
    },
    connectToShadowDb: async () => {
      const adapter = await inner.connectToShadowDb();
      opened.push(adapter);
      return adapter;
    },
  };
  const engine = await engineGlue.SchemaEngine.new(
    { datamodels },
    (line: string) => log(line),
    bindMigrationAwareSqlAdapterFactory(tracked),
  );
  return {
    engine,
    close: async () => {
      engine.free();
      await Promise.allSettled(opened.map((adapter) => adapter.dispose()));
      await pool?.end();
    },
  };
}
