import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import {
  type DocumentNode,
  type FieldNode,
  GraphQLError,
  type GraphQLField,
  type GraphQLSchema,
  getArgumentValues,
  parse,
  print,
  TypeInfo,
  type ValidationContext,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { type Config, ConfigError } from '../../env';
import type { Context } from '../context';

/**
 * What one GraphQL operation may ask of the server: depth, cost, aliases, tokens and directives
 * (graphql-armor), page sizes and list lengths, introspection, and, for production, persisted
 * operations only. Every refusal says which limit it hit and which setting raises it, with
 * `extensions.code` VALIDATION_FAILED (HTTP 400) and `extensions.limit`.
 *
 * The REST routes run their own built-in documents through `execute` directly: parsing and
 * validation (where armor and the persisted-operations check live) do not apply to them, while
 * the page-size and list-length caps, which look at variables, do.
 */

type LimitName =
  | 'maxDepth'
  | 'maxCost'
  | 'maxAliases'
  | 'maxTokens'
  | 'maxDirectives'
  | 'maxPageSize'
  | 'maxListLength';

const settingOf: Record<LimitName, keyof Config> = {
  maxDepth: 'GRAPHQL_MAX_DEPTH',
  maxCost: 'GRAPHQL_MAX_COST',
  maxAliases: 'GRAPHQL_MAX_ALIASES',
  maxTokens: 'GRAPHQL_MAX_TOKENS',
  maxDirectives: 'GRAPHQL_MAX_DIRECTIVES',
  maxPageSize: 'GRAPHQL_MAX_PAGE_SIZE',
  maxListLength: 'GRAPHQL_MAX_LIST_LENGTH',
};

export function limitError(limit: LimitName, max: number, message: string, path?: string): GraphQLError {
  const detail = message.replace(/^Syntax Error:\s*/, '').trim();
  return new GraphQLError(`The operation exceeds the GraphQL limit ${limit} (${settingOf[limit]}=${max}): ${detail}`, {
    extensions: {
      code: 'VALIDATION_FAILED',
      http: { status: 400 },
      limit: { name: limit, setting: settingOf[limit], max },
      ...(path ? { details: [{ path, message: detail }] } : {}),
    },
  });
}

/** Armor's options for one limit: refuse with our error instead of armor's bare message. */
function armorLimit(limit: LimitName, n: number) {
  return {
    n,
    exposeLimits: true,
    propagateOnRejection: false,
    onReject: [
      (ctx: ValidationContext | null, error: GraphQLError) => {
        const ours = limitError(limit, n, error.message);
        // Parser limits (tokens) have no validation context: throwing is how they refuse.
        if (!ctx) throw ours;
        ctx.reportError(ours);
      },
    ],
  };
}

function armorPlugin(config: Config) {
  const { n: _n, ...cost } = armorLimit('maxCost', config.GRAPHQL_MAX_COST);
  return EnvelopArmorPlugin({
    maxDepth: armorLimit('maxDepth', config.GRAPHQL_MAX_DEPTH),
    maxAliases: armorLimit('maxAliases', config.GRAPHQL_MAX_ALIASES),
    maxTokens: armorLimit('maxTokens', config.GRAPHQL_MAX_TOKENS),
    maxDirectives: armorLimit('maxDirectives', config.GRAPHQL_MAX_DIRECTIVES),
    costLimit: { ...cost, maxCost: config.GRAPHQL_MAX_COST },
    // "Did you mean …?" names fields a client may not know of: only where introspection is open anyway.
    blockFieldSuggestion: { enabled: !config.GRAPHQL_INTROSPECTION },
  });
}

const pageArguments = new Set(['first', 'last', 'take', 'limit']);

/** The first argument value over a cap: a page size, or a list longer than allowed. */
function findOversized(
  value: unknown,
  path: string,
  caps: { maxPageSize: number; maxListLength: number },
  key?: string,
): GraphQLError | null {
  if (Array.isArray(value)) {
    if (value.length > caps.maxListLength) {
      return limitError('maxListLength', caps.maxListLength, `${path} has ${value.length} items`, path);
    }
    for (const [i, item] of value.entries()) {
      const found = findOversized(item, `${path}.${i}`, caps);
      if (found) return found;
    }
    return null;
  }
  if (typeof value === 'number' && key && pageArguments.has(key) && value > caps.maxPageSize) {
    return limitError('maxPageSize', caps.maxPageSize, `${path} is ${value}`, path);
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const found = findOversized(v, `${path}.${k}`, caps, k);
      if (found) return found;
    }
  }
  return null;
}

/** A field of a document that has arguments, with its definition in the schema. */
interface ArgumentSite {
  field: GraphQLField<unknown, unknown>;
  node: FieldNode;
}

/**
 * The fields with arguments of each document, per schema. They depend on the document alone (only
 * their values depend on the variables), and Yoga's parser cache and the REST routes hand the same
 * document object to every request that sends the same text: the visit runs once per document.
 */
const argumentSitesCache = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, ArgumentSite[]>>();

function argumentSitesOf(schema: GraphQLSchema, document: DocumentNode): ArgumentSite[] {
  let bySchema = argumentSitesCache.get(schema);
  if (!bySchema) {
    bySchema = new WeakMap();
    argumentSitesCache.set(schema, bySchema);
  }
  const cached = bySchema.get(document);
  if (cached) return cached;
  const typeInfo = new TypeInfo(schema);
  const sites: ArgumentSite[] = [];
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        if (!node.arguments?.length) return;
        const field = typeInfo.getFieldDef() as GraphQLField<unknown, unknown> | null;
        if (field) sites.push({ field, node });
      },
    }),
  );
  bySchema.set(document, sites);
  return sites;
}

/**
 * Caps `first`/`last`/`take`/`limit` arguments and the length of list arguments, wherever they
 * appear (top level or inside input objects), with the variables applied. A value that does not
 * even coerce is left to execution, which reports it as usual.
 */
export function checkListArguments(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | null | undefined,
  caps: { maxPageSize: number; maxListLength: number },
): GraphQLError | null {
  for (const { field, node } of argumentSitesOf(schema, document)) {
    let values: Record<string, unknown>;
    try {
      values = getArgumentValues(field, node, (variables ?? {}) as Record<string, unknown>);
    } catch {
      continue;
    }
    for (const [name, value] of Object.entries(values)) {
      const found = findOversized(value, `${node.name.value}.${name}`, caps, name);
      if (found) return found;
    }
  }
  return null;
}

function useListArgumentCaps(config: Config): Plugin<Context> {
  const caps = { maxPageSize: config.GRAPHQL_MAX_PAGE_SIZE, maxListLength: config.GRAPHQL_MAX_LIST_LENGTH };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const error = checkListArguments(args.schema, args.document, args.variableValues, caps);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const error = checkListArguments(args.schema, args.document, args.variableValues, caps);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}

/** sha256 (hex) of a document's text: the key clients send as extensions.persistedQuery.sha256Hash. */
export function operationHash(document: string): string {
  return createHash('sha256').update(document).digest('hex');
}

/** A normalised form of a document, so formatting does not matter when comparing documents. */
function normalized(document: string | DocumentNode): string {
  return print(typeof document === 'string' ? parse(document) : document);
}

export interface PersistedOperations {
  byHash: Map<string, string>;
  /** Normalised documents, for the graphql-sse single-connection endpoint, which sends full text. */
  documents: Set<string>;
}

/**
 * Reads a persisted-operations file: an object mapping each hash to its document (the format of
 * `npm run graphql:persisted-operations`, Apollo's and GraphQL Codegen's), or an array of documents.
 */
export function loadPersistedOperations(file: string, builtIn: readonly string[] = []): PersistedOperations {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`GRAPHQL_PERSISTED_OPERATIONS_FILE: cannot read ${file}: ${(err as Error).message}`);
  }
  const entries: [string, string][] = Array.isArray(raw)
    ? raw.map((doc) => [operationHash(String(doc)), String(doc)])
    : Object.entries(raw as Record<string, unknown>).map(([hash, doc]) => [hash, String(doc)]);
  const store = builtInPersistedOperations(builtIn);
  for (const [hash, doc] of entries) {
    store.byHash.set(hash, doc);
    try {
      store.documents.add(normalized(doc));
    } catch (err) {
      throw new ConfigError(
        `GRAPHQL_PERSISTED_OPERATIONS_FILE: ${file}: the operation ${hash} does not parse: ${(err as Error).message}`,
      );
    }
  }
  return store;
}

/** The persisted operations of documents the server itself runs (they parse: the schema test checks them). */
function builtInPersistedOperations(documents: readonly string[]): PersistedOperations {
  return {
    byHash: new Map(documents.map((doc) => [operationHash(doc), doc])),
    documents: new Set(documents.map((doc) => normalized(doc))),
  };
}

/**
 * A persisted-operations file (hash → document) of the documents that `routes` run: the REST
 * routes' built-in documents, for scripts/export-persisted-operations.ts.
 */
export function restPersistedOperations(routes: readonly { operation: string }[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const route of routes) out[operationHash(route.operation)] = route.operation;
  return out;
}

function persistedOnlyError(message: string, code: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code, http: { status: 400 } } });
}

function usePersisted(config: Config, store: PersistedOperations, streamEndpoint: string): Plugin<Context>[] {
  const only = config.GRAPHQL_PERSISTED_ONLY;
  return [
    usePersistedOperations<Context>({
      getPersistedOperation: (key) => store.byHash.get(key) ?? null,
      allowArbitraryOperations: !only,
      customErrors: {
        notFound: {
          message: 'No persisted operation has this hash.',
          extensions: { code: 'PERSISTED_QUERY_NOT_FOUND', http: { status: 400 } },
        },
        keyNotFound: {
          message:
            'This server runs persisted operations only (GRAPHQL_PERSISTED_ONLY): send extensions.persistedQuery.sha256Hash.',
          extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
        },
        persistedQueryOnly: {
          message:
            'This server runs persisted operations only (GRAPHQL_PERSISTED_ONLY): send the hash of a persisted operation instead of a document.',
          extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
        },
      },
    }),
    {
      // The graphql-sse single-connection endpoint sends whole documents and skips the check above:
      // there, a document must equal a persisted one.
      onValidate({ context, params, setResult }) {
        if (!only) return;
        const request = (context as { request?: Request }).request;
        if (!request?.url || !new URL(request.url, 'http://x').pathname.endsWith(streamEndpoint)) return;
        if (store.documents.has(normalized(params.documentAST))) return;
        setResult([
          persistedOnlyError(
            'This server runs persisted operations only (GRAPHQL_PERSISTED_ONLY): this document is not one of them.',
            'PERSISTED_QUERY_ONLY',
          ),
        ]);
      },
    },
  ];
}

/** The protection plugins of the GraphQL pipeline, from the configuration. */
export function graphqlProtectionPlugins(
  config: Config,
  opts: { streamEndpoint: string; persistedDocuments: readonly string[] },
): Plugin<Context>[] {
  const plugins: Plugin<Context>[] = [armorPlugin(config) as Plugin<Context>, useListArgumentCaps(config)];
  if (!config.GRAPHQL_INTROSPECTION)
    plugins.push(useDisableIntrospection<Context & Record<string, unknown>>() as Plugin<Context>);
  if (config.GRAPHQL_PERSISTED_OPERATIONS_FILE || config.GRAPHQL_PERSISTED_ONLY) {
    const store = config.GRAPHQL_PERSISTED_OPERATIONS_FILE
      ? loadPersistedOperations(config.GRAPHQL_PERSISTED_OPERATIONS_FILE, opts.persistedDocuments)
      : builtInPersistedOperations(opts.persistedDocuments);
    plugins.push(...usePersisted(config, store, opts.streamEndpoint));
  }
  return plugins;
}
