import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ScratchDatabase } from '../../src/db/scratch';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';
import { startServeProcess, waitUntilReady, waitUntilUnready } from '../helpers/serve-process';

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
