import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createTestDatabase, lanes } from '../helpers/lanes';
import { type ServeProcess, startServeProcess, waitUntilReady } from '../helpers/serve-process';

/**
 * `parley demo` on the SQLite file a running `parley serve` holds, while that server takes
 * conversations: both processes write the file at once. Transactions that read and then write
 * (publishing the demo's agent, a conversation turn) used to fail with SQLITE_BUSY on one side,
 * because a deferred transaction cannot take the write lock once the other process has committed
 * (src/db/client.ts, beginImmediate). Neither side may fail now.
 */

const run = promisify(execFile);

async function demo(databaseUrl: string, args: string[]) {
  const { stdout } = await run(process.execPath, [join(projectRoot, 'bin/parley.js'), 'demo', ...args], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    timeout: 240_000,
  });
  return JSON.parse(stdout) as { projectID: string; apiKey: string };
}

async function gql(url: string, key: string, query: string, variables: Record<string, unknown>) {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { authorization: key, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
}

const describeSqlite = lanes().sqlite ? describe : describe.skip;

describeSqlite('parley demo beside a running parley serve (SQLite)', () => {
  let database: ScratchDatabase;
  let server: ServeProcess;
  let first: { projectID: string; apiKey: string };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    // A project whose published agent the server talks to while the second demo runs.
    first = await demo(database.url, ['--days', '1', '--seed', '1', '--name', 'Talking']);
    server = await startServeProcess({ DATABASE_URL: database.url, LOG_LEVEL: 'warn' });
    // Generous: this file starts two processes that compile and migrate on a busy machine.
    await waitUntilReady(server, '/readyz', 120_000);
  }, 300_000);

  afterAll(async () => {
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await database?.drop();
  });

  it('seeds a second project while the server answers conversations, and the server serves it', {
    timeout: 300_000,
  }, async () => {
    let done = false;
    const turns: { ok: boolean; body: string }[] = [];
    const talk = (async () => {
      for (let i = 0; !done; i++) {
        const body = await gql(
          server.url,
          first.apiKey,
          'mutation($p: ID!, $u: String!, $r: InteractRequestInput!) { interact(projectID: $p, userID: $u, request: $r) { outcome } }',
          { p: first.projectID, u: `visitor-${i % 4}`, r: { action: { type: 'launch' } } },
        );
        turns.push({ ok: !body.errors, body: JSON.stringify(body).slice(0, 300) });
      }
    })();
    const second = await demo(database.url, ['--days', '2', '--seed', '2', '--name', 'Seeded beside']).finally(() => {
      done = true;
    });
    await talk;
    expect(turns.length).toBeGreaterThan(1);
    expect(turns.filter((t) => !t.ok)).toEqual([]);
    // The running server reads what the demo wrote, with the key the demo printed.
    const found = await gql(
      server.url,
      second.apiKey,
      'query($p: ID!) { transcripts(projectID: $p, first: 1) { totalCount } }',
      { p: second.projectID },
    );
    expect(found.errors).toBeUndefined();
    expect((found.data?.transcripts as { totalCount: number } | undefined)?.totalCount).toBeGreaterThan(0);
    // Every turn the server answered is recorded in its transcript (a turn whose recording waited on
    // the demo's lock stays in the outbox and is recorded later): nothing is lost.
    await expect
      .poll(
        async () => {
          const r = await gql(
            server.url,
            first.apiKey,
            'query($p: ID!) { transcripts(projectID: $p, criteria: {userID: "visitor-0"}, first: 1) { totalCount } }',
            { p: first.projectID },
          );
          return (r.data?.transcripts as { totalCount: number } | undefined)?.totalCount ?? 0;
        },
        { timeout: 60_000 },
      )
      .toBeGreaterThan(0);
    expect(server.stderr()).not.toMatch(/"level":(50|60)/);
  });
});
