import type { Plugin } from 'graphql-yoga';
import type { Context } from '../graphql/context';
import { routes } from '../rest/routes';
import type { AppServices } from '../services';
import { useGraphQLObservability } from './graphql-observability';
import { graphqlProtectionPlugins } from './graphql-protection';
import { useGraphQLRateLimit } from './rate-limit';
import { fieldGroupsOf } from './route-groups';
import { useEndSubscriptionsOnShutdown } from './shutdown';

/** The operational plugins of the GraphQL pipeline: spans and metrics, rate limits, limits. */
export function opsGraphqlPlugins(services: AppServices, opts: { streamEndpoint: string }): Plugin<Context>[] {
  return [
    useGraphQLObservability(services.ops.metrics),
    useGraphQLRateLimit(
      {
        limiter: services.ops.rateLimiter,
        auth: services.auth,
        logger: services.logger,
        metrics: services.ops.metrics ?? undefined,
      },
      fieldGroupsOf(routes),
    ),
    ...graphqlProtectionPlugins(services.config, opts),
    useEndSubscriptionsOnShutdown(services.ops.shutdownSignal),
  ];
}
