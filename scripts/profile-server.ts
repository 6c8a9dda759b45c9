/**
 * The server half of `npm run profile` (scripts/profile.ts): a real Parley server on a scratch
 * database, set up for one scenario. V8's sampling profiler (through the inspector) runs only over
 * the measured window, so set-up and warm-up stay out of the profile. It counts the SQL
 * statements and transactions the driver adapter runs (by wrapping the adapter's connection, so no
 * production code carries a counter), those run through Db.driver (its listeners), and the Prisma
 * operations, and reports them on request.
 *
 * IPC: sends {ready, url, projectID, apiKey}; answers 'reset' (zero the counters, start profiling)
 * and 'stop' (stop profiling, write the profile to the path given as the third argument, send the
 * counters, close, exit).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import { PrismaPg } from '@prisma/adapter-pg';
import type { SqlDriverAdapter, Transaction } from '@prisma/driver-adapter-utils';
import { loadChunks } from '../bench/kb.bench';
import { defaultBenchContext, startBenchServer } from '../bench/lib';
import { fiveSteps } from '../bench/runtime.bench';
import { postgresDriver, seed, sqliteDriver } from '../bench/transcripts.bench';
import { createApiKey } from '../src/admin/service';
import { createDb } from '../src/db/client';
import type { Provider } from '../src/db/schema-source';

const counters = { statements: 0, transactions: 0, commits: 0, prismaOperations: 0 };
/** The server process's CPU time (user + system) at 'reset': CPU per operation holds up on a busy machine, where rates do not. */
let cpuAtReset = process.cpuUsage();
const operations = new Map<string, number>();
/** kb-ingest: every Prisma operation with its start and end (ms since the epoch), for the upload timelines. */
const timeline: { name: string; start: number; end: number; background: boolean }[] = [];

function countAdapter(adapter: SqlDriverAdapter): SqlDriverAdapter {
  const queryRaw = adapter.queryRaw.bind(adapter);
  const executeRaw = adapter.executeRaw.bind(adapter);
  const startTransaction = adapter.startTransaction.bind(adapter);
  adapter.queryRaw = (q) => {
    counters.statements++;
    return queryRaw(q);
  };
  adapter.executeRaw = (q) => {
    counters.statements++;
    return executeRaw(q);
  };
  adapter.startTransaction = async (level) => {
    counters.transactions++;
    const tx: Transaction = await startTransaction(level);
    const txQuery = tx.queryRaw.bind(tx);
    const txExecute = tx.executeRaw.bind(tx);
    const commit = tx.commit.bind(tx);
    tx.queryRaw = (q) => {
      counters.statements++;
      return txQuery(q);
    };
    tx.executeRaw = (q) => {
      counters.statements++;
      return txExecute(q);
    };
    tx.commit = () => {
      counters.commits++;
      return commit();
    };
    return tx;
  };
  return adapter;
}

for (const cls of [PrismaBetterSqlite3, PrismaPg] as unknown as {
  prototype: { connect(): Promise<SqlDriverAdapter> };
}[]) {
  const connect = cls.prototype.connect;
  cls.prototype.connect = async function (this: unknown) {
    return countAdapter(await connect.call(this));
  };
}

const [provider, scenario, profilePath] = process.argv.slice(2) as [Provider, string, string];
const inspector = new Session();
inspector.connect();
await inspector.post('Profiler.enable');
await inspector.post('Profiler.setSamplingInterval', { interval: 200 });
const server = await startBenchServer(defaultBenchContext([]).ctx, provider);
server.running.services.db.queryListeners.add((event) => {
  counters.prismaOperations++;
  const name = `${event.model ?? 'raw'}.${event.operation}`;
  operations.set(name, (operations.get(name) ?? 0) + 1);
  if (scenario === 'kb-ingest') {
    const end = performance.timeOrigin + performance.now();
    timeline.push({ name, start: end - event.durationMs, end, background: event.background });
  }
});
// Statements the runtime runs straight through the driver (Db.driver), which the adapter never sees.
server.running.services.db.driverListeners.add((event) => {
  counters.statements += event.statements;
  counters.transactions += event.commits;
  counters.commits += event.commits;
  const name = `driver.${event.label}`;
  operations.set(name, (operations.get(name) ?? 0) + 1);
  if (scenario === 'kb-ingest') {
    const end = performance.timeOrigin + performance.now();
    timeline.push({ name, start: end - event.durationMs, end, background: event.background });
  }
});
if (scenario === 'turn') {
  await server.running.services.runtime.publish({
    projectId: server.project.projectID,
    environment: 'development',
    program: fiveSteps,
    actor: 'cli',
  });
} else if (scenario === 'kb-query') {
  const db = await createDb(server.database.url);
  await loadChunks(db, server.project.projectID, Number(process.env.PROFILE_CHUNKS ?? 20_000));
  await db.close();
} else if (scenario === 'search') {
  // The transcript benchmark's data set (ten logs, one property value per transcript, a result on
  // every fourth), written straight through the driver as the benchmark does.
  const driver = provider === 'sqlite' ? sqliteDriver(server.database.url) : postgresDriver(server.database.url);
  await seed(server, driver, Number(process.env.PROFILE_TRANSCRIPTS ?? 5_000));
  await driver.close();
}

let apiKey = server.project.apiKey;
if (scenario === 'ingest') {
  const { db, pubsub } = server.running.services;
  ({ apiKey } = await createApiKey(
    { db, pubsub },
    {
      workspaceId: server.project.workspaceID,
      projectId: server.project.projectID,
      scopes: ['analytics:read', 'analytics:write'],
      actor: 'cli',
    },
  ));
}

process.send?.({ ready: true, url: server.url, ...server.project, apiKey });
process.on('message', async (message) => {
  if (message === 'reset') {
    for (const key of Object.keys(counters) as (keyof typeof counters)[]) counters[key] = 0;
    operations.clear();
    timeline.length = 0;
    cpuAtReset = process.cpuUsage();
    await inspector.post('Profiler.start');
    process.send?.({ reset: true });
  } else if (message === 'stop') {
    const cpu = process.cpuUsage(cpuAtReset);
    const snapshot = { ...counters, cpuMicros: cpu.user + cpu.system };
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(profilePath, JSON.stringify(profile));
    // Exit only once the message is handed to the pipe: process.exit() right after send() drops a
    // large message (kb-ingest's timeline over 8 s is a few hundred kB), and the parent then saw
    // only "profile server exited (0)".
    await new Promise<void>((resolve, reject) =>
      process.send?.({ counters: snapshot, operations: [...operations], timeline }, (err: Error | null) =>
        err ? reject(err) : resolve(),
      ),
    );
    await server.close();
    process.exit(0);
  }
});
