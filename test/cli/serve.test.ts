import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { startTestApp } from '../helpers/app';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';
import { runParley, startServeProcess, waitUntilReady, waitUntilUnready } from '../helpers/serve-process';

describeEachDatabase('parley serve', (provider) => {
  let database: ScratchDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(provider);
  });
  afterAll(async () => {
    await database.drop();
  });

  it('serves until SIGTERM, then turns unready, completes an open subscription, and exits 0', async () => {
    const token = 'operator-token-for-shutdown-test';
    const server = await startServeProcess({
      DATABASE_URL: database.url,
      ADMIN_TOKEN: token,
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '1500',
    });
    try {
      await waitUntilReady(server);
      // An open request: a subscription stream that never ends by itself.
      const stream = await fetch(`${server.url}/graphql`, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription { auditEvents { action } }' }),
      });
      expect(stream.status).toBe(200);
      const reader = stream.body!.getReader();

      server.child.kill('SIGTERM');
      // Readiness turns false while the open stream holds the server up.
      await waitUntilUnready(server);
      // The open subscription completes (graphql-sse's `complete` event) rather than being cut.
      let text = '';
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expect(text).toContain('event: complete');
      const [code] = await server.exited;
      expect(code).toBe(0);
      expect(server.stderr()).toContain('shutting down');
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  });
});

describeEachDatabase('parley serve on a port that is taken', (provider) => {
  it('says the port is in use and how to choose another, without a stack trace, and exits 1', {
    timeout: 120_000,
  }, async () => {
    const app = await startTestApp(provider);
    try {
      const { port } = new URL(app.url);
      const out = await runParley(['serve'], { DATABASE_URL: app.database.url, HOST: '127.0.0.1', PORT: port });
      expect(out.code).toBe(1);
      expect(out.stderr).toContain(`port ${port} (127.0.0.1) is already in use`);
      expect(out.stderr).toContain('PORT=');
      expect(out.stderr).not.toMatch(/^\s+at /m);
    } finally {
      await app.close();
    }
  });
});
