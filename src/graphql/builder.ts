import SchemaBuilder from '@pothos/core';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin, { type AuthFailure, AuthScopeFailureType } from '@pothos/plugin-scope-auth';
import ValidationPlugin from '@pothos/plugin-validation';
import type { GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import type { Scope } from '../auth/keys';
import { hasScope } from '../auth/principal';
import type PrismaTypes from '../generated/pothos-types';
import { getDatamodel } from '../generated/pothos-types';
import { AppError, issuesToDetails, summarizeDetails } from '../lib/errors';
import type { Context } from './context';

/** How plugin-prisma reacts to a resolver that ignores its `query` argument (an N+1 in waiting). */
let unusedQueryPolicy: 'error' | 'warn' | null = 'error';
export function setUnusedQueryPolicy(policy: 'error' | 'warn' | null): void {
  unusedQueryPolicy = policy;
}

function firstFailedScope(failure: AuthFailure): string | null {
  switch (failure.kind) {
    case AuthScopeFailureType.AuthScope:
      return failure.scope === 'scope' ? String(failure.parameter) : failure.scope;
    case AuthScopeFailureType.AnyAuthScopes:
    case AuthScopeFailureType.AllAuthScopes:
      for (const inner of failure.failures) {
        const found = firstFailedScope(inner);
        if (found) return found;
      }
      return null;
    default:
      return null;
  }
}

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  AuthScopes: {
    /** Any valid API key or the operator token. */
    authenticated: boolean;
    /** The operator token (ADMIN_TOKEN). */
    operator: boolean;
    /** The key carries this scope (the operator has them all). */
    scope: Scope;
  };
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    JSON: { Input: unknown; Output: unknown };
    JSONObject: { Input: Record<string, unknown>; Output: Record<string, unknown> };
    /** Integers within ±(2^53 − 1), the bound of SPEC.md's usage numbers (GraphQL's Int is 32-bit). */
    SafeInt: { Input: number; Output: number };
    /** An uploaded file (GraphQL multipart request; the REST adapter passes multipart files as these). */
    File: { Input: File; Output: never };
  };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: false;
}>({
  // Scope-auth first, so authorisation wraps every other plugin's behaviour.
  plugins: [ScopeAuthPlugin, PrismaPlugin, RelayPlugin, ValidationPlugin],
  defaultFieldNullability: false,
  scopeAuth: {
    authorizeOnSubscribe: true,
    authScopes: (ctx) => ({
      authenticated: ctx.principal.kind !== 'anonymous',
      operator: ctx.principal.kind === 'operator',
      scope: (scope: Scope) => hasScope(ctx.principal, scope),
    }),
    unauthorizedError: (_parent, ctx, _info, result) => {
      if (ctx.principal.kind === 'anonymous') return new AppError('UNAUTHENTICATED', ctx.principal.reason);
      const scope = firstFailedScope(result.failure);
      if (scope === 'operator')
        return new AppError('INSUFFICIENT_SCOPE', 'Only the operator (ADMIN_TOKEN) may do this.');
      return new AppError(
        'INSUFFICIENT_SCOPE',
        scope && scope !== 'authenticated' ? `This API key lacks the "${scope}" scope.` : result.message,
      );
    },
  },
  prisma: {
    client: (ctx) => ctx.services.db.prisma,
    dmmf: getDatamodel(),
    exposeDescriptions: true,
    filterConnectionTotalCount: true,
    onUnusedQuery: (info) => {
      if (!unusedQueryPolicy) return;
      const message = `Prisma query of ${info.parentType.name}.${info.fieldName} was not used: spread \`query\` into the Prisma call`;
      if (unusedQueryPolicy === 'error') throw new Error(message);
      console.warn(message);
    },
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    nodeQueryOptions: false,
    nodesQueryOptions: false,
  },
  validation: {
    validationError: (result) => {
      const details = issuesToDetails(result.issues);
      return new AppError('VALIDATION_FAILED', summarizeDetails(details), { details });
    },
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

/**
 * Points each subscription field's `resolve` at the field's own resolver. Pothos runs a field's
 * argument mappers (plugin-validation's checks of the arguments) before its `resolve` as well as
 * before its `subscribe`, and a subscription's `resolve` runs once per event: every event of a
 * turn validated the turn's arguments again. They do not change between events (one operation,
 * one set of variables), they were validated when the subscription started, and its scopes are
 * checked there too (`authorizeOnSubscribe`, so scope-auth adds nothing to `resolve`). Every
 * subscription resolver maps its event alone and reads no arguments.
 */
export function resolveSubscriptionEventsDirectly(schema: GraphQLSchema): GraphQLSchema {
  const fields = schema.getSubscriptionType()?.getFields() ?? {};
  for (const field of Object.values(fields)) {
    const config = field.extensions?.pothosConfig as { resolve?: GraphQLFieldResolver<unknown, unknown> } | undefined;
    if (config?.resolve) field.resolve = config.resolve;
  }
  return schema;
}
