import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/analytics/events';
import { queryUsage } from '../../src/analytics/query';
import { queryUsageFromEvents } from '../../src/analytics/raw-events';
import { recordUsageEvents, writeUsageEvents } from '../../src/analytics/usage-event-writer';
import { usageQueryNames } from '../../src/analytics/usage-metrics';
import { projectRoot } from '../../src/db/schema-source';
import { AppError } from '../../src/lib/errors';
import type { TestProject } from '../helpers/app';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { environmentIds } from '../helpers/usage';

/** A small seeded generator, so a failing run can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** Events crowded onto few counters and few users, so concurrent writers collide on the same rows. */
function crowdedEvents(projectId: string, envs: string[], n: number, rnd: () => number): UsageEvent[] {
  const pick = <T>(list: readonly T[]) => list[Math.floor(rnd() * list.length)]!;
  const out: UsageEvent[] = [];
  for (let i = 0; i < n; i++) {
    const common = {
      projectId,
      environmentId: pick(envs),
      occurredAt: new Date(Date.UTC(2026, 3, 1, 9 + Math.floor(rnd() * 2), Math.floor(rnd() * 60))),
      userId: rnd() < 0.8 ? `user-${Math.floor(rnd() * 12)}` : null,
    };
    const kinds: UsageEvent[] = [
      { ...common, kind: 'interaction', type: pick(['text', 'launch', 'button']) },
      {
        ...common,
        kind: 'credit',
        type: pick(['llm-input', 'llm-output'] as const),
        model: 'm',
        tokens: 1 + Math.floor(rnd() * 500),
      },
      { ...common, kind: 'function_call', functionId: pick(['f1', 'f2']), name: 'fn', success: rnd() < 0.7 },
      { ...common, kind: 'api_call', apiToolId: 'api', success: rnd() < 0.5 },
      { ...common, kind: 'integration_call', integrationToolName: pick(['slack', 'zendesk']), success: rnd() < 0.9 },
      { ...common, kind: 'kb_document', documentId: pick(['d1', 'd2', 'd3']) },
      { ...common, kind: 'transcript', transcriptId: `t-${i}` },
      { ...common, kind: 'agent_invocation', agentId: 'agent', name: 'A', success: rnd() < 0.6 },
      { ...common, kind: 'intent', name: pick(['a', 'b', 'c', 'd']) },
    ];
    out.push(pick(kinds));
  }
  return out;
}

/**
 * Runs test/helpers/usage-writer.ts as a second instance: resolves once it is connected, with a
 * function that starts its writes and resolves to what each of its batches stored.
 */
async function startSecondInstance(url: string, batches: UsageEvent[][]): Promise<() => Promise<number[]>> {
  const dir = mkdtempSync(join(tmpdir(), 'parley-usage-writer-'));
  const file = join(dir, 'batches.json');
  writeFileSync(file, JSON.stringify(batches));
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/usage-writer.ts', url, file], {
    cwd: projectRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    const poll = setInterval(() => {
      if (out.includes('ready\n')) {
        clearInterval(poll);
        resolve();
      }
    }, 10);
    exited.then((code) => {
      clearInterval(poll);
      reject(new Error(`the second instance exited (${code}) before it was ready: ${err}`));
    });
  });
  return async () => {
    child.stdin.write('go\n');
    const code = await exited;
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0) throw new Error(`the second instance failed (${code}): ${err}`);
    return JSON.parse(out.slice(out.indexOf('ready\n') + 6)) as number[];
  };
}

describeEachDatabase('usage event writer', (provider) => {
  const t = useTestApp(provider);
  let p: TestProject;
  let envs: string[];

  beforeAll(async () => {
    p = await t.app.createProject();
    const e = environmentIds(p);
    envs = [e.dev, e.prod];
  });

  const count = async (projectId: string) => {
    const prisma = t.app.services.db.prisma;
    return {
      events: await prisma.usageEvent.count({ where: { projectId } }),
      rollups: await prisma.usageRollup.count({ where: { projectId } }),
      totals: await prisma.usageHourTotal.count({ where: { projectId } }),
      users: await prisma.usageHourUser.count({ where: { projectId } }),
    };
  };

  it("writes within the caller's transaction: rolled back with it, committed with it", async () => {
    const q = await t.app.createProject();
    const env = environmentIds(q).prod;
    const events: UsageEvent[] = [
      { projectId: q.projectID, environmentId: env, kind: 'interaction', type: 'text', userId: 'u' },
      { projectId: q.projectID, environmentId: env, kind: 'intent', name: 'hello', userId: 'u' },
    ];
    await expect(
      t.app.services.db.prisma.$transaction(async (tx) => {
        await tx.environment.update({ where: { id: env }, data: { updatedAt: new Date() } });
        await writeUsageEvents(tx, events, { provider });
        throw new Error('the caller fails after recording');
      }),
    ).rejects.toThrow('the caller fails');
    expect(await count(q.projectID)).toEqual({ events: 0, rollups: 0, totals: 0, users: 0 });

    const recorded = await t.app.services.db.prisma.$transaction((tx) => writeUsageEvents(tx, events, { provider }));
    expect(recorded.recorded).toBe(2);
    // interactions, top_intents and unique_users, one hour each.
    expect(recorded.counters.map((c) => [c.metric, c.count]).sort()).toEqual([
      ['interactions', 1],
      ['top_intents', 1],
      ['unique_users', 1],
    ]);
    expect(await count(q.projectID)).toEqual({ events: 2, rollups: 3, totals: 3, users: 1 });
  });

  it('stores the same rows and counters through the driver (one statement per row on SQLite) as inside a Prisma transaction (JSON rows)', async () => {
    const viaDriver = await t.app.createProject();
    const viaPrisma = await t.app.createProject();
    const occurredAt = new Date(Date.UTC(2026, 3, 2, 9, 30, 15, 123));
    const eventsOf = (p: TestProject): UsageEvent[] => {
      const env = environmentIds(p).prod;
      const common = { projectId: p.projectID, environmentId: env, occurredAt };
      return [
        { ...common, kind: 'interaction', type: 'text', userId: 'u1', idempotencyKey: 'k1' },
        { ...common, kind: 'interaction', type: 'text', userId: 'u1', idempotencyKey: 'k1' },
        { ...common, kind: 'interaction', type: 'launch', userId: 'u2' },
        { ...common, kind: 'credit', type: 'llm-output', model: 'm', tokens: 1234, diagramId: 'd', nodeId: 'n' },
        { ...common, kind: 'function_call', functionId: 'f', name: 'fn', success: false, userId: 'u1' },
        { ...common, kind: 'api_call', apiToolId: 'api', success: true },
        { ...common, kind: 'integration_call', integrationToolName: 'slack', success: true },
        { ...common, kind: 'kb_document', documentId: 'doc' },
        { ...common, kind: 'transcript', transcriptId: 't1' },
        { ...common, kind: 'agent_invocation', agentId: 'a', name: 'Agent', success: false },
        { ...common, kind: 'intent', name: 'refund', idempotencyKey: 'k2' },
      ];
    };
    const now = new Date(Date.UTC(2026, 3, 2, 10));
    const driverResult = await recordUsageEvents({ db: t.app.services.db }, eventsOf(viaDriver), { now });
    const prismaResult = await t.app.services.db.prisma.$transaction((tx) =>
      writeUsageEvents(tx, eventsOf(viaPrisma), { provider, now }),
    );
    // Sent again: the keyed events are duplicates on both paths, the others are stored again.
    const again = await recordUsageEvents({ db: t.app.services.db }, eventsOf(viaDriver), { now });
    const againInTx = await t.app.services.db.prisma.$transaction((tx) =>
      writeUsageEvents(tx, eventsOf(viaPrisma), { provider, now }),
    );
    expect([again.recorded, again.duplicates]).toEqual([8, 3]);
    expect([againInTx.recorded, againInTx.duplicates]).toEqual([8, 3]);
    // The same counters, told apart only by project and environment (compared by alias).
    const countersOf = (p: TestProject, r: typeof driverResult) => ({
      ...r,
      counters: r.counters.map(({ projectId: _, environmentId, ...c }) => ({
        ...c,
        environment: p.environments.find((e) => e.id === environmentId)?.alias,
      })),
    });
    expect(countersOf(viaDriver, driverResult)).toEqual(countersOf(viaPrisma, prismaResult));
    expect(driverResult).toMatchObject({ recorded: 10, duplicates: 1 });

    const prisma = t.app.services.db.prisma;
    const stored = async (p: TestProject) => {
      const events = await prisma.usageEvent.findMany({
        where: { projectId: p.projectID },
        orderBy: [{ kind: 'asc' }, { type: 'asc' }, { idempotencyKey: 'asc' }],
      });
      const rollups = await prisma.usageRollup.findMany({
        where: { projectId: p.projectID },
        orderBy: [{ metric: 'asc' }, { type: 'asc' }, { subjectId: 'asc' }],
      });
      const strip = <T extends { projectId: string }>({ projectId: _, ...rest }: T) => rest;
      return {
        events: events.map(({ id: _, projectId: __, ...e }) => e),
        rollups: rollups.map(strip),
        totals: (
          await prisma.usageHourTotal.findMany({ where: { projectId: p.projectID }, orderBy: { metric: 'asc' } })
        ).map(strip),
        users: (
          await prisma.usageHourUser.findMany({ where: { projectId: p.projectID }, orderBy: { userId: 'asc' } })
        ).map(strip),
        days: (await prisma.usageDayIntent.findMany({ where: { projectId: p.projectID } })).map(strip),
      };
    };
    const a = await stored(viaDriver);
    const b = await stored(viaPrisma);
    // Environments differ per project: compare them by alias.
    const alias = (p: TestProject, id: string) => p.environments.find((e) => e.id === id)?.alias;
    const byAlias = (p: TestProject, x: Awaited<ReturnType<typeof stored>>) =>
      JSON.stringify(x, (key, value) =>
        key === 'environmentId' ? alias(p, value) : typeof value === 'bigint' ? Number(value) : value,
      );
    expect(byAlias(viaDriver, a)).toBe(byAlias(viaPrisma, b));
    expect(a.events).toHaveLength(18);
    expect(a.events.find((e) => e.kind === 'function_call')).toMatchObject({ success: false, userId: 'u1' });
    expect(a.events.find((e) => e.kind === 'credit')).toMatchObject({ quantity: 1234n, success: null, occurredAt });
    expect(a.events.every((e) => e.recordedAt.getTime() === now.getTime())).toBe(true);
  });

  it('stores nothing when any write of a batch fails, even after earlier statements succeeded', async () => {
    const q = await t.app.createProject();
    const env = environmentIds(q).prod;
    const events: UsageEvent[] = Array.from({ length: 2500 }, (_, i) => ({
      projectId: q.projectID,
      environmentId: env,
      kind: 'interaction',
      type: 'text',
      userId: `u${i}`,
    }));
    // Event 2300 names a project that does not exist: the second insert statement fails, after the
    // first stored 2,000 events.
    events[2300] = { ...events[2300]!, projectId: 'ffffffffffffffffffffffff' };
    await expect(recordUsageEvents({ db: t.app.services.db }, events)).rejects.toThrow();
    expect(await count(q.projectID)).toEqual({ events: 0, rollups: 0, totals: 0, users: 0 });
  });

  it('indexes only the events that have an idempotency key, and a key still stores its event once per project on both paths', async () => {
    const db = t.app.services.db;
    // The unique index is partial (prisma/migrations/*/20261125140000_usage_event_key_partial):
    // events without a key, most of them, put nothing in it.
    const definition =
      provider === 'sqlite'
        ? (
            await db.prisma.$queryRawUnsafe<{ sql: string }[]>(
              `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'UsageEvent_projectId_idempotencyKey_key'`,
            )
          )[0]?.sql
        : (
            await db.prisma.$queryRawUnsafe<{ indexdef: string }[]>(
              `SELECT indexdef FROM pg_indexes WHERE indexname = 'UsageEvent_projectId_idempotencyKey_key'`,
            )
          )[0]?.indexdef;
    expect(definition).toMatch(
      /^CREATE UNIQUE INDEX .*\("projectId", "idempotencyKey"\) WHERE \(?"idempotencyKey" IS NOT NULL\)?$/,
    );

    const q = await t.app.createProject();
    const r = await t.app.createProject();
    const eventsOf = (project: TestProject, key: string | null): UsageEvent[] =>
      Array.from({ length: 3 }, (_, i) => ({
        projectId: project.projectID,
        environmentId: environmentIds(project).prod,
        kind: 'interaction',
        type: 'text',
        userId: `u${i}`,
        idempotencyKey: key === null ? null : `${key}:${i}`,
      }));
    const viaDriver = (events: UsageEvent[]) => recordUsageEvents({ db }, events);
    const viaPrisma = (events: UsageEvent[]) =>
      db.prisma.$transaction((tx) => writeUsageEvents(tx, events, { provider }));
    for (const write of [viaDriver, viaPrisma]) {
      const key = write === viaDriver ? 'd' : 'p';
      expect(await write(eventsOf(q, key))).toMatchObject({ recorded: 3, duplicates: 0 });
      // Replayed: nothing added, on either path.
      expect(await write(eventsOf(q, key))).toMatchObject({ recorded: 0, duplicates: 3, counters: [] });
      // The same keys in another project are other events.
      expect(await write(eventsOf(r, key))).toMatchObject({ recorded: 3, duplicates: 0 });
      // Events without a key never conflict.
      expect(await write(eventsOf(q, null))).toMatchObject({ recorded: 3, duplicates: 0 });
      expect(await write(eventsOf(q, null))).toMatchObject({ recorded: 3, duplicates: 0 });
    }
    expect((await count(q.projectID)).events).toBe(18);
    expect((await count(r.projectID)).events).toBe(6);
  });

  it('refuses malformed events from internal callers, naming each problem', async () => {
    const env = environmentIds(p).prod;
    const bad = [
      { projectId: p.projectID, environmentId: env, kind: 'credit', type: 'llm-input', model: 'm', tokens: -1 },
      { projectId: p.projectID, environmentId: 'production', kind: 'interaction', type: '' },
    ] as UsageEvent[];
    const err = await recordUsageEvents({ db: t.app.services.db }, bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details?.map((d) => d.path)).toEqual(['0.tokens', '1.environmentId', '1.type']);
  });

  it('loses no increment and counts each user once per hour with concurrent writers in two processes', async () => {
    const rnd = random(20260401);
    const mine = Array.from({ length: 12 }, () => crowdedEvents(p.projectID, envs, 60, rnd));
    const theirs = Array.from({ length: 12 }, () => crowdedEvents(p.projectID, envs, 60, rnd));
    // Another process, as another instance would be (two SQLite connections in one process
    // would block each other's event loop while waiting for the write lock).
    const go = await startSecondInstance(t.app.database.url, theirs);
    const [theirResults, myResults] = await Promise.all([
      go(),
      Promise.all(mine.map((events) => recordUsageEvents({ db: t.app.services.db }, events))),
    ]);
    expect([...theirResults, ...myResults.map((r) => r.recorded)].reduce((s, n) => s + n, 0)).toBe(24 * 60);

    // Every query's counters agree with a GROUP BY over the raw events.
    for (const name of usageQueryNames) {
      const q = {
        name,
        projectId: p.projectID,
        start: null,
        end: null,
        environmentIds: null,
        limit: 500,
        cursor: null,
      };
      const fromRollups = await queryUsage(t.app.services.db, q);
      const fromEvents = await queryUsageFromEvents(t.app.services.db, q);
      expect(fromRollups, name).toEqual(fromEvents);
      expect('items' in fromRollups ? fromRollups.items.length : fromRollups.intents.length, name).toBeGreaterThan(0);
    }
    // Also over ranges that cut days and hours (top_intents then reads day and hour counters).
    for (const [start, end] of [
      ['2026-04-01T09:30:00Z', null],
      [null, '2026-04-01T10:00:00Z'],
      ['2026-03-31T00:00:00Z', '2026-04-02T00:00:00Z'],
      ['2026-04-01T10:00:00Z', '2026-04-01T11:00:00Z'],
    ] as const) {
      for (const name of ['top_intents', 'interactions'] as const) {
        const q = {
          name,
          projectId: p.projectID,
          start: start ? new Date(start) : null,
          end: end ? new Date(end) : null,
          environmentIds: [envs[0]!],
          limit: 500,
          cursor: null,
        };
        expect(await queryUsage(t.app.services.db, q), `${name} ${start} ${end}`).toEqual(
          await queryUsageFromEvents(t.app.services.db, q),
        );
      }
    }
    // And the per-metric hourly totals are the sums of the rollups.
    const prisma = t.app.services.db.prisma;
    const rollupSums = await prisma.usageRollup.groupBy({
      by: ['metric', 'hour', 'environmentId'],
      where: { projectId: p.projectID },
      _sum: { count: true, successCount: true },
      orderBy: [{ metric: 'asc' }, { hour: 'asc' }, { environmentId: 'asc' }],
    });
    const totals = await prisma.usageHourTotal.findMany({
      where: { projectId: p.projectID },
      orderBy: [{ metric: 'asc' }, { hour: 'asc' }, { environmentId: 'asc' }],
    });
    expect(totals.map((r) => [r.metric, r.hour, r.environmentId, Number(r.count), Number(r.successCount)])).toEqual(
      rollupSums.map((r) => [r.metric, r.hour, r.environmentId, Number(r._sum.count), Number(r._sum.successCount)]),
    );
  });
});
