/**
 * Decides which lanes the suite runs: SQLite always; PostgreSQL and Redis when reachable. Each
 * database lane gets a template database migrated once per run, which every test file copies.
 *
 *   PARLEY_TEST_CHROMIUM    the chromium executable of the browser lane (default /usr/bin/chromium)
 *   PARLEY_TEST_PG_URL      admin URL of the PostgreSQL server (default postgresql://postgres@127.0.0.1:5432/postgres)
 *   PARLEY_TEST_REDIS_URL   Redis URL (default redis://127.0.0.1:6379)
 *   PARLEY_TEST_REQUIRE     comma list of lanes that must run (CI sets postgres,redis,chromium): a missing one fails the run
 *   PARLEY_TEST_LANES       comma list to restrict the database lanes (e.g. sqlite), for a quick local run
 */
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { applyMigrations } from '../src/db/migrate';
import { adminQuery, withDatabaseName } from '../src/db/scratch';
import { ensureConsoleBuild } from './helpers/browser';
import type { Lanes } from './helpers/lanes';

const pgAdminUrl = process.env.PARLEY_TEST_PG_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const redisUrl = process.env.PARLEY_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const chromiumPath = process.env.PARLEY_TEST_CHROMIUM || '/usr/bin/chromium';
const required = new Set(
  (process.env.PARLEY_TEST_REQUIRE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);
const restrict = (process.env.PARLEY_TEST_LANES ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);

async function probePostgres(): Promise<string | null> {
  const client = new pg.Client({ connectionString: pgAdminUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (err) {
    return `cannot connect to ${pgAdminUrl} (${(err as Error).message})`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The browser lane runs when the chromium executable is there; the console is built for it if needed. */
async function probeChromium(): Promise<string | null> {
  try {
    accessSync(chromiumPath, constants.X_OK);
  } catch {
    return `no chromium at ${chromiumPath} (apt-get install chromium, or set PARLEY_TEST_CHROMIUM)`;
  }
  try {
    await ensureConsoleBuild();
  } catch (err) {
    return `the console does not build (${(err as Error).message})`;
  }
  return null;
}

async function probeRedis(): Promise<string | null> {
  const client = new Redis(redisUrl, {
    lazyConnect: true,
    connectTimeout: 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  try {
    await client.connect();
    await client.ping();
    return null;
  } catch (err) {
    return `cannot connect to ${redisUrl} (${(err as Error).message})`;
  } finally {
    client.disconnect();
  }
}

/** The lanes PARLEY_TEST_LANES and PARLEY_TEST_REQUIRE may name. */
const laneNames = ['sqlite', 'postgres', 'redis', 'chromium'];

export default async function setup(project: TestProject) {
  // A misspelt lane ("postgresql") would silently skip a lane the caller meant to run.
  for (const [variable, names] of [
    ['PARLEY_TEST_LANES', restrict],
    ['PARLEY_TEST_REQUIRE', [...required]],
  ] as const) {
    const unknown = names.filter((name) => !laneNames.includes(name));
    if (unknown.length)
      throw new Error(`${variable} names unknown lane(s) ${unknown.join(', ')}; the lanes are ${laneNames.join(', ')}`);
  }
  const runId = `${Date.now().toString(36)}${process.pid.toString(36)}`;
  const lanes: Lanes = { runId, sqlite: null, postgres: null, redis: null, chromium: null, skipped: {} };
  const cleanups: (() => Promise<void>)[] = [];

  if (restrict.length === 0 || restrict.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'parley-test-'));
    const template = join(dir, 'template.db');
    await applyMigrations(`file:${template}`);
    lanes.sqlite = { templateFile: template, dir };
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  } else {
    lanes.skipped.sqlite = 'excluded by PARLEY_TEST_LANES';
  }

  const pgProblem =
    restrict.length && !restrict.includes('postgres') ? 'excluded by PARLEY_TEST_LANES' : await probePostgres();
  if (pgProblem) {
    lanes.skipped.postgres = pgProblem;
  } else {
    const templateName = `parley_t_${runId}_template`;
    await adminQuery(pgAdminUrl, `CREATE DATABASE "${templateName}"`);
    await applyMigrations(withDatabaseName(pgAdminUrl, templateName));
    lanes.postgres = { adminUrl: pgAdminUrl, templateName, prefix: `parley_t_${runId}` };
    cleanups.push(async () => {
      const { rows } = await adminQuery(
        pgAdminUrl,
        `SELECT datname FROM pg_database WHERE datname LIKE 'parley\\_t\\_${runId}\\_%'`,
      );
      for (const row of rows as { datname: string }[]) {
        await adminQuery(pgAdminUrl, `DROP DATABASE IF EXISTS "${row.datname}" WITH (FORCE)`).catch(() => {});
      }
    });
  }

  const redisProblem =
    restrict.length && !restrict.includes('redis') ? 'excluded by PARLEY_TEST_LANES' : await probeRedis();
  if (redisProblem) lanes.skipped.redis = redisProblem;
  else lanes.redis = { url: redisUrl };

  const chromiumProblem =
    restrict.length && !restrict.includes('chromium') ? 'excluded by PARLEY_TEST_LANES' : await probeChromium();
  if (chromiumProblem) lanes.skipped.chromium = chromiumProblem;
  else lanes.chromium = { executablePath: chromiumPath };

  const lines = [
    `sqlite: ${lanes.sqlite ? 'runs' : `SKIPPED (${lanes.skipped.sqlite})`}`,
    `postgres: ${lanes.postgres ? `runs (${pgAdminUrl})` : `SKIPPED (${lanes.skipped.postgres})`}`,
    `redis: ${lanes.redis ? `runs (${redisUrl})` : `SKIPPED (${lanes.skipped.redis})`}`,
    `chromium: ${lanes.chromium ? `runs (${chromiumPath})` : `SKIPPED (${lanes.skipped.chromium})`}`,
  ];
  console.log(`\nParley test lanes:\n  ${lines.join('\n  ')}\n`);

  const missing = [...required].filter((lane) => !(lanes as unknown as Record<string, unknown>)[lane]);
  if (missing.length) {
    for (const cleanup of cleanups) await cleanup();
    throw new Error(
      `Required test lanes are unavailable: ${missing.map((l) => `${l} (${lanes.skipped[l as keyof Lanes['skipped']]})`).join('; ')}`,
    );
  }

  project.provide('lanes', lanes);
  return async () => {
    for (const cleanup of cleanups) await cleanup();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    lanes: Lanes;
  }
}
