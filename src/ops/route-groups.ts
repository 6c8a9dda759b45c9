import { Kind, parse } from 'graphql';
import type { RestRoute } from '../rest/adapter';

/**
 * Which rate-limit group a request belongs to, and which route pattern names it in metrics. Both
 * come from the REST route table, so routes added later (the knowledge base) are covered without
 * a change here: a route's path picks its group, and the GraphQL root fields its operation runs
 * pick the same group when called over /graphql.
 */

export type RateLimitGroup = 'default' | 'usage' | 'runtime' | 'kb-upload' | 'kb-query';

export const rateLimitGroups: readonly RateLimitGroup[] = ['default', 'usage', 'runtime', 'kb-upload', 'kb-query'];

/** Path patterns of each group, tried in order; a path matching none is in `default`. */
const groupPatterns: readonly [RateLimitGroup, RegExp][] = [
  ['usage', /^\/v2\/query\/usage\/?$/],
  ['runtime', /^\/v2\/project\/[^/]+\/user\/[^/]+\/interact(\/stream)?\/?$/],
  ['runtime', /^\/v2beta1\/interact\/[^/]+\/[^/]+\/stream\/?$/],
  ['kb-upload', /^\/v1\/knowledge-base\/docs\/upload(\/.*)?$/],
  ['kb-upload', /^\/v1\/knowledge-base\/docs\/[^/]+\/upload\/?$/],
  ['kb-query', /^\/(v1\/)?knowledge-base\/query\/?$/],
];

/** GraphQL root fields that no REST route runs but that belong to a group. */
const extraFieldGroups: Record<string, RateLimitGroup> = {
  usageTimeSeries: 'usage',
  usageTotals: 'usage',
  knowledgeBaseAnswer: 'kb-query',
};

export function groupOfPath(path: string): RateLimitGroup {
  for (const [group, pattern] of groupPatterns) if (pattern.test(path)) return group;
  return 'default';
}

/** The group of each GraphQL root field that a grouped REST route runs (e.g. `usage` → usage). */
export function fieldGroupsOf(routes: readonly RestRoute[]): Map<string, RateLimitGroup> {
  const groups = new Map<string, RateLimitGroup>(Object.entries(extraFieldGroups));
  for (const route of routes) {
    const group = groupOfPath(route.path.replace(/:[A-Za-z0-9_]+/g, 'x'));
    if (group === 'default') continue;
    for (const definition of parse(route.operation).definitions) {
      if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
      for (const selection of definition.selectionSet.selections) {
        if (selection.kind === Kind.FIELD && !groups.has(selection.name.value)) groups.set(selection.name.value, group);
      }
    }
  }
  return groups;
}

interface CompiledRoute {
  method: string;
  pattern: string;
  regex: RegExp;
}

/**
 * Matches a request to its route pattern (`/v1/transcript/:transcriptID`) without Express, so a
 * request refused before routing (a body over the limit, malformed JSON) is still counted under
 * its route rather than under its raw path, whose IDs would make every request a new label.
 */
export function createRouteMatcher(routes: readonly Pick<RestRoute, 'method' | 'path'>[]) {
  const compiled: CompiledRoute[] = routes.map((route) => ({
    method: route.method,
    pattern: route.path,
    regex: new RegExp(
      `^${route.path
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`)))
        .join('/')}/?$`,
    ),
  }));
  return (method: string, path: string): string | null => {
    for (const route of compiled) if (route.method === method && route.regex.test(path)) return route.pattern;
    return null;
  };
}
