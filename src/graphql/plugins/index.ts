import type { Plugin } from 'graphql-yoga';
import type { Config } from '../../env';
import type { Logger } from '../../lib/logger';
import type { Metrics } from '../../ops/prometheus';
import type { RateLimitDeps, RateLimiter } from '../../ops/rate-limit';
import type { RateLimitGroup } from '../../ops/route-groups';
import type { Context } from '../context';
import { useEndSubscriptionsOnShutdown } from './end-subscriptions-on-shutdown';
import { useGraphQLObservability } from './observability';
import { graphqlProtectionPlugins } from './protection';
import { useGraphQLRateLimit } from './rate-limit';

/** The instance-wide operational state the GraphQL plugins use (a part of `Ops`, src/ops). */
export interface PluginOps {
  metrics: Metrics | null;
  rateLimiter: RateLimiter;
  shutdownSignal: AbortSignal;
}

export interface OperationalPluginOptions {
  config: Config;
  logger: Logger;
  auth: RateLimitDeps['auth'];
  ops: PluginOps;
  /** The rate-limit group of each root field (src/app.ts derives it from the REST route table). */
  fieldGroups: ReadonlyMap<string, RateLimitGroup>;
  /** Documents that are always persisted operations (src/app.ts: the REST routes' documents). */
  persistedDocuments: readonly string[];
  /** Path of the graphql-sse single-connection endpoint (persisted-only checks full documents there). */
  streamEndpoint: string;
}

/** The operational plugins of the GraphQL pipeline: spans and metrics, rate limits, limits, shutdown. */
export function operationalPlugins(opts: OperationalPluginOptions): Plugin<Context>[] {
  return [
    useGraphQLObservability(opts.ops.metrics),
    useGraphQLRateLimit(
      {
        limiter: opts.ops.rateLimiter,
        auth: opts.auth,
        logger: opts.logger,
        metrics: opts.ops.metrics ?? undefined,
      },
      opts.fieldGroups,
    ),
    ...graphqlProtectionPlugins(opts.config, {
      streamEndpoint: opts.streamEndpoint,
      persistedDocuments: opts.persistedDocuments,
    }),
    useEndSubscriptionsOnShutdown(opts.ops.shutdownSignal),
  ];
}
