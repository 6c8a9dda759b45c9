import { randomUUID } from 'node:crypto';
import DataLoader from 'dataloader';
import type { Principal } from '../auth/principal';
import type { AppServices } from '../services';

/**
 * Per-request context: who is calling, the request ID, and request-scoped loaders. `services` is
 * the instance's long-lived container (the same object for every request), not per-request state;
 * resolvers reach the database through it because the schema is built once per process while a
 * process may run several instances (see docs/architecture.md).
 */
export interface Context {
  requestId: string;
  principal: Principal;
  services: AppServices;
  loaders: Loaders;
}

export interface Loaders {
  project: DataLoader<string, { id: string; workspaceId: string; name: string } | null>;
}

function createLoaders(services: AppServices): Loaders {
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

export async function createContext(services: AppServices, headers: Headers): Promise<Context> {
  return {
    requestId: requestIdFrom(headers.get('x-request-id')),
    principal: await services.auth.authenticate(headers.get('authorization')),
    services,
    loaders: createLoaders(services),
  };
}
