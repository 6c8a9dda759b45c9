import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/client';
import { type CommitOutbox, createStateStore, type StateKey } from '../../src/runtime/state-store';
import { emptyState, type RuntimeState } from '../../src/runtime/types';
import { type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

/**
 * The state store's own statements (src/runtime/state-store.ts), which go through the driver
 * rather than Prisma: the lease in one INSERT … ON CONFLICT DO UPDATE … WHERE, the commit and its
 * outbox job in one transaction. Two stores on two connections stand for two instances.
 */

const queue = 'state-store-test';

function outboxOf(key: StateKey, label: string, seen: { saved: boolean[]; ids: string[] }): CommitOutbox {
  return {
    job(saved) {
      seen.saved.push(saved);
      return {
        queue,
        payload: { label, saved },
        dedupeKey: `${queue}:${key.userId}:${label}`,
        projectId: key.projectId,
      };
    },
    committed(jobId) {
      seen.ids.push(jobId);
    },
  };
}

const countOf = (state: RuntimeState | undefined) => Number(state?.variables.count ?? 0);

describeEachDatabase('the state store', (provider) => {
  const t = useTestApp(provider);

  async function setup(): Promise<{ p: TestProject; other: Db; key: (userId: string) => StateKey }> {
    const p = await t.app.createProject();
    const other = await createDb(t.app.database.url);
    const environmentId = p.environments[0]!.id;
    return { p, other, key: (userId) => ({ projectId: p.projectID, environmentId, userId }) };
  }

  it('commits every update of many users exactly once, with one outbox job each, across two instances', async () => {
    const { p, other, key } = await setup();
    try {
      const stores = [
        createStateStore(t.app.services.db, { leaseMs: 60_000, renewMs: 20_000, waitMs: 30_000 }),
        createStateStore(other, { leaseMs: 60_000, renewMs: 20_000, waitMs: 30_000 }),
      ];
      const users = Array.from({ length: 8 }, (_v, i) => `user ${i}`);
      const perUser = 5;
      const seen = { saved: [] as boolean[], ids: [] as string[] };
      await Promise.all(
        users.flatMap((user) =>
          Array.from({ length: perUser }, async (_v, i) => {
            const store = stores[i % 2]!;
            const lease = await store.acquire(key(user));
            const state = lease.row ? lease.row.state : emptyState();
            await sleep(1);
            const next = { ...state, variables: { ...state.variables, count: countOf(state) + 1 } };
            const saved = await store.commit(
              lease,
              { state: next, sessionId: lease.row?.sessionId ?? 'session', agentVersionId: null },
              { outbox: outboxOf(key(user), `turn ${i}`, seen) },
            );
            expect(saved).toBe(true);
          }),
        ),
      );
      expect(seen.saved.every(Boolean)).toBe(true);
      expect(new Set(seen.ids).size).toBe(users.length * perUser);
      for (const user of users) {
        const row = await stores[0]!.read(key(user).environmentId, user);
        expect(countOf(row?.state), user).toBe(perUser);
        expect(row?.version).toBe(perUser);
      }
      const { prisma } = t.app.services.db;
      const jobs = await prisma.job.findMany({ where: { queue, projectId: p.projectID }, select: { id: true } });
      expect(jobs.map((j) => j.id).sort()).toEqual([...seen.ids].sort());
      const held = await prisma.runtimeState.count({ where: { projectId: p.projectID, lockToken: { not: null } } });
      expect(held).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('a held lease is refused, a lapsed one is taken, and the late commit writes only its job', async () => {
    const { other, key } = await setup();
    try {
      // The first instance stops extending its lease (renewMs far beyond the test), as a dead one would.
      const first = createStateStore(t.app.services.db, { leaseMs: 300, renewMs: 60_000, waitMs: 0 });
      const second = createStateStore(other, { leaseMs: 60_000, renewMs: 20_000, waitMs: 0 });
      const k = key('lapsed');
      const launch = await first.acquire(k);
      expect(launch.row).toBeNull();
      const initial = { ...emptyState(), variables: { count: 1 } };
      expect(await first.commit(launch, { state: initial, sessionId: 's1', agentVersionId: null })).toBe(true);

      const slow = await first.acquire(k);
      expect(countOf(slow.row?.state)).toBe(1);
      await expect(second.acquire(k)).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      await sleep(400);
      const fast = await second.acquire(k);
      expect(fast.row?.version).toBe(1);
      const seen = { saved: [] as boolean[], ids: [] as string[] };
      const late = await first.commit(
        slow,
        { state: { ...initial, variables: { count: 99 } }, sessionId: 's1', agentVersionId: null },
        { outbox: outboxOf(k, 'late', seen) },
      );
      expect(late).toBe(false);
      // Asked for the saved case first on PostgreSQL (one statement), then told it was not.
      expect(seen.saved.at(-1)).toBe(false);
      const job = await t.app.services.db.prisma.job.findUniqueOrThrow({ where: { id: seen.ids[0] } });
      expect(job.payload).toEqual({ label: 'late', saved: false });
      expect(
        await second.commit(fast, {
          state: { ...initial, variables: { count: 2 } },
          sessionId: 's1',
          agentVersionId: null,
        }),
      ).toBe(true);
      const row = await second.read(k.environmentId, k.userId);
      expect(countOf(row?.state)).toBe(2);
      expect(row?.version).toBe(2);
    } finally {
      await other.close();
    }
  });

  it('a held lease is extended while its holder runs, however long: another instance cannot take it', async () => {
    const { other, key } = await setup();
    try {
      const renewErrors: unknown[] = [];
      const first = createStateStore(t.app.services.db, {
        leaseMs: 300,
        renewMs: 100,
        waitMs: 0,
        onRenewError: (err) => renewErrors.push(err),
      });
      const second = createStateStore(other, { leaseMs: 60_000, renewMs: 20_000, waitMs: 0 });
      const k = key('long turn');
      const held = await first.acquire(k);
      // Four lease lengths later the lease is still held: it was extended.
      await sleep(1200);
      await expect(second.acquire(k)).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      const state = { ...emptyState(), variables: { count: 1 } };
      expect(await first.commit(held, { state, sessionId: 's1', agentVersionId: null })).toBe(true);
      // Committed: free at once, and no longer extended.
      const next = await second.acquire(k);
      expect(countOf(next.row?.state)).toBe(1);
      await sleep(400);
      const row = await t.app.services.db.prisma.runtimeState.findFirstOrThrow({
        where: { environmentId: k.environmentId, userId: k.userId },
      });
      expect(row.lockToken).toBe(next.token);
      expect(renewErrors).toEqual([]);
      await second.release(next);
    } finally {
      await other.close();
    }
  });

  it('a job whose dedupe key has one already: the commit answers that job, and writes no second', async () => {
    const { p, key } = await setup();
    const store = createStateStore(t.app.services.db, { leaseMs: 60_000, renewMs: 20_000, waitMs: 1000 });
    const k = key('dedupe');
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const lease = await store.acquire(k);
      const seen = { saved: [] as boolean[], ids };
      expect(
        await store.commit(
          lease,
          { state: { ...emptyState(), variables: { count: i + 1 } }, sessionId: 's', agentVersionId: null },
          { outbox: outboxOf(k, 'same', seen) },
        ),
      ).toBe(true);
    }
    expect(ids).toHaveLength(2);
    expect(ids[1]).toBe(ids[0]);
    expect(await t.app.services.db.prisma.job.count({ where: { queue, projectId: p.projectID } })).toBe(1);
    expect(countOf((await store.read(k.environmentId, k.userId))?.state)).toBe(2);
  });
});
