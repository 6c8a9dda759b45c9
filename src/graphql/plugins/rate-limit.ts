import { type DocumentNode, GraphQLError, getOperationAST, Kind, type SelectionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { type RateLimitDeps, rateLimitHeaders, rateLimitMessage, subjectOf } from '../../ops/rate-limit';
import type { RateLimitGroup } from '../../ops/route-groups';
import type { Context, RestOperationMarker } from '../context';

/** The root fields an operation selects (fragments on the root type included). */
function rootFieldsOf(document: DocumentNode, operationName?: string | null): string[] {
  const operation = getOperationAST(document, operationName ?? undefined);
  if (!operation) return [];
  const fragments = new Map(
    document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const fields: string[] = [];
  const seen = new Set<string>();
  const walk = (selections: readonly SelectionNode[]) => {
    for (const s of selections) {
      if (s.kind === Kind.FIELD) fields.push(s.name.value);
      else if (s.kind === Kind.INLINE_FRAGMENT) walk(s.selectionSet.selections);
      else if (!seen.has(s.name.value)) {
        seen.add(s.name.value);
        const fragment = fragments.get(s.name.value);
        if (fragment) walk(fragment.selectionSet.selections);
      }
    }
  };
  walk(operation.selectionSet.selections);
  return fields;
}

/** The groups an operation spends from: one per distinct group of its root fields. */
export function groupsOfOperation(
  document: DocumentNode,
  operationName: string | null | undefined,
  fieldGroups: ReadonlyMap<string, RateLimitGroup>,
): RateLimitGroup[] {
  const groups = new Set<RateLimitGroup>();
  for (const field of rootFieldsOf(document, operationName)) {
    if (field.startsWith('__')) continue;
    groups.add(fieldGroups.get(field) ?? 'default');
  }
  if (groups.size === 0) groups.add('default');
  return [...groups];
}

/** The HTTP server's request (Express's), which Yoga passes in the server context when it serves /graphql. */
interface HttpServerContext {
  req?: { ip?: string | undefined };
}

/**
 * Limits GraphQL operations sent to /graphql and /graphql/stream, in the groups of their root
 * fields. An operation over the limit gets RATE_LIMITED with HTTP status 429 and the headers.
 */
export function useGraphQLRateLimit(
  deps: RateLimitDeps,
  fieldGroups: ReadonlyMap<string, RateLimitGroup>,
): Plugin<Context> {
  const check = async (
    ctx: Context & RestOperationMarker & HttpServerContext,
    document: DocumentNode,
    operationName: string | null | undefined,
  ): Promise<GraphQLError | null> => {
    if (!deps.limiter.enabled || ctx.restRoute) return null;
    const subject = subjectOf(ctx.principal, ctx.req?.ip);
    if (!subject) return null;
    for (const group of groupsOfOperation(document, operationName, fieldGroups)) {
      const decision = await deps.limiter.consume(group, subject);
      if (decision && !decision.allowed) {
        deps.metrics?.rateLimited.inc({ group });
        return new GraphQLError(rateLimitMessage(decision), {
          extensions: { code: 'RATE_LIMITED', http: { status: 429, headers: rateLimitHeaders(decision) } },
        });
      }
    }
    return null;
  };
  // No promise when nothing is limited (limits off, or a REST route's operation, counted at the
  // edge): an async hook would make every execution wait a turn of the microtask queue.
  const limited = (ctx: Context & RestOperationMarker) => deps.limiter.enabled && !ctx.restRoute;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      if (!limited(args.contextValue as Context)) return;
      return check(args.contextValue as Context, args.document, args.operationName).then((error) => {
        if (error) setResultAndStopExecution({ errors: [error] });
      });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      if (!limited(args.contextValue as Context)) return;
      return check(args.contextValue as Context, args.document, args.operationName).then((error) => {
        if (error) setResultAndStopExecution({ errors: [error] });
      });
    },
  };
}
