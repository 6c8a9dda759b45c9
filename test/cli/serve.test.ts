import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

async function waitUntilReady(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`server exited early with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become ready');
}

describeEachDatabase('parley serve', (provider) => {
  let database: ScratchDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(provider);
  });
  afterAll(async () => {
    await database.drop();
  });

  it('serves until SIGTERM, then turns unready, completes an open subscription, and exits 0', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const token = 'operator-token-for-shutdown-test';
    const child = spawn(process.execPath, [join(projectRoot, 'bin/parley.js'), 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: database.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        ADMIN_TOKEN: token,
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_MS: '1500',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk) => {
      stderr += String(chunk);
    });
    try {
      await waitUntilReady(url, child);
      // An open request: a subscription stream that never ends by itself.
      const controller = new AbortController();
      const stream = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription { auditEvents { action } }' }),
        signal: controller.signal,
      });
      expect(stream.status).toBe(200);
      const reader = stream.body!.getReader();

      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      // Readiness turns false while the open stream holds the server up.
      await expect
        .poll(async () => {
          try {
            return (await fetch(`${url}/readyz`)).status;
          } catch {
            return 'refused';
          }
        })
        .not.toBe(200);
      // The open subscription completes (graphql-sse's `complete` event) rather than being cut.
      let text = '';
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expect(text).toContain('event: complete');
      const [code] = await exited;
      expect(code).toBe(0);
      expect(stderr).toContain('shutting down');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
