import { Kind, parse } from 'graphql';

/**
 * Which rate-limit group a request belongs to. A route's path picks its group; the GraphQL root
 * fields a route's operation runs pick the same group when they are called over /graphql. The
 * composition root (src/app.ts) derives those field groups from the REST route table with
 * `fieldGroupsOf` and hands them to the GraphQL pipeline, so routes added later (the knowledge
 * base) are covered without a change here, and nothing here knows the REST layer.
 */

export type RateLimitGroup = 'default' | 'usage' | 'runtime' | 'kb-upload' | 'kb-query';

export const rateLimitGroups: readonly RateLimitGroup[] = ['default', 'usage', 'runtime', 'kb-upload', 'kb-query'];

/** Path patterns of each group, tried in order; a path matching none is in `default`. */
const groupPatterns: readonly [RateLimitGroup, RegExp][] = [
  ['usage', /^\/v2\/query\/usage\/?$/],
  ['runtime', /^\/v2\/project\/[^/]+\/user\/[^/]+\/interact(\/stream)?\/?$/],
  ['runtime', /^\/public\/[^/]+\/state\/user\/[^/]+\/interact\/?$/],
  ['runtime', /^\/v2beta1\/interact\/[^/]+\/[^/]+\/stream\/?$/],
  ['kb-upload', /^\/v1\/knowledge-base\/docs\/upload(\/.*)?$/],
  ['kb-upload', /^\/v1\/knowledge-base\/docs\/[^/]+\/upload(\/url)?\/?$/],
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

/** A route as far as grouping goes: its Express path and the GraphQL document it runs. */
export interface GroupedRoute {
  path: string;
  operation: string;
}

/** The group of each GraphQL root field that a grouped route runs (e.g. `usage` → usage). */
export function fieldGroupsOf(routes: readonly GroupedRoute[]): Map<string, RateLimitGroup> {
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
