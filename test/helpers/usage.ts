import type { UsageEvent } from '../../src/analytics/events';
import { type RecordedUsage, recordUsageEvents } from '../../src/analytics/usage-event-writer';
import { routes } from '../../src/rest/routes';
import type { HttpResponse, TestApp, TestProject } from './app';

/** Records events through the service, as the runtime, evaluations and the KB will. */
export function recordEvents(app: TestApp, events: UsageEvent[]): Promise<RecordedUsage> {
  return recordUsageEvents({ db: app.services.db, pubsub: app.services.pubsub }, events);
}

/** POST /v2/query/usage with `{data: {name, filter}}`. */
export function usageRest(app: TestApp, key: string, data: unknown): Promise<HttpResponse> {
  return app.http('POST', '/v2/query/usage', { key, body: { data } });
}

/** The GraphQL operation the REST route runs: the same fields, for comparing both interfaces. */
export const usageOperation = routes.find((r) => r.path === '/v2/query/usage')!.operation;

export function usageGql(app: TestApp, key: string, name: string, filter: Record<string, unknown>) {
  return app.gql(usageOperation, { name, filter }, key);
}

export function environmentIds(p: TestProject): { dev: string; prod: string } {
  return {
    dev: p.environments.find((e) => e.alias === 'development')!.id,
    prod: p.environments.find((e) => e.alias === 'production')!.id,
  };
}

/** Items in the order of DECISIONS.md §4: period, environment, then the other key fields. */
export function sortItems<T extends Record<string, unknown>>(items: T[], keys: string[]): T[] {
  return [...items].sort((a, b) => {
    for (const k of ['period', 'environmentID', ...keys]) {
      const x = String(a[k]);
      const y = String(b[k]);
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  });
}
