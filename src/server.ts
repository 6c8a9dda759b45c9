import { once } from 'node:events';
import type { Server } from 'node:http';
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
  const server = parley.app.listen(config.PORT, config.HOST);
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
      parley.setDraining();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_GRACE_MS);
      await closed;
      clearTimeout(timer);
      await services.close();
    })();
    return closing;
  };
  return { server, services, parley, url, close };
}

/** Stops gracefully on SIGTERM or SIGINT, then exits. */
export function exitOnSignals(running: RunningServer): void {
  const stop = (signal: string) => {
    running.services.logger.info({ signal }, 'shutting down');
    running.close().then(
      () => process.exit(0),
      (err: unknown) => {
        running.services.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
