import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { renderLocalGraphiQL } from '../ops/graphiql';
import type { RateLimitGroup } from '../ops/route-groups';
import { setUnusedQueryPolicy } from './builder';
import { type Context, createContext, type GraphQLServices } from './context';
import { useErrorShaping, useHttpStatusInErrorExtensions } from './errors';
import { useGraphQLSSESingleConnection } from './graphql-sse';
import { operationalPlugins, type PluginOps } from './plugins';
import { useCompiledExecution } from './plugins/compiled-execution';
import { schema } from './schema';

export type ParleyYoga = YogaServerInstance<Record<string, unknown>, Context>;

/** Path of the graphql-sse "single connection" mode; "distinct connections" mode is on /graphql. */
export const graphqlSseEndpoint = '/graphql/stream';

/** What the pipeline needs of the instance: the resolvers' services and the plugins' operational state. */
export type YogaServices = Omit<GraphQLServices, 'ops'> & { ops: PluginOps };

export interface ParleyYogaOptions {
  /**
   * The rate-limit group of each root field that is not in `default`. The composition root
   * (src/app.ts) derives it from the REST route table (`fieldGroupsOf`, src/ops/route-groups.ts),
   * so an operation over /graphql spends from the same budget as the REST route that runs it.
   */
  fieldGroups: ReadonlyMap<string, RateLimitGroup>;
  /**
   * Documents the server runs itself (the REST routes' operations, from the route table): always
   * persisted operations, beside those of GRAPHQL_PERSISTED_OPERATIONS_FILE, so a client may send
   * their hashes over /graphql in persisted-only mode without an exported file.
   */
  persistedDocuments: readonly string[];
}

/**
 * The one GraphQL pipeline. `/graphql` serves queries, mutations, GraphiQL and subscriptions over
 * SSE (distinct connections); `/graphql/stream` speaks the graphql-sse protocol's single
 * connection mode. The REST adapter runs its operations through this same instance.
 */
export function createParleyYoga(services: YogaServices, opts: ParleyYogaOptions): ParleyYoga {
  setUnusedQueryPolicy(services.config.NODE_ENV === 'production' ? null : 'error');
  const log = services.logger.child({ component: 'graphql' });
  return createYoga<Record<string, unknown>, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    graphiql: services.config.GRAPHIQL ? { title: 'Parley GraphQL' } : false,
    // Its files come from this server, not a CDN: GraphiQL works offline (src/ops/graphiql.ts).
    renderGraphiQL: renderLocalGraphiQL,
    landingPage: false,
    // CORS is the HTTP edge's (CORS_ORIGINS, src/http/middleware.ts), for REST and GraphQL alike.
    cors: false,
    // The body was read before Yoga sees it, counting bytes with the HTTP edge's limits
    // (BODY_LIMIT_BYTES, or KB_MAX_FILE_BYTES for uploads, src/app.ts). Yoga's own limit would
    // only pipe the buffer through a byte-counting stream again for every request.
    maxRequestBodySize: false,
    context: ({ request }) => createContext(services, request.headers),
    plugins: [
      // First, so that every plugin after it that wraps execution (spans, metrics) wraps the compiled executor.
      ...(services.config.GRAPHQL_JIT ? [useCompiledExecution(log)] : []),
      useErrorShaping(),
      useHttpStatusInErrorExtensions(),
      useGraphQLSSESingleConnection({ endpoint: graphqlSseEndpoint }),
      ...operationalPlugins({
        config: services.config,
        logger: services.logger,
        auth: services.auth,
        ops: services.ops,
        fieldGroups: opts.fieldGroups,
        persistedDocuments: opts.persistedDocuments,
        streamEndpoint: graphqlSseEndpoint,
      }),
    ],
    logging: {
      debug: (...args) => log.debug(args.map(String).join(' ')),
      info: (...args) => log.info(args.map(String).join(' ')),
      warn: (...args) => log.warn(args.map(String).join(' ')),
      error: (...args) => log.error({ err: args.find((a) => a instanceof Error) }, args.map(String).join(' ')),
    },
  });
}
