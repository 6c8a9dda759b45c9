import { randomUUID } from 'node:crypto';
import DataLoader from 'dataloader';
import type { Authenticator } from '../auth/authenticate';
import type { Principal } from '../auth/principal';
import type { Db } from '../db/client';
import type { Config } from '../env';
import type { JobRunner } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import type { SecretBox } from '../lib/secret-box';
import type { LlmProvider } from '../llm/types';
import type { Metrics } from '../ops/prometheus';
import type { Runtime } from '../runtime/service';
import type { RedactorCache } from '../transcripts/redactor-cache';

/**
 * What resolvers reach through `ctx.services`: the instance's long-lived parts that the schema
 * needs, and no more. Declared here, on the GraphQL side, so the schema depends on this contract
 * rather than on the container that builds it; `AppServices` (src/services.ts) satisfies it.
 */
export interface GraphQLServices {
  config: Config;
  logger: Logger;
  db: Db;
  pubsub: AppPubSub;
  auth: Pick<Authenticator, 'authenticate' | 'invalidate'>;
  llm: LlmProvider;
  runtime: Runtime;
  /** Prometheus metrics, null when METRICS_ENABLED=false. */
  ops: { metrics: Metrics | null };
  /** Seals integration header values at rest (INTEGRATION_SECRETS_KEY); null without a key. */
  integrationSecrets: SecretBox | null;
  /** The projects' transcript redactors kept in memory; absent: each write reads the patterns. */
  redactors?: RedactorCache;
  /** This instance's job runner: a waited KB upload runs its ingestion here when it has a place. */
  jobs?: Pick<JobRunner, 'reserve'>;
}

/**
 * Per-request context: who is calling, the request ID, and request-scoped loaders. `services` is
 * the instance's long-lived container (the same object for every request), not per-request state;
 * resolvers reach the database through it because the schema is built once per process while a
 * process may run several instances (see docs/architecture.md).
 */
export interface Context {
  requestId: string;
  principal: Principal;
  services: GraphQLServices;
  loaders: Loaders;
}

/**
 * Set in the server context of an operation that the REST adapter runs (`"<METHOD> <path>"`): such
 * an operation was already rate limited at the HTTP edge, and its spans are named after the route.
 */
export interface RestOperationMarker {
  restRoute?: string;
}

export interface Loaders {
  project: DataLoader<string, { id: string; workspaceId: string; name: string } | null>;
}

function createLoaders(services: GraphQLServices): Loaders {
  return {
    project: new DataLoader(async (ids) => {
      const rows = await services.db.prisma.project.findMany({
        where: { id: { in: [...ids] } },
        select: { id: true, workspaceId: true, name: true },
      });
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => byId.get(id) ?? null);
    }),
  };
}

const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's request ID when it is a sane token, otherwise a new one. */
export function requestIdFrom(header: string | null | undefined): string {
  return header && requestIdPattern.test(header) ? header : randomUUID();
}

export async function createContext(services: GraphQLServices, headers: Headers): Promise<Context> {
  const requestId = requestIdFrom(headers.get('x-request-id'));
  const principal = await services.auth.authenticate(headers.get('authorization'));
  // The loaders are made when a resolver first asks for one: most operations (a viewer query, a
  // turn through a REST route that checks no project) never do, and each request would make them.
  let loaders: Loaders | undefined;
  return {
    requestId,
    principal,
    services,
    get loaders() {
      loaders ??= createLoaders(services);
      return loaders;
    },
  };
}
