import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDb } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';
import { type ServeProcess, startServeProcess, waitUntilReady } from '../helpers/serve-process';

/**
 * kill -9 in the middle of a load of turns (issue 17): a real `parley serve` runs turns of several
 * users at once, each user's turns one after another, and is killed with SIGKILL while they run.
 * After a restart on the same database, every turn a client saw `end` for is recorded exactly once
 * (its transcript logs, its usage events and the rollups), and no state update is lost: each
 * user's counter equals the number of turns that committed, and each committed turn's message is
 * in the transcripts once. A turn that committed but had not been recorded when the process died is
 * recorded from the turn outbox (here by the user's next turn, which records earlier entries first).
 */

const counter = {
  name: 'Counter',
  startFlow: 'main',
  variables: [{ name: 'n', default: 0 }],
  flows: [
    {
      id: 'main',
      start: 'inc',
      steps: [
        { id: 'inc', type: 'set', assignments: [{ variable: 'n', value: 'n + 1' }], next: 'say' },
        { id: 'say', type: 'message', message: 'Visit {n}', next: 'menu' },
        { id: 'menu', type: 'choice', buttons: [{ label: 'Again', next: 'inc' }] },
      ],
    },
  ],
};

const token = 'operator-token-for-kill-recovery';
/** Each user's last three streams as the client read them, for the message of a failed check. */
const streams = new Map<string, string[]>();
const users = Array.from({ length: 8 }, (_v, i) => `k${i}`);

/**
 * A turn's lease on its user is extended while the turn runs and lapses RUNTIME_LEASE_MS (15 s by
 * default) after the process holding it died, so a user whose turn was running then is locked
 * until that. The restarted server waits for such leases (RUNTIME_LOCK_WAIT_MS) rather than
 * answering "still running".
 */
function serve(database: ScratchDatabase, env: Record<string, string> = {}): Promise<ServeProcess> {
  return startServeProcess({
    DATABASE_URL: database.url,
    ADMIN_TOKEN: token,
    LOG_LEVEL: 'warn',
    JOB_POLL_MS: '50',
    RATE_LIMIT_ENABLED: 'false',
    RUNTIME_TURN_TIMEOUT_MS: '5000',
    ...env,
  });
}

async function call(url: string, path: string, body: unknown) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: token, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** One launch turn; the visit number when the client saw the whole stream up to `end`, else null. */
async function turn(url: string, projectID: string, user: string): Promise<number | null> {
  try {
    const res = await call(url, `/v2/project/${projectID}/user/${user}/interact/stream`, {
      action: { type: 'launch' },
    });
    streams.set(user, [...(streams.get(user) ?? []).slice(-2), `HTTP ${res.status}\n${res.text}`]);
    if (res.status !== 200 || !/event: end\nid: \d+\n\n$/.test(res.text)) return null;
    const visit = /Visit (\d+)/.exec(res.text);
    return visit ? Number(visit[1]) : null;
  } catch {
    return null;
  }
}

describeEachDatabase('kill -9 during a load of turns', (provider) => {
  let scratch: ScratchDatabase;
  const database = () => scratch;
  let first: ServeProcess | null = null;
  let second: ServeProcess | null = null;
  beforeAll(async () => {
    scratch = await createTestDatabase(provider);
  });
  afterAll(async () => {
    for (const p of [first, second]) if (p && p.child.exitCode === null) p.child.kill('SIGKILL');
    await scratch?.drop();
  });

  it('records every acknowledged turn exactly once and loses no state update across SIGKILL and a restart', async () => {
    first = await serve(database());
    await waitUntilReady(first, '/readyz', 90_000);
    const created = await call(first.url, '/graphql', {
      query: 'mutation { createProject(input: { name: "kill" }) { project { id } } }',
    });
    const projectID: string = JSON.parse(created.text).data.createProject.project.id;
    const published = await call(first.url, '/graphql', {
      query: 'mutation($input: PublishAgentInput!) { publishAgent(input: $input) { version { number } } }',
      variables: { input: { projectID, program: counter } },
    });
    expect(JSON.parse(published.text).errors).toBeUndefined();

    // Every user runs turns back to back until the process dies under them.
    const acknowledged = new Map<string, number[]>(users.map((u) => [u, []]));
    let dead = false;
    const loops = users.map(async (user) => {
      while (!dead) {
        const visit = await turn(first!.url, projectID, user);
        if (visit === null) return;
        acknowledged.get(user)!.push(visit);
      }
    });
    const enough = () => [...acknowledged.values()].reduce((n, v) => n + v.length, 0) >= 24;
    await expect.poll(enough, { timeout: 150_000, interval: 20 }).toBe(true);
    first.child.kill('SIGKILL');
    dead = true;
    const [, signal] = await first.exited;
    expect(signal).toBe('SIGKILL');
    await Promise.all(loops);

    second = await serve(database(), { RUNTIME_LOCK_WAIT_MS: '120000' });
    await waitUntilReady(second, '/readyz', 90_000);
    // One more turn per user: it sees the state the killed process committed, and records the
    // user's earlier outbox entries first.
    const after = new Map<string, number>();
    const visits = await Promise.all(users.map((user) => turn(second!.url, projectID, user)));
    users.forEach((user, i) => {
      expect(visits[i], `the turn of ${user} after the restart`).not.toBeNull();
      after.set(user, visits[i]!);
    });

    const db = await createDb(database().url);
    /**
     * A failed check says what the client saw and what the servers logged (LOG_LEVEL warn: a turn
     * that failed is logged with its error), so a rare failure under load can be explained from the
     * test's output alone.
     */
    const explained = (user: string, check: () => Promise<void>) =>
      check().catch((err: Error) => {
        err.message += [
          `\n--- acknowledged ${JSON.stringify([...acknowledged])}; after the restart ${JSON.stringify([...after])}`,
          `--- the last streams of ${user}:\n${(streams.get(user) ?? []).join('\n---\n')}`,
          `--- the killed server's log:\n${first!.stderr().slice(-20_000)}`,
          `--- the restarted server's log:\n${second!.stderr().slice(-20_000)}`,
        ].join('\n');
        throw err;
      });
    try {
      for (const user of users)
        await explained(user, async () => {
          const acked = acknowledged.get(user)!;
          // Acknowledged turns of one user saw consecutive counts: no update lost between them.
          expect(acked, user).toEqual(acked.map((_v, i) => i + 1));
          const committed = after.get(user)!;
          expect(committed, user).toBeGreaterThanOrEqual(acked.length + 1);

          const state = await db.prisma.runtimeState.findFirstOrThrow({ where: { userId: user } });
          expect((state.state as { variables: { n: number } }).variables.n, user).toBe(committed);

          // Each committed turn's transcript: one action log and its message, exactly once.
          const logs = await db.prisma.transcriptLog.findMany({
            where: { transcript: { projectId: projectID, userId: user } },
            select: { type: true, traceType: true, data: true },
          });
          expect(logs.filter((l) => l.type === 'action').length, user).toBe(committed);
          const visits = logs
            .filter((l) => l.traceType === 'text')
            .map((l) => Number(/Visit (\d+)/.exec(JSON.stringify(l.data))?.[1]))
            .sort((a, b) => a - b);
          expect(visits, user).toEqual(Array.from({ length: committed }, (_v, i) => i + 1));

          // Its usage: one interaction event per turn.
          const interactions = await db.prisma.usageEvent.count({
            where: { projectId: projectID, userId: user, kind: 'interaction' },
          });
          expect(interactions, user).toBe(committed);
        });
      const total = [...after.values()].reduce((a, b) => a + b, 0);
      const rollup = await db.prisma.usageRollup.findMany({ where: { projectId: projectID, metric: 'interactions' } });
      expect(rollup.reduce((n, r) => n + Number(r.count), 0)).toBe(total);
      // Nothing is left in the outbox.
      expect(
        await db.prisma.job.count({ where: { queue: 'turn-record', status: { in: ['queued', 'running'] } } }),
      ).toBe(0);
    } finally {
      await db.close();
    }
    second.child.kill('SIGTERM');
    await second.exited;
  }, 400_000);

  it('frees a user whose turn was running when the process died after RUNTIME_LEASE_MS, not after the turn limit', async () => {
    // An API that holds its first request open (the turn waits on it) and answers the next ones.
    let requests = 0;
    const api = createServer((_req, res) => {
      requests++;
      if (requests > 1) res.end('{"ok":true}');
    });
    api.listen(0, '127.0.0.1');
    await once(api, 'listening');
    const apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}/slow`;
    // A turn limit of a minute: before leases were extended while held, a lease lasted the turn
    // limit plus a minute, and the user of a killed turn waited two minutes; the restarted server
    // below waits 20 s at most.
    const env = { RUNTIME_TURN_TIMEOUT_MS: '60000', RUNTIME_LEASE_MS: '3000', RUNTIME_ALLOW_PRIVATE_URLS: 'true' };
    let dying: ServeProcess | null = null;
    let restarted: ServeProcess | null = null;
    const db = await createDb(database().url);
    try {
      dying = await serve(database(), env);
      await waitUntilReady(dying, '/readyz', 90_000);
      const created = await call(dying.url, '/graphql', {
        query: 'mutation { createProject(input: { name: "lease" }) { project { id } } }',
      });
      const projectID: string = JSON.parse(created.text).data.createProject.project.id;
      const program = {
        name: 'Slow API',
        startFlow: 'main',
        flows: [
          {
            id: 'main',
            start: 'fetch',
            steps: [
              { id: 'fetch', type: 'api', method: 'GET', url: apiUrl, next: 'say' },
              { id: 'say', type: 'message', message: 'The API answered', next: 'menu' },
              { id: 'menu', type: 'choice', buttons: [{ label: 'Again', next: 'fetch' }] },
            ],
          },
        ],
      };
      const published = await call(dying.url, '/graphql', {
        query: 'mutation($input: PublishAgentInput!) { publishAgent(input: $input) { version { number } } }',
        variables: { input: { projectID, program } },
      });
      expect(JSON.parse(published.text).errors).toBeUndefined();

      const path = `/v2/project/${projectID}/user/held/interact/stream`;
      const running = call(dying.url, path, { action: { type: 'launch' } }).catch(() => null);
      // The turn holds the user's lease and waits on the API.
      await expect
        .poll(
          async () =>
            requests === 1 &&
            (await db.prisma.runtimeState.count({ where: { userId: 'held', lockToken: { not: null } } })),
          {
            timeout: 30_000,
          },
        )
        .toBe(1);
      dying.child.kill('SIGKILL');
      await dying.exited;
      await running;

      restarted = await serve(database(), { ...env, RUNTIME_LOCK_WAIT_MS: '20000' });
      await waitUntilReady(restarted, '/readyz', 90_000);
      const next = await call(restarted.url, path, { action: { type: 'launch' } });
      expect(next.status).toBe(200);
      expect(next.text).toContain('The API answered');
      expect(next.text).not.toContain('still running');
      expect(next.text).toMatch(/event: end\nid: \d+\n\n$/);
    } finally {
      for (const p of [dying, restarted]) if (p && p.child.exitCode === null) p.child.kill('SIGKILL');
      api.close();
      await db.close();
    }
  }, 200_000);
});
