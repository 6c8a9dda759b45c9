import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import { PrismaPg } from '@prisma/adapter-pg';
import type { ArgType, SqlDriverAdapter, Transaction } from '@prisma/driver-adapter-utils';
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import * as sqliteVec from 'sqlite-vec';
import { PrismaClient as PostgresClient } from '../generated/postgresql/client';
import { PrismaClient as SqliteClient } from '../generated/sqlite/client';
import { migrationNames } from './migrate';
import { providerOf, sqliteFilePath } from './schema-engine';
import type { Provider } from './schema-source';
import { startWalCheckpointer, type WalCheckpointer, walAutocheckpointBackstopPages } from './wal-checkpointer';

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
  /** Made by the instance's background work (asBackgroundWork), not by a request. */
  background: boolean;
}

const backgroundWork = new AsyncLocalStorage<true>();

/**
 * Runs `fn` as the instance's own background work (the job runner's polls and jobs): the database
 * operations it makes, however deep, carry `background: true` in their query events, so a listener
 * can tell a request's operations from the work that happens around it.
 */
export function asBackgroundWork<T>(fn: () => T): T {
  return backgroundWork.run(true, fn);
}

/**
 * How this database compares embedding vectors (src/kb/vectors.ts):
 * - `sqlite-vec`: the sqlite-vec extension's `vec_distance_cosine`, in C;
 * - `sqlite-js`: a JavaScript function of the same name (sqlite-vec has no build for this platform);
 * - `pgvector`: PostgreSQL with the vector extension installed;
 * - `postgresql`: plain PostgreSQL, cosine similarity as a SQL expression over real[].
 */
export type VectorSupport = 'sqlite-vec' | 'sqlite-js' | 'pgvector' | 'postgresql';

/**
 * Statements run straight through the database driver, without Prisma's query compiler and
 * interpreter (about half a millisecond per operation): for the few statements of a runtime turn's
 * hot path (src/runtime/state-store.ts). Table and column names are Prisma's (no @@map), and values
 * are stored as Prisma stores them (`storedTimestamp`, JSON as text on SQLite).
 */
export type Driver = SqliteDriver | PostgresDriver;

/** A DateTime as the provider's Prisma adapter stores it, for driver statements that write one. */
export function storedTimestamp(provider: Provider, date: Date): string {
  const iso = date.toISOString();
  // The same text as the SQLite adapter writes, so comparisons and Prisma's reads agree.
  return provider === 'sqlite' ? iso.replace('Z', '+00:00') : iso;
}

/** What a driver call ran, for listeners that count statements (scripts/profile-server.ts). */
export interface DriverEvent {
  label: string;
  statements: number;
  /** Explicit transactions committed (a single statement outside one commits on its own, not counted). */
  commits: number;
  /** Made inside `asBackgroundWork` (the job runner's polls and jobs), as QueryEvent.background. */
  background: boolean;
  /** From the call to its end, the wait for the connection (SQLite's lock, the pool) included. */
  durationMs: number;
}

export interface SqliteStatements {
  run(sql: string, ...params: unknown[]): BetterSqlite3.RunResult;
  get<R>(sql: string, ...params: unknown[]): R | undefined;
  all<R>(sql: string, ...params: unknown[]): R[];
}

export interface SqliteDriver {
  provider: 'sqlite';
  /**
   * Runs `fn` on the connection alone: after Prisma's open transaction and statements in flight,
   * before any that come later (the lock of serializeWithTransactions). `fn` is synchronous, so
   * nothing else runs on the connection meanwhile; with `transaction`, its statements commit
   * together (BEGIN IMMEDIATE … COMMIT) or, when it throws, not at all. Statements are prepared
   * once per SQL text.
   */
  exclusive<T>(label: string, fn: (sql: SqliteStatements) => T, opts?: { transaction?: boolean }): Promise<T>;
  /**
   * `exclusive` with a transaction, for a function that awaits between its statements (a caller
   * whose statements come from an async API): BEGIN IMMEDIATE, `fn`, then COMMIT when it resolves or
   * ROLLBACK when it rejects, all under the connection's lock, so nothing else runs on the
   * connection meanwhile. `fn` must await only its own statements (which run synchronously) and
   * plain computation: anything that itself waits for the connection (a Prisma operation, another
   * driver call) would wait for this transaction forever. Statements made after `fn` settled are refused.
   */
  transaction<T>(label: string, fn: (sql: SqliteStatements) => Promise<T>): Promise<T>;
}

/** The statements of one PostgreSQL driver transaction, all on its one pooled connection. */
export interface PostgresStatements {
  query<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<R>>;
}

export interface PostgresDriver {
  provider: 'postgresql';
  /** One statement on a pooled connection (committed on its own). */
  query<R extends pg.QueryResultRow>(label: string, sql: string, params: unknown[]): Promise<pg.QueryResult<R>>;
  /**
   * Runs `fn` in one transaction on a connection taken from the pool for it alone: BEGIN, `fn`'s
   * statements, then COMMIT when `fn` resolves, or ROLLBACK when it rejects (and the rejection
   * goes on to the caller). Statements made after `fn` settled are refused, so nothing can run
   * outside the transaction on a connection that went back to the pool.
   */
  transaction<T>(label: string, fn: (sql: PostgresStatements) => Promise<T>): Promise<T>;
}

export interface Db {
  prisma: PrismaDb;
  driver: Driver;
  /** Called after every driver call (`driver`): Prisma's query listeners do not see those. */
  driverListeners: Set<(event: DriverEvent) => void>;
  provider: Provider;
  url: string;
  vectorSupport: VectorSupport;
  /** Called after every Prisma operation (and every `queryRows`). */
  queryListeners: Set<(event: QueryEvent) => void>;
  /**
   * Runs one read statement on the driver adapter that Prisma uses (the same connection or pool,
   * the same serialisation with transactions on SQLite), without Prisma's client around it:
   * measured at about a millisecond of CPU less per statement than `$queryRawUnsafe`. For hot
   * reads written in SQL whose caller converts the values it gets (strings, numbers, booleans or
   * 0/1, date-times as text or Dates, JSON as text or values). Placeholders: `?` on SQLite, `$n` on
   * PostgreSQL. Query events report it as operation `queryRows`, with no model. It runs outside
   * any transaction: never call it from inside one on SQLite, where it waits for the connection
   * that the transaction holds.
   */
  queryRows(sql: string, args: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /** Names of committed migrations that this database has not applied. */
  pendingMigrations(): Promise<string[]>;
  close(): Promise<void>;
}

export interface CreateDbOptions {
  /** PostgreSQL pool size (default 10). */
  poolSize?: number;
  /** SQLite busy timeout in milliseconds (default 5000). */
  busyTimeoutMs?: number;
  /**
   * Called when PostgreSQL ends a pooled connection on its own (a restart, an administrator's
   * pg_terminate_backend, the database dropped): the pool replaces it and the next query goes on.
   * Without a listener such an error would end the process. Default: one line on stderr.
   */
  onConnectionError?: (err: Error) => void;
}

/** Opens the database at `url` with the driver adapter its scheme calls for. */
export async function createDb(url: string, opts: CreateDbOptions = {}): Promise<Db> {
  const provider = providerOf(url);
  let base: PrismaDb;
  let vectorSupport: VectorSupport = 'postgresql';
  /** The adapter connection Prisma runs on, once connected (queryRows). */
  let connection: SqlDriverAdapter | undefined;
  const driverListeners = new Set<(event: DriverEvent) => void>();
  const report = (label: string, statements: number, commits: number, startedAt: number) => {
    if (driverListeners.size === 0) return;
    const background = backgroundWork.getStore() === true;
    const durationMs = performance.now() - startedAt;
    for (const listener of driverListeners) listener({ label, statements, commits, background, durationMs });
  };
  let sqliteConnection: BetterSqlite3.Database | null = null;
  let pgPool: pg.Pool | null = null;
  /** Told of a PostgreSQL connection lost outside a statement (the pool's, Prisma's, the driver's). */
  let onConnectionError: (err: Error) => void = () => {};
  const sqliteLock = createLock();
  if (provider === 'sqlite') {
    const file = sqliteFilePath(url);
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    const adapter = new PrismaBetterSqlite3({ url: file, timeout: opts.busyTimeoutMs ?? 5000 });
    // The adapter opens its better-sqlite3 connection in connect() and keeps it on `client`: add
    // the vector functions to that connection, the one every query of this client runs on.
    const connect = adapter.connect.bind(adapter);
    adapter.connect = async () => {
      const connected = await connect();
      const client = (connected as unknown as { client?: BetterSqlite3.Database }).client;
      if (client) {
        vectorSupport = addVectorFunctions(client);
        beginImmediate(client);
        (connected as unknown as { client: unknown }).client = withStatementCache(client);
        sqliteConnection = client;
      }
      connection = serializeWithTransactions(connected, sqliteLock);
      return connection;
    };
    base = new SqliteClient({
      adapter,
      // Every transaction queues for the one connection (above): wait longer than Prisma's 2 s.
      transactionOptions: { maxWait: 15_000 },
    });
  } else {
    onConnectionError =
      opts.onConnectionError ??
      ((err: Error) => process.stderr.write(`parley: a PostgreSQL connection was lost: ${err.message}\n`));
    const adapter = new PrismaPg(
      {
        connectionString: url,
        max: opts.poolSize ?? 10,
        // Parley's queries are short (a page, a search, a filter of up to 200 conditions); JIT
        // compilation, which PostgreSQL starts above a cost estimate those reach on large tables,
        // took seconds where the query itself takes milliseconds.
        options: '-c jit=off',
      },
      { onPoolError: onConnectionError, onConnectionError },
    );
    // The pool the adapter makes in connect(): driver statements share it (and its size).
    const connect = adapter.connect.bind(adapter);
    adapter.connect = async () => {
      const connected = await connect();
      connection = connected;
      pgPool = connected.underlyingDriver() as pg.Pool;
      return connected;
    };
    base = new PostgresClient({ adapter }) as unknown as PrismaDb;
  }
  await base.$connect();
  /** Checkpoints this SQLite file's WAL off the event loop (src/db/wal-checkpointer.ts). */
  let checkpointer: WalCheckpointer | null = null;
  if (provider === 'sqlite') {
    // The adapter holds one connection, so these hold for every query made through this client.
    const [mode] = await base.$queryRawUnsafe<{ journal_mode: string }[]>('PRAGMA journal_mode = WAL');
    await base.$executeRawUnsafe('PRAGMA synchronous = NORMAL');
    await base.$executeRawUnsafe('PRAGMA foreign_keys = ON');
    // Temporary tables, indices and statement journals in memory, not in files under /var/tmp:
    // a multi-row statement inside a transaction (the record batch's) made a statement journal
    // file, with a page write per page it changed, created and removed each time.
    await base.$executeRawUnsafe('PRAGMA temp_store = MEMORY');
    await base.$queryRawUnsafe(`PRAGMA busy_timeout = ${Math.trunc(opts.busyTimeoutMs ?? 5000)}`);
    const file = sqliteFilePath(url);
    if (mode?.journal_mode === 'wal' && file !== ':memory:') {
      try {
        checkpointer = await startWalCheckpointer(file);
        await base.$queryRawUnsafe(`PRAGMA wal_autocheckpoint = ${walAutocheckpointBackstopPages}`);
      } catch (err) {
        // SQLite's own checkpoints (on this thread, every 1,000 pages) go on as they did.
        await checkpointer?.stop();
        checkpointer = null;
        process.emitWarning(`SQLite WAL checkpoints stay on the main thread: ${(err as Error).message}`);
      }
    }
  } else {
    const rows = await base.$queryRawUnsafe<unknown[]>("SELECT 1 FROM pg_extension WHERE extname = 'vector'");
    vectorSupport = rows.length > 0 ? 'pgvector' : 'postgresql';
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
          const event = {
            model,
            operation,
            durationMs: performance.now() - started,
            background: backgroundWork.getStore() === true,
          };
          for (const listener of queryListeners) listener(event);
        }
      },
    },
  }) as unknown as PrismaDb;

  const queryRows = async (sql: string, args: readonly unknown[]) => {
    if (!connection) throw new Error('the database is not connected');
    const started = queryListeners.size ? performance.now() : 0;
    try {
      const result = await connection.queryRaw({ sql, args: [...args], argTypes: args.map(argTypeOf) });
      return result.rows.map((row) => {
        const out: Record<string, unknown> = {};
        result.columnNames.forEach((name, i) => {
          out[name] = row[i];
        });
        return out;
      });
    } finally {
      if (queryListeners.size) {
        const event = {
          model: undefined,
          operation: 'queryRows',
          durationMs: performance.now() - started,
          background: backgroundWork.getStore() === true,
        };
        for (const listener of queryListeners) listener(event);
      }
    }
  };

  let driver: Driver;
  if (provider === 'sqlite') {
    const connection = sqliteConnection as BetterSqlite3.Database | null;
    if (!connection) throw new Error('the SQLite adapter did not open its connection');
    driver = sqliteDriver(connection, sqliteLock, report);
  } else {
    const pool = pgPool as pg.Pool | null;
    if (!pool) throw new Error('the PostgreSQL adapter did not make its pool');
    driver = postgresDriver(pool, report, onConnectionError);
  }

  return {
    prisma,
    driver,
    driverListeners,
    provider,
    url,
    queryRows,
    get vectorSupport() {
      return vectorSupport;
    },
    queryListeners,
    async pendingMigrations() {
      const rows = await base.$queryRawUnsafe<{ migration_name: string }[]>(
        'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
      );
      const applied = new Set(rows.map((r) => r.migration_name));
      return migrationNames(provider).filter((name) => !applied.has(name));
    },
    async close() {
      // The worker's connection first: this one, closing last, checkpoints the rest and removes the WAL.
      await checkpointer?.stop();
      await base.$disconnect();
    },
  };
}

function argTypeOf(value: unknown): ArgType {
  if (typeof value === 'number') return { scalarType: Number.isInteger(value) ? 'int' : 'float', arity: 'scalar' };
  if (typeof value === 'boolean') return { scalarType: 'boolean', arity: 'scalar' };
  if (typeof value === 'bigint') return { scalarType: 'bigint', arity: 'scalar' };
  return { scalarType: typeof value === 'string' ? 'string' : 'unknown', arity: 'scalar' };
}

/** Cosine distance of two little-endian float32 vectors (1 − cosine similarity), as sqlite-vec defines it. */
export function cosineDistance(a: Uint8Array, b: Uint8Array): number | null {
  if (a.byteLength !== b.byteLength || a.byteLength % 4 !== 0) return null;
  const x = new Float32Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));
  const y = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  let dot = 0;
  let nx = 0;
  let ny = 0;
  for (let i = 0; i < x.length; i++) {
    const xi = x[i] as number;
    const yi = y[i] as number;
    dot += xi * yi;
    nx += xi * xi;
    ny += yi * yi;
  }
  return nx === 0 || ny === 0 ? null : 1 - dot / Math.sqrt(nx * ny);
}

/** Loads sqlite-vec into a connection, or defines its `vec_distance_cosine` in JavaScript where it has no build. */
function addVectorFunctions(client: BetterSqlite3.Database): VectorSupport {
  try {
    sqliteVec.load(client);
    return 'sqlite-vec';
  } catch {
    client.function('vec_distance_cosine', { deterministic: true }, (a: unknown, b: unknown) =>
      a instanceof Uint8Array && b instanceof Uint8Array ? cosineDistance(a, b) : null,
    );
    return 'sqlite-js';
  }
}

/** Prepared statements kept per connection (distinct SQL texts; Parley's hot paths use a few dozen). */
const statementCacheSize = 500;

/**
 * The connection as the Prisma adapter sees it, with its prepared statements reused: the adapter
 * prepares every statement anew (`prepare(sql).bind(args).run()`, SQLite parsing and planning the
 * SQL each time), here a statement is prepared once per SQL text and run with each call's
 * arguments. A statement's arguments are passed to each run, never bound to it, so one statement
 * serves every call; better-sqlite3 runs a statement to completion synchronously, so calls never
 * share one mid-run. Only `prepare` differs from the connection; everything else is its own.
 */
function withStatementCache(client: BetterSqlite3.Database): BetterSqlite3.Database {
  const cache = new Map<string, BetterSqlite3.Statement>();
  const statementOf = (sql: string) => {
    let stmt = cache.get(sql);
    if (stmt) {
      // Most recently used last, so the oldest goes first when the cache is full.
      cache.delete(sql);
    } else {
      stmt = client.prepare(sql);
      if (cache.size >= statementCacheSize) cache.delete(cache.keys().next().value as string);
    }
    cache.set(sql, stmt);
    return stmt;
  };
  const run = (stmt: BetterSqlite3.Statement, args: unknown[]) => ({
    reader: stmt.reader,
    run: () => stmt.run(args),
    columns: () => stmt.columns(),
    raw: () => ({ all: () => stmt.raw(true).all(args) }),
  });
  return new Proxy(client, {
    get(target, property) {
      if (property === 'prepare') {
        return (sql: string) => {
          const stmt = statementOf(sql);
          return {
            ...run(stmt, []),
            bind: (...args: unknown[]) => run(stmt, args.length === 1 && Array.isArray(args[0]) ? args[0] : args),
          };
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The SQLite driver access (see SqliteDriver); its own prepared statements, one per SQL text. */
function sqliteDriver(
  connection: BetterSqlite3.Database,
  lock: Lock,
  report: (label: string, statements: number, commits: number, startedAt: number) => void,
): SqliteDriver {
  const prepared = new Map<string, BetterSqlite3.Statement>();
  const statementOf = (sql: string) => {
    let stmt = prepared.get(sql);
    if (!stmt) {
      // The hot path's few fixed texts; a bound, not an expected size.
      if (prepared.size >= statementCacheSize) prepared.clear();
      stmt = connection.prepare(sql);
      // The adapter turns safe integers on for the connection; callers here get plain numbers.
      stmt.safeIntegers(false);
      prepared.set(sql, stmt);
    }
    return stmt;
  };
  /** The statements of one call; `open` says whether they may still run (false once it settled). */
  const statementsOf = (label: string, open: () => boolean) => {
    const counted = { statements: 0 };
    const check = () => {
      if (!open()) throw new Error(`a statement of "${label}" came after its end`);
      counted.statements++;
    };
    const sql: SqliteStatements = {
      run: (text, ...params) => {
        check();
        return statementOf(text).run(...params);
      },
      get: <R>(text: string, ...params: unknown[]) => {
        check();
        return statementOf(text).get(...params) as R | undefined;
      },
      all: <R>(text: string, ...params: unknown[]) => {
        check();
        return statementOf(text).all(...params) as R[];
      },
    };
    return { sql, counted };
  };
  /** Ends the connection's open transaction, if any, without throwing (the caller has its error). */
  const rollback = () => {
    try {
      if (connection.inTransaction) statementOf('ROLLBACK').run();
    } catch {
      // Nothing better to do: SQLite rolls back on its own when it cannot go on.
    }
  };
  return {
    provider: 'sqlite',
    async transaction<T>(label: string, fn: (sql: SqliteStatements) => Promise<T>): Promise<T> {
      const startedAt = performance.now();
      let open = false;
      const { sql, counted } = statementsOf(label, () => open);
      const release = await lock.acquire();
      let committed = 0;
      try {
        // IMMEDIATE for the reason beginImmediate gives.
        statementOf('BEGIN IMMEDIATE').run();
        open = true;
        let result: T;
        try {
          result = await fn(sql);
        } catch (err) {
          open = false;
          rollback();
          throw err;
        }
        open = false;
        statementOf('COMMIT').run();
        committed = 1;
        return result;
      } finally {
        open = false;
        // A COMMIT that failed (SQLITE_BUSY from another process) leaves the transaction open.
        rollback();
        release();
        report(label, counted.statements, committed, startedAt);
      }
    },
    async exclusive(label, fn, opts) {
      const startedAt = performance.now();
      let settled = false;
      const { sql, counted } = statementsOf(label, () => !settled);
      const release = await lock.acquire();
      let committed = 0;
      try {
        if (!opts?.transaction) return fn(sql);
        // IMMEDIATE for the reason beginImmediate gives.
        const result = connection.transaction(() => fn(sql)).immediate();
        committed = 1;
        return result;
      } finally {
        settled = true;
        release();
        report(label, counted.statements, committed, startedAt);
      }
    },
  };
}

/** The PostgreSQL driver access (see PostgresDriver), on the pool Prisma's adapter made. */
function postgresDriver(
  pool: pg.Pool,
  report: (label: string, statements: number, commits: number, startedAt: number) => void,
  onConnectionError: (err: Error) => void,
): PostgresDriver {
  return {
    provider: 'postgresql',
    async query(label, sql, params) {
      const startedAt = performance.now();
      try {
        return await pool.query(sql, params);
      } finally {
        report(label, 1, 0, startedAt);
      }
    },
    async transaction<T>(label: string, fn: (sql: PostgresStatements) => Promise<T>): Promise<T> {
      const startedAt = performance.now();
      const client = await pool.connect();
      // While checked out the pool does not listen to the connection: one lost between two
      // statements (a transaction waiting on its caller's work, PostgreSQL restarted or the backend
      // terminated) would emit an 'error' no one hears, which ends the process. Heard here; the
      // next statement fails with it, and the transaction rolls back on the server.
      client.on('error', onConnectionError);
      // Only `fn`'s statements are counted, as on SQLite; BEGIN … COMMIT is the one commit.
      let statements = 0;
      let committed = 0;
      let open = false;
      /** The transaction ended by COMMIT or ROLLBACK: the connection can go back to the pool. */
      let ended = false;
      const sql: PostgresStatements = {
        query: <R extends pg.QueryResultRow>(text: string, params: unknown[]) => {
          if (!open) return Promise.reject(new Error(`a statement of "${label}" came outside its transaction`));
          statements++;
          return client.query<R>(text, params);
        },
      };
      try {
        await client.query('BEGIN');
        open = true;
        let result: T;
        try {
          result = await fn(sql);
        } catch (err) {
          open = false;
          await client.query('ROLLBACK').then(
            () => {
              ended = true;
            },
            () => {},
          );
          throw err;
        }
        open = false;
        await client.query('COMMIT');
        ended = true;
        committed = 1;
        return result;
      } finally {
        open = false;
        // A connection whose BEGIN, COMMIT or ROLLBACK failed may still be inside a transaction:
        // destroyed rather than handed to the next caller.
        client.off('error', onConnectionError);
        client.release(!ended);
        report(label, statements, committed, startedAt);
      }
    },
  };
}

interface Lock {
  acquire(): Promise<() => void>;
}

/** A FIFO lock: `acquire` resolves with the function that releases it. */
function createLock(): Lock {
  let tail: Promise<void> = Promise.resolve();
  return {
    acquire() {
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const acquired = tail.then(() => {
        let released = false;
        return () => {
          if (released) return;
          released = true;
          release();
        };
      });
      tail = tail.then(() => held);
      return acquired;
    },
  };
}

/**
 * Transactions on SQLite start with BEGIN IMMEDIATE instead of the adapter's plain (deferred) BEGIN.
 * Another process may write the same file (`parley demo` or `parley project create` beside a
 * running `parley serve`). A deferred transaction that reads and then writes, after the other
 * process committed in between, cannot upgrade its read snapshot: SQLite answers SQLITE_BUSY at
 * once, without waiting for the busy timeout, and the transaction fails. IMMEDIATE takes the write
 * lock at BEGIN, waiting up to the busy timeout for the other process's transaction to end.
 */
function beginImmediate(client: BetterSqlite3.Database): void {
  const prepare = client.prepare.bind(client);
  client.prepare = ((source: string) =>
    prepare(source === 'BEGIN' ? 'BEGIN IMMEDIATE' : source)) as BetterSqlite3.Database['prepare'];
}

/**
 * The SQLite adapter runs everything on one connection, and only its transactions take its lock:
 * a statement from another request, issued while an interactive transaction awaits between its
 * statements, would run inside that transaction — a rollback would silently undo it, and reads
 * would see uncommitted rows. Here every statement outside a transaction waits for the open
 * transaction to end (and a transaction waits for statements in flight), as separate connections
 * would under SQLite's own locking. The driver access (SqliteDriver.exclusive) takes the same lock.
 */
function serializeWithTransactions(adapter: SqlDriverAdapter, lock: Lock): SqlDriverAdapter {
  const queryRaw = adapter.queryRaw.bind(adapter);
  const executeRaw = adapter.executeRaw.bind(adapter);
  const executeScript = adapter.executeScript.bind(adapter);
  const startTransaction = adapter.startTransaction.bind(adapter);
  const alone = async <T>(fn: () => Promise<T>): Promise<T> => {
    const release = await lock.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  };
  adapter.queryRaw = (query) => alone(() => queryRaw(query));
  adapter.executeRaw = (query) => alone(() => executeRaw(query));
  adapter.executeScript = (script) => alone(() => executeScript(script));
  adapter.startTransaction = async (isolationLevel) => {
    const release = await lock.acquire();
    let tx: Transaction;
    try {
      tx = await startTransaction(isolationLevel);
    } catch (err) {
      release();
      throw err;
    }
    const commit = tx.commit.bind(tx);
    const rollback = tx.rollback.bind(tx);
    tx.commit = () => commit().finally(release);
    tx.rollback = () => rollback().finally(release);
    return tx;
  };
  return adapter;
}
