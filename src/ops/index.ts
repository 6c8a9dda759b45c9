import type { Db } from '../db/client';
import type { Config } from '../env';
import { queueStats } from '../jobs/queue';
import type { Logger } from '../lib/logger';
import { OpenStreams } from './http';
import { instrumentDb } from './instrument';
import { createMetrics, type Metrics } from './metrics';
import { createRateLimiter, type RateLimiter } from './rate-limit';

export { instrumentJobs, instrumentLlm, observeTurn } from './instrument';

/**
 * The operational parts of one instance (docs/operations.md): its metrics registry, its rate
 * limiter and the registry of open SSE streams. Built by `createServices`, used by the HTTP app,
 * the GraphQL pipeline and the server's shutdown.
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
