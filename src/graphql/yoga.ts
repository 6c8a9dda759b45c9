import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { opsGraphqlPlugins } from '../ops/graphql';
import type { AppServices } from '../services';
import { setUnusedQueryPolicy } from './builder';
import { type Context, createContext } from './context';
import { useErrorShaping, useHttpStatusInErrorExtensions } from './errors';
import { useGraphQLSSESingleConnection } from './graphql-sse';
import { schema } from './schema';

export type ParleyYoga = YogaServerInstance<Record<string, unknown>, Context>;

/** Path of the graphql-sse "single connection" mode; "distinct connections" mode is on /graphql. */
export const graphqlSseEndpoint = '/graphql/stream';

/**
 * The one GraphQL pipeline. `/graphql` serves queries, mutations, GraphiQL and subscriptions over
 * SSE (distinct connections); `/graphql/stream` speaks the graphql-sse protocol's single
 * connection mode. The REST adapter runs its operations through this same instance.
 */
export function createParleyYoga(services: AppServices): ParleyYoga {
  setUnusedQueryPolicy(services.config.NODE_ENV === 'production' ? null : 'error');
  const log = services.logger.child({ component: 'graphql' });
  return createYoga<Record<string, unknown>, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    graphiql: services.config.GRAPHIQL ? { title: 'Parley GraphQL' } : false,
    landingPage: false,
    // CORS is the HTTP layer's (CORS_ORIGINS, src/ops/http.ts), for REST and GraphQL alike.
    cors: false,
    context: ({ request }) => createContext(services, request.headers),
    plugins: [
      useErrorShaping(),
      useHttpStatusInErrorExtensions(),
      useGraphQLSSESingleConnection({ endpoint: graphqlSseEndpoint }),
      ...opsGraphqlPlugins(services, { streamEndpoint: graphqlSseEndpoint }),
    ],
    logging: {
      debug: (...args) => log.debug(args.map(String).join(' ')),
      info: (...args) => log.info(args.map(String).join(' ')),
      warn: (...args) => log.warn(args.map(String).join(' ')),
      error: (...args) => log.error({ err: args.find((a) => a instanceof Error) }, args.map(String).join(' ')),
    },
  });
}
