/**
 * Shared pieces of the benchmarks: a real server over a scratch database, percentiles, HTTP load,
 * and a printer. Every figure is printed beside a baseline measured in the same run, because the
 * machines are shared and absolute numbers drift from run to run.
 */
import { copyFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { createProject } from '../src/admin/service';
import { applyMigrations } from '../src/db/migrate';
import { sqliteFilePath } from '../src/db/schema-engine';
import type { Provider } from '../src/db/schema-source';
import { createScratchDatabase, defaultPgAdminUrl, type ScratchDatabase } from '../src/db/scratch';
import { type Config, loadConfig } from '../src/env';
import { createLogger } from '../src/lib/logger';
import { type RunningServer, startServer } from '../src/server';
import { createServices } from '../src/services';

export interface BenchContext {
  /** Database providers to measure (default both; `--providers sqlite` narrows). */
  providers: Provider[];
  /** Shorter runs (`--quick`), for checking that a suite works. */
  quick: boolean;
  pgAdminUrl: string;
  /**
   * Databases migrated once per provider and copied for each server of the run (`npm run bench`
   * sets it). Without it every server migrates its own empty database.
   */
  templates?: DatabaseTemplates;
}

/** One migrated template database per provider, copied for each server of a run. */
export interface DatabaseTemplates {
  /** A new database with every migration applied: a copy of the provider's template. */
  create(provider: Provider): Promise<ScratchDatabase>;
  /** Drops the templates. */
  drop(): Promise<void>;
}

/**
 * Migrating an empty database takes seconds (the WASM schema engine applies every migration); a
 * run starts a dozen servers. The template is migrated once, as for the test suite, and copied:
 * a file copy for SQLite, CREATE DATABASE … TEMPLATE for PostgreSQL. The copy is the same schema
 * a migrated database has, so nothing measured changes.
 */
export function createDatabaseTemplates(pgAdminUrl: string): DatabaseTemplates {
  const templates = new Map<Provider, Promise<ScratchDatabase>>();
  const template = (provider: Provider) => {
    let made = templates.get(provider);
    if (!made) {
      made = (async () => {
        const db = await createScratchDatabase(provider, { pgAdminUrl, prefix: 'parley_bench_template' });
        await applyMigrations(db.url);
        return db;
      })();
      templates.set(provider, made);
    }
    return made;
  };
  return {
    async create(provider) {
      const source = await template(provider);
      if (provider === 'sqlite') {
        const db = await createScratchDatabase('sqlite', { prefix: 'parley_bench' });
        copyFileSync(sqliteFilePath(source.url), sqliteFilePath(db.url));
        return db;
      }
      return createScratchDatabase('postgresql', {
        pgAdminUrl,
        prefix: 'parley_bench',
        template: new URL(source.url).pathname.slice(1),
      });
    },
    async drop() {
      for (const made of templates.values()) await (await made.catch(() => null))?.drop();
      templates.clear();
    },
  };
}

export interface BenchSuite {
  name: string;
  description: string;
  run(ctx: BenchContext): Promise<void>;
}

export interface BenchServer {
  provider: Provider;
  url: string;
  running: RunningServer;
  database: ScratchDatabase;
  config: Config;
  project: { workspaceID: string; projectID: string; apiKey: string };
  close(): Promise<void>;
}

/** A real Parley server on an ephemeral port over a fresh, migrated scratch database. */
export async function startBenchServer(
  ctx: BenchContext,
  provider: Provider,
  env: Record<string, string> = {},
): Promise<BenchServer> {
  let database: ScratchDatabase;
  if (ctx.templates) database = await ctx.templates.create(provider);
  else {
    database = await createScratchDatabase(provider, { pgAdminUrl: ctx.pgAdminUrl, prefix: 'parley_bench' });
    await applyMigrations(database.url);
  }
  const config = loadConfig({
    NODE_ENV: 'production',
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    // Benchmarks measure the server, not the rate limiter refusing the load generator.
    RATE_LIMIT_ENABLED: 'false',
    ...env,
    DATABASE_URL: database.url,
  });
  const services = await createServices(config, { logger: createLogger('silent'), migrate: false });
  const running = await startServer(config, { services });
  const created = await createProject(
    { db: services.db, pubsub: services.pubsub },
    { name: 'bench', actor: 'cli', key: {} },
  );
  return {
    provider,
    url: running.url,
    running,
    database,
    config,
    project: {
      workspaceID: created.project.workspaceId,
      projectID: created.project.id,
      apiKey: created.created!.apiKey,
    },
    async close() {
      await running.close();
      await database.drop();
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export interface LatencySummary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
}

export function summarize(samplesMs: number[]): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((s, v) => s + v, 0) / Math.max(1, sorted.length);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    mean,
  };
}

/** Times `fn` `iterations` times after `warmup` untimed runs; milliseconds per call. */
export async function timeIt(fn: () => Promise<unknown>, iterations: number, warmup = 5): Promise<LatencySummary> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  return summarize(samples);
}

export interface LoadResult {
  requestsPerSecond: number;
  /** Mean latency in ms (autocannon's p50 is whole milliseconds: too coarse for a ratio near 1). */
  latencyMean: number;
  latencyP50: number;
  latencyP99: number;
  non2xx: number;
  errors: number;
}

/** HTTP load with autocannon (from this process, on loopback). */
export async function load(opts: {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  durationSeconds: number;
}): Promise<LoadResult> {
  const result = await autocannon({
    url: opts.url,
    method: opts.method ?? 'GET',
    headers: opts.headers,
    body: opts.body,
    connections: opts.connections ?? 10,
    duration: opts.durationSeconds,
  });
  return {
    requestsPerSecond: result.requests.average,
    latencyMean: result.latency.average,
    latencyP50: result.latency.p50,
    latencyP99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return '-';
  return value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(digits);
}

/** Prints a table: the first row is the header. */
export function printTable(title: string, rows: (string | number)[][]): void {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'number' ? fmt(c) : c)));
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log(`\n${title}`);
  console.log(line(cells[0]!));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of cells.slice(1)) console.log(line(r));
}

export function defaultBenchContext(argv: string[]): { ctx: BenchContext; names: string[] } {
  const names: string[] = [];
  let providers: Provider[] = ['sqlite', 'postgresql'];
  let quick = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--quick') quick = true;
    else if (arg === '--providers') providers = (argv[++i] ?? '').split(',').filter(Boolean) as Provider[];
    else if (arg.startsWith('--providers=')) providers = arg.slice(12).split(',').filter(Boolean) as Provider[];
    else names.push(arg);
  }
  return { ctx: { providers, quick, pgAdminUrl: process.env.PARLEY_PG_ADMIN_URL || defaultPgAdminUrl }, names };
}
