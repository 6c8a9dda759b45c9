import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp, type ParleyApp } from './app';
import type { Config } from './env';
import { type AppServices, createServices } from './services';

export interface RunningServer {
  server: Server;
  services: AppServices;
  parley: ParleyApp;
  url: string;
  /** Graceful stop: readiness off, no new connections, in-flight requests finish within the grace period. */
  close(): Promise<void>;
}

export async function startServer(config: Config, opts: { services?: AppServices } = {}): Promise<RunningServer> {
  const services = opts.services ?? (await createServices(config));
  const parley = buildApp(services);
  // A request must arrive whole within REQUEST_TIMEOUT_MS (its headers within HEADERS_TIMEOUT_MS);
  // a response may take as long as it needs, so SSE streams are not cut (docs/operations.md).
  const headersTimeout = config.REQUEST_TIMEOUT_MS
    ? Math.min(config.HEADERS_TIMEOUT_MS, config.REQUEST_TIMEOUT_MS)
    : config.HEADERS_TIMEOUT_MS;
  const server = createServer(
    {
      requestTimeout: config.REQUEST_TIMEOUT_MS,
      headersTimeout,
      keepAliveTimeout: config.KEEP_ALIVE_TIMEOUT_MS,
      // How often Node looks for requests over those timeouts (its default, 30 s, is coarser than short timeouts).
      connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(headersTimeout / 4))),
    },
    parley.app,
  );
  server.listen(config.PORT, config.HOST);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST;
  const url = `http://${host}:${port}`;
  if (config.JOBS_ENABLED) services.startJobs();
  services.logger.info(
    { url, database: services.db.provider, redis: Boolean(config.REDIS_URL), jobs: config.JOBS_ENABLED },
    'Parley is listening',
  );

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      // Everything below shares one deadline: the process is done within SHUTDOWN_GRACE_MS.
      const deadline = Date.now() + config.SHUTDOWN_GRACE_MS;
      const remaining = () => Math.max(0, deadline - Date.now());
      const log = services.logger.child({ component: 'shutdown' });
      // 1. Readiness turns false, and no new connection is accepted.
      parley.setDraining();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // 2. GraphQL subscriptions complete now; runtime streams finish their turn and send `end`.
      services.ops.beginShutdown();
      log.info(
        {
          graceMs: config.SHUTDOWN_GRACE_MS,
          runtimeStreams: services.ops.streams.count('rest'),
          runningJobs: services.jobs.running,
        },
        'draining',
      );
      // 3. Jobs: nothing new is claimed; running ones get until the deadline, then go back to the queue.
      const jobsStopped = services.jobs.stop({ graceMs: remaining() });
      // 4. A connection whose response has finished is closed as soon as it is idle.
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      const cut = setTimeout(() => {
        log.warn('grace period over: closing the connections still open');
        server.closeAllConnections();
      }, remaining());
      await closed;
      clearInterval(idle);
      clearTimeout(cut);
      await jobsStopped;
      // 5. What is left (turns whose client went away, then the database) gets what remains of the
      // grace period; the process exits after it in any case.
      let timer: NodeJS.Timeout | undefined;
      const outOfTime = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), remaining() + 1000);
      });
      const outcome = await Promise.race([services.close().then(() => 'closed' as const), outOfTime]);
      clearTimeout(timer);
      if (outcome === 'timeout') log.warn('closing the services took longer than the grace period');
    })();
    return closing;
  };
  return { server, services, parley, url, close };
}

/**
 * Stops gracefully on SIGTERM or SIGINT, then exits. `beforeExit` runs last (flushing traces);
 * a watchdog exits anyway a little after the grace period if something hangs.
 */
export function exitOnSignals(running: RunningServer, opts: { beforeExit?: () => Promise<void> } = {}): void {
  const stop = (signal: string) => {
    running.services.logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      running.services.logger.error('shutdown did not finish within the grace period; exiting');
      process.exit(1);
    }, running.services.config.SHUTDOWN_GRACE_MS + 3000).unref();
    running.close().then(
      async () => {
        await opts.beforeExit?.();
        process.exit(0);
      },
      (err: unknown) => {
        running.services.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
