import type { Db } from '../db/client';
import type { Config } from '../env';
import { queueStats } from '../jobs/queue';
import type { Logger } from '../lib/logger';
import { instrumentDb } from './instrument';
import { createMetrics, type Metrics } from './prometheus';
import { createRateLimiter, type RateLimiter } from './rate-limit';
import { OpenStreams } from './streams';

export { instrumentJobs, instrumentLlm, observeTurn } from './instrument';

/**
 * The operational state of one instance (docs/operations.md): its Prometheus registry, its rate
 * limiter, the registry of open SSE streams and the shutdown signal. Built by `createServices`;
 * used by the HTTP edge (src/http), the GraphQL plugins (src/graphql/plugins) and the server's
 * shutdown. Nothing in src/ops imports those layers: they import it.
 */
export interface Ops {
  /** Null when METRICS_ENABLED=false. */
  metrics: Metrics | null;
  rateLimiter: RateLimiter;
  streams: OpenStreams;
  /** Aborted when the instance starts shutting down: GraphQL subscriptions then complete. */
  shutdownSignal: AbortSignal;
  /** Readiness is already false: end the subscriptions (the server's shutdown calls this). */
  beginShutdown(): void;
  close(): Promise<void>;
}

export function createOps(config: Config, deps: { logger: Logger; db: Db }): Ops {
  const metrics = config.METRICS_ENABLED ? createMetrics({ queueStats: () => queueStats(deps.db) }) : null;
  const stopDbInstrumentation = instrumentDb(deps.db, metrics);
  const rateLimiter = createRateLimiter(config, { logger: deps.logger.child({ component: 'rate-limit' }) });
  const shutdown = new AbortController();
  return {
    metrics,
    rateLimiter,
    streams: new OpenStreams(metrics),
    shutdownSignal: shutdown.signal,
    beginShutdown: () => shutdown.abort(),
    async close() {
      stopDbInstrumentation();
      await rateLimiter.close();
    },
  };
}
