import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/**
 * MCP client sessions kept open per integration and reused by the turns of every conversation
 * (docs/agent-step.md "MCP servers"). A session is opened (MCP `initialize`) on first use, reused
 * while it works, closed after `idleMs` without use, and replaced when its integration's URL or
 * headers change. When a request fails because the session is gone (the server restarted or
 * expired it: HTTP 404, or the connection broke), the session is dropped and the next use opens a
 * new one; a listing is retried once on a new session at once, a tool call only when the server
 * answered 404 for the session (it did not run the call, so retrying cannot run it twice).
 */

export interface PooledServer {
  /** The integration's ID: one pooled session per integration. */
  id: string;
  url: string;
  headers: Record<string, string>;
}

export interface IntegrationPoolOptions {
  /** The runtime's outbound fetch (private addresses refused unless allowed). */
  fetch: typeof fetch;
  /** Longest wait for one MCP request (connecting, listing or a call), in milliseconds. */
  timeoutMs: number;
  /** How long an unused session stays open, in milliseconds. */
  idleMs: number;
}

interface Session {
  fingerprint: string;
  client: Promise<Client>;
  inUse: number;
  idleTimer: NodeJS.Timeout | null;
}

export interface IntegrationPool {
  /** Runs `work` with an initialised client of the server's pooled session. */
  use<T>(
    server: PooledServer,
    work: (client: Client) => Promise<T>,
    opts: { retry: 'always' | 'session-lost' },
  ): Promise<T>;
  /** Sessions open now (for tests and metrics). */
  size(): number;
  /** Closes every session. */
  close(): Promise<void>;
}

const fingerprintOf = (server: PooledServer) =>
  createHash('sha256')
    .update(JSON.stringify([server.url, Object.entries(server.headers).sort()]))
    .digest('hex');

/** The server no longer knows the session: it did not handle the request. */
const isSessionLost = (err: unknown) => err instanceof StreamableHTTPError && err.code === 404;

export function createIntegrationPool(opts: IntegrationPoolOptions): IntegrationPool {
  const sessions = new Map<string, Session>();
  let closed = false;

  const shut = async (session: Session) => {
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = null;
    const client = await session.client.catch(() => null);
    if (!client) return;
    const transport = client.transport as StreamableHTTPClientTransport | undefined;
    // Tells the server the session is over (DELETE); servers that do not support it answer 405.
    await transport?.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  };

  const drop = (id: string, session: Session) => {
    if (sessions.get(id) === session) sessions.delete(id);
    void shut(session);
  };

  const open = (server: PooledServer, fingerprint: string): Session => {
    const transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: server.headers },
      fetch: opts.fetch,
    });
    const client = new Client({ name: 'parley', version: '1' });
    const session: Session = {
      fingerprint,
      inUse: 0,
      idleTimer: null,
      client: client
        .connect(transport, { signal: AbortSignal.timeout(opts.timeoutMs), timeout: opts.timeoutMs })
        .then(() => client),
    };
    // A transport that closes on its own (the server ended the session) is not reused.
    client.onclose = () => {
      if (sessions.get(server.id) === session) sessions.delete(server.id);
    };
    session.client.catch(() => drop(server.id, session));
    return session;
  };

  const acquire = (server: PooledServer): Session => {
    if (closed) throw new Error('the MCP session pool is closed');
    const fingerprint = fingerprintOf(server);
    let session = sessions.get(server.id);
    if (session && session.fingerprint !== fingerprint) {
      drop(server.id, session);
      session = undefined;
    }
    if (!session) {
      session = open(server, fingerprint);
      sessions.set(server.id, session);
    }
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = null;
    session.inUse++;
    return session;
  };

  const release = (id: string, session: Session) => {
    session.inUse--;
    if (session.inUse > 0 || sessions.get(id) !== session) return;
    session.idleTimer = setTimeout(() => drop(id, session), opts.idleMs);
    session.idleTimer.unref();
  };

  async function attempt<T>(server: PooledServer, work: (client: Client) => Promise<T>): Promise<T> {
    const session = acquire(server);
    try {
      return await work(await session.client);
    } catch (err) {
      // A protocol-level answer (a JSON-RPC error) leaves the session usable; anything from the
      // transport (404, a broken connection, a timeout) may not, so the session is replaced.
      if (!isJsonRpcError(err)) drop(server.id, session);
      throw err;
    } finally {
      release(server.id, session);
    }
  }

  return {
    async use(server, work, { retry }) {
      try {
        return await attempt(server, work);
      } catch (err) {
        if (closed || isJsonRpcError(err)) throw err;
        if (retry === 'always' || isSessionLost(err)) return attempt(server, work);
        throw err;
      }
    },
    size: () => sessions.size,
    async close() {
      closed = true;
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.all(all.map(shut));
    },
  };
}

/** An error the server answered with in JSON-RPC (the session is fine; the request was refused). */
function isJsonRpcError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    !(err instanceof StreamableHTTPError) &&
    typeof code === 'number' &&
    code < 0 &&
    code !== -32000 /* the connection closed */ &&
    code !== -32001 /* the request timed out */
  );
}
