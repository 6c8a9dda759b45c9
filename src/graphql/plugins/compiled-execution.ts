import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  GraphQLError,
  GraphQLIncludeDirective,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  getNullableType,
  getOperationAST,
  getVariableValues,
  execute as graphqlJsExecute,
  isAbstractType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  locatedError,
  type OperationDefinitionNode,
  type SelectionSetNode,
  typeFromAST,
} from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from '../../lib/logger';
import type { Context } from '../context';

/**
 * GRAPHQL_JIT: queries and mutations run through graphql-jit, which compiles a document (with its
 * operation name) once into a function, so a request no longer walks the AST to collect fields
 * and coerce variables. The compiled function is kept with the parsed document, which Yoga's
 * parser cache and the REST routes (parsed at start) reuse for every request.
 *
 * The answers are those of the executor it replaces (Yoga's, graphql-js semantics):
 * - Variables graphql-jit refuses (its result then has no `data`: nothing ran) are refused by the
 *   replaced executor with the same arguments, so the messages are graphql-js's. Only the error
 *   path pays for it.
 * - Errors raised while executing become graphql-js errors (`locatedError`, as graphql-js makes
 *   them): the field nodes are found by following the error's path through the document as
 *   graphql-js collects fields (@skip/@include, fragments, aliases), so `locations` list the same
 *   nodes in the same order; a thrown non-Error becomes an Error as the replaced executor makes it.
 *   graphql-jit lists the errors of nullable positions before those of non-null positions; they
 *   are merged back in document order. All this runs only when there are errors.
 * - A document graphql-jit cannot compile (it refuses, for example, a JSON scalar literal holding
 *   variables) runs on the replaced executor.
 * - Subscriptions: each event is executed by the compiled operation with the event as root value
 *   (graphql-js's MapSourceToResponseEvent), its errors made graphql-js's as above. The event
 *   stream is created as the replaced executor creates it (`subscribeCompiled`); whatever is not
 *   the ordinary case (variables refused, a root selection that is not one plain field, an abort
 *   signal) runs on the replaced executor from the start. graphql-jit's own `subscribe` is not
 *   used: it hands the subscribe resolver all the variables as its arguments.
 * - Mutations of more than one root field stay on the replaced executor (after a non-null one
 *   fails, graphql-js runs none of those after it; graphql-jit runs them).
 * - Results keep the ordinary JSON serialisation (no compiled stringify), so error shaping and
 *   masking see the same result objects.
 * The plugin goes first in the pipeline, so the plugins after it (spans, metrics) wrap it.
 *
 * One difference is left, and accepted (GRAPHQL_JIT is on by default): when a non-null field of a
 * query (or of a subscription's event) throws synchronously, graphql-js stops executing that selection set (the fields after it
 * never run); graphql-jit runs them and, if they fail too, lists their errors after graphql-js's.
 * The data and graphql-js's errors are the same, and both are what the GraphQL specification
 * allows (a query's fields may run in any order, in parallel). Nothing after the fact tells a
 * synchronous failure from an asynchronous one (after which graphql-js does run the later
 * fields), so it cannot be undone. Mutations, where running a later field would be a side
 * effect, are not concerned (see above). test/graphql/compiled-execution.test.ts pins it.
 *
 * Two more were found later (branch turn6). graphql-jit collects a selection set's own fields
 * before those of its fragments, so where a fragment comes before a field the members of `data`
 * would be in another order than the document's, which the GraphQL specification fixes: such a
 * document (`fieldAfterFragment`) runs on the replaced executor. And when an asynchronous non-null
 * field's error bubbles up next to an asynchronous nullable field's error, graphql-js lists them
 * in the order they settled, graphql-jit (merged as above) in document order; the specification
 * does not order errors, and this one is pinned by the same test, not corrected. The REST routes'
 * documents have neither shape.
 */
/**
 * Whether a selection set of `document` (its operations' or its fragments', at any depth) has a
 * field after a fragment spread or an inline fragment: graphql-jit would list that field's member
 * before the fragment's, where graphql-js (and the specification) keep the document's order.
 */
export function fieldAfterFragment(document: DocumentNode): boolean {
  const visit = (set: SelectionSetNode | undefined): boolean => {
    if (!set) return false;
    let fragmentSeen = false;
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        if (fragmentSeen || visit(selection.selectionSet)) return true;
      } else {
        fragmentSeen = true;
        if (selection.kind === Kind.INLINE_FRAGMENT && visit(selection.selectionSet)) return true;
      }
    }
    return false;
  };
  return document.definitions.some(
    (definition) =>
      (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) &&
      visit(definition.selectionSet),
  );
}

export function useCompiledExecution(logger: Logger): Plugin<Context> {
  // null: graphql-jit refused this operation; use the replaced executor.
  const compiled = new WeakMap<DocumentNode, Map<string, CompiledQuery | null>>();
  const compiledFor = (
    schema: GraphQLSchema,
    document: DocumentNode,
    operationName: string | null | undefined,
  ): CompiledQuery | null => {
    let byName = compiled.get(document);
    if (!byName) {
      byName = new Map();
      compiled.set(document, byName);
    }
    const key = operationName ?? '';
    let entry = byName.get(key);
    if (entry === undefined) {
      const result = fieldAfterFragment(document)
        ? null
        : compileQuery(schema, document, operationName ?? undefined, { customJSONSerializer: false });
      if (result === null) entry = null;
      else if (isCompiledQuery(result)) entry = result;
      else {
        entry = null;
        logger.debug(
          { operationName, errors: (result as ExecutionResult).errors?.map((e) => e.message) },
          'graphql-jit cannot compile this operation; it runs on graphql-js',
        );
      }
      byName.set(key, entry);
    }
    return entry;
  };
  return {
    onSubscribe({ args, subscribeFn, setSubscribeFn }) {
      const operation = getOperationAST(args.document, args.operationName ?? undefined);
      if (operation?.operation !== 'subscription') return;
      const field = plainRootField(operation.selectionSet);
      if (!field || (args as { signal?: unknown }).signal) return;
      const query = compiledFor(args.schema, args.document, args.operationName);
      if (!query) return;
      const replaced = subscribeFn;
      setSubscribeFn((subArgs) => subscribeCompiled(query, replaced, subArgs, operation, field));
    },
    onExecute({ args, executeFn, setExecuteFn }) {
      const operation = getOperationAST(args.document, args.operationName ?? undefined);
      if (!operation || operation.operation === 'subscription') return;
      // After a non-null mutation field fails, graphql-js runs none of the mutation fields after
      // it; graphql-jit runs them all. A mutation of one root field has none after it.
      if (operation.operation === 'mutation' && !isOneField(operation.selectionSet)) return;
      const query = compiledFor(args.schema, args.document, args.operationName);
      if (!query) return;
      const replaced = executeFn;
      setExecuteFn((execArgs) => {
        const result = query.query(execArgs.rootValue, execArgs.contextValue, execArgs.variableValues);
        return isPromiseLike(result)
          ? result.then((settled) => finishCompiled(settled, replaced, execArgs, operation))
          : finishCompiled(result, replaced, execArgs, operation);
      });
    },
  };
}

/**
 * graphql-jit's result as graphql-js would give it. A function of the module, not a constant made
 * per operation: tsx (esbuild's kept names) names such a constant with Object.defineProperty each time.
 */
function finishCompiled(
  result: ExecutionResult,
  replaced: (args: ExecutionArgs) => unknown,
  execArgs: ExecutionArgs,
  operation: OperationDefinitionNode,
): unknown {
  // graphql-jit answers without `data` only when it refused the variables, before any resolver ran.
  if (!('data' in result)) return replaced(execArgs);
  if (!result.errors?.length) return result;
  // The members in the order the replaced executor gives them.
  return { errors: asGraphQLJsErrors(result.errors, execArgs, operation), data: result.data };
}

/** The root field of a selection set of one field without directives, else undefined. */
function plainRootField(selectionSet: SelectionSetNode): FieldNode | undefined {
  const only = selectionSet.selections.length === 1 ? selectionSet.selections[0] : undefined;
  return only?.kind === Kind.FIELD && !only.directives?.length ? only : undefined;
}

/**
 * The replaced executor's `subscribe` (@graphql-tools/executor's, graphql-js's algorithm) with each
 * event executed by the compiled operation. The source stream is created as there: the variables
 * coerced (if they are refused, the replaced executor answers, before any resolver ran), the
 * field's arguments read, its `subscribe` resolver called, a failure located at the field.
 */
async function subscribeCompiled(
  query: CompiledQuery,
  replaced: (args: ExecutionArgs) => unknown,
  args: ExecutionArgs,
  operation: OperationDefinitionNode,
  node: FieldNode,
): Promise<unknown> {
  const { schema } = args;
  const rootType = schema.getSubscriptionType();
  const fieldDef = rootType?.getFields()[node.name.value];
  const variables = getVariableValues(
    schema,
    operation.variableDefinitions ?? [],
    (args.variableValues ?? {}) as Record<string, unknown>,
  );
  if (!rootType || !fieldDef?.subscribe || !variables.coerced) return replaced(args);
  const subscribe = fieldDef.subscribe;
  const responseName = node.alias?.value ?? node.name.value;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  for (const definition of args.document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  }
  const info: GraphQLResolveInfo = {
    fieldName: fieldDef.name,
    fieldNodes: [node],
    returnType: fieldDef.type,
    parentType: rootType,
    path: { prev: undefined, key: responseName, typename: rootType.name },
    schema,
    fragments,
    rootValue: args.rootValue,
    operation,
    variableValues: variables.coerced,
  };
  let stream: unknown;
  try {
    const fieldArgs = getArgumentValues(fieldDef, node, variables.coerced);
    stream = await subscribe(args.rootValue, fieldArgs, args.contextValue, info);
    if (stream instanceof Error) throw stream;
    if (!isAsyncIterable(stream)) {
      throw new GraphQLError(`Subscription field must return Async Iterable. Received: ${inspect(stream, [])}.`);
    }
  } catch (error) {
    return { errors: [locatedError(error, [node], [responseName])] };
  }
  const variableValues = args.variableValues as Record<string, unknown> | undefined;
  return mapEvents(stream, operation, (payload) => {
    const result = query.query(payload, args.contextValue, variableValues);
    return isPromiseLike(result)
      ? result.then((settled) => finishEvent(settled, args, payload, operation))
      : finishEvent(result, args, payload, operation);
  });
}

/**
 * One event's result as the replaced executor gives it (`finishCompiled` with the event as root
 * value; should graphql-jit refuse the variables graphql-js accepted, graphql-js executes the event).
 */
function finishEvent(
  result: ExecutionResult,
  args: ExecutionArgs,
  payload: unknown,
  operation: OperationDefinitionNode,
): unknown {
  if ('data' in result && !result.errors?.length) return result;
  return finishCompiled(result, graphqlJsExecute, { ...args, rootValue: payload }, operation);
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof (value as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === 'function';
}

/**
 * A value as the replaced executor prints it in that message (cross-inspect 1.0's `inspect`, which
 * @graphql-tools/utils uses; a port, since neither is a dependency of ours). Including its quirk:
 * an Error is printed as a GraphQLError (it renames the error).
 */
function inspect(value: unknown, seen: readonly unknown[]): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return value.name ? `[function ${value.name}]` : '[function]';
  if (typeof value !== 'object') return String(value);
  if (value === null) return 'null';
  if (value instanceof Error) {
    const aggregate = value.name === 'AggregateError';
    value.name = 'GraphQLError';
    const text = value.toString();
    return aggregate ? `${text}\n${inspectArray((value as AggregateError).errors, seen)}` : text;
  }
  if (seen.includes(value)) return '[Circular]';
  const within = [...seen, value];
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const json = toJSON.call(value);
    if (json !== value) return typeof json === 'string' ? json : inspect(json, within);
  } else if (Array.isArray(value)) {
    return inspectArray(value, within);
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return '{}';
  if (within.length > 3) {
    const tag = Object.prototype.toString
      .call(value)
      .replace(/^\[object /, '')
      .replace(/]$/, '');
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    return `[${tag === 'Object' && typeof name === 'string' && name !== '' ? name : tag}]`;
  }
  return `{ ${entries.map(([key, v]) => `${key}: ${inspect(v, within)}`).join(', ')} }`;
}

function inspectArray(array: readonly unknown[], seen: readonly unknown[]): string {
  if (array.length === 0) return '[]';
  if (seen.length > 3) return '[Array]';
  return `[${array.map((item) => inspect(item, seen)).join(', ')}]`;
}

/**
 * The events mapped to their results, as the replaced executor's stream gives them: a failure of
 * the source becomes a GraphQLError at the operation, `return` closes the source at once (even
 * while a `next` waits), nothing is read after the end or a failure.
 */
function mapEvents(
  source: AsyncIterable<unknown>,
  operation: OperationDefinitionNode,
  onEvent: (payload: unknown) => unknown,
): AsyncIterableIterator<unknown> {
  const iterator = source[Symbol.asyncIterator]();
  let done = false;
  const finished = { value: undefined, done: true } as const;
  return {
    async next() {
      if (done) return finished;
      let next: IteratorResult<unknown>;
      try {
        next = await iterator.next();
      } catch (error) {
        done = true;
        throw atOperation(error, operation);
      }
      if (next.done) {
        done = true;
        return finished;
      }
      try {
        return { value: await onEvent(next.value), done: false };
      } catch (error) {
        done = true;
        await iterator.return?.().catch(() => {});
        throw error;
      }
    },
    async return() {
      done = true;
      await iterator.return?.();
      return finished;
    },
    async throw(error: unknown) {
      done = true;
      await iterator.throw?.(error);
      throw error;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** A failure of the event stream as the replaced executor reports it (its `wrapError`). */
function atOperation(error: unknown, operation: OperationDefinitionNode): unknown {
  if (error instanceof AggregateError) {
    return new AggregateError(
      error.errors.map((e) => atOperation(e, operation)),
      error.message,
    );
  }
  const original = error as Error;
  return new GraphQLError(original.message, { originalError: original, nodes: [operation] });
}

function isOneField(selectionSet: SelectionSetNode): boolean {
  return selectionSet.selections.length === 1 && selectionSet.selections[0]?.kind === Kind.FIELD;
}

function isPromiseLike<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown })?.then === 'function';
}

/** Where one error's path leads: its field nodes, its place in document order, whether the position is non-null. */
interface ErrorPosition {
  nodes: readonly FieldNode[] | undefined;
  order: number[];
  nonNull: boolean;
}

interface Candidate extends ErrorPosition {
  nodes: readonly FieldNode[];
  /** The nodes without @skip/@include applied: what graphql-jit lists in `locations`. */
  allNodes: readonly FieldNode[];
}

/**
 * graphql-jit's errors as graphql-js gives them: the same field nodes (so `locations`), the same
 * original error and message, in graphql-js's order.
 */
export function asGraphQLJsErrors(
  errors: readonly GraphQLError[],
  args: ExecutionArgs,
  operation: OperationDefinitionNode,
): GraphQLError[] {
  const walker = new PathWalker(args, operation);
  const located = errors.map((error) => {
    const position = walker.position(error);
    return { error: asGraphQLJsError(error, position.nodes), position };
  });
  // graphql-jit returns the errors of nullable positions, then those of non-null positions, each
  // list in execution order. Merge them back in document order.
  const nullable = located.filter((e) => !e.position.nonNull);
  const nonNull = located.filter((e) => e.position.nonNull);
  if (nullable.length === 0 || nonNull.length === 0) return located.map((e) => e.error);
  const merged: GraphQLError[] = [];
  let next = 0;
  for (const e of nullable) {
    for (let n = nonNull[next]; n && compareOrder(n.position.order, e.position.order) < 0; n = nonNull[++next]) {
      merged.push(n.error);
    }
    merged.push(e.error);
  }
  for (const n of nonNull.slice(next)) merged.push(n.error);
  return merged;
}

function compareOrder(a: readonly number[], b: readonly number[]): number {
  for (let k = 0; k < Math.min(a.length, b.length); k++) {
    const d = (a[k] ?? 0) - (b[k] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

function asGraphQLJsError(error: GraphQLError, nodes: readonly FieldNode[] | undefined): GraphQLError {
  // graphql-jit keeps what the resolver threw (or returned) as originalError; the replaced executor
  // locates that same value. The errors graphql-jit raises itself carry none: a null in a non-null
  // position (graphql-js raises a plain Error) or a value the scalar refused to serialise (the
  // scalar's GraphQLError, of which graphql-jit keeps the message).
  const original: Error =
    error.originalError !== undefined
      ? asError(error.originalError)
      : error.message.startsWith('Cannot return null for non-nullable field')
        ? new Error(error.message)
        : new GraphQLError(error.message);
  return locatedError(original, nodes, error.path);
}

/** A thrown value as an Error, as @graphql-tools/executor's `coerceError` makes it (it is not exported). */
function asError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  if (typeof thrown === 'object' && thrown !== null && typeof (thrown as { message?: unknown }).message === 'string') {
    const like = thrown as { message: string; cause?: unknown; stack?: unknown; name?: unknown };
    const error = new Error(like.message, 'cause' in like ? { cause: like.cause } : undefined);
    if (typeof like.stack === 'string') error.stack = like.stack;
    if (typeof like.name === 'string') error.name = like.name;
    return error;
  }
  return new Error(String(thrown));
}

/**
 * Follows a response path through the operation as graphql-js collects fields. Where a field's
 * type is abstract, the runtime type is the possible type whose field nodes are those graphql-jit
 * located (it compiles each possible type's selection and lists every node of it, whatever the
 * @skip/@include variables say).
 */
class PathWalker {
  private readonly schema: GraphQLSchema;
  private readonly fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  private readonly variables: Record<string, unknown>;
  private readonly root: GraphQLObjectType | null | undefined;

  constructor(
    args: ExecutionArgs,
    private readonly operation: OperationDefinitionNode,
  ) {
    this.schema = args.schema;
    for (const definition of args.document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments[definition.name.value] = definition;
    }
    // graphql-jit accepted the variables; graphql-js's coercion gives the values @skip/@include read.
    const coerced = getVariableValues(
      args.schema,
      operation.variableDefinitions ?? [],
      (args.variableValues ?? {}) as Record<string, unknown>,
    );
    this.variables = coerced.coerced ?? {};
    this.root = args.schema.getRootType(operation.operation);
  }

  position(error: GraphQLError): ErrorPosition {
    const path = error.path ?? [];
    const unknown: ErrorPosition = { nodes: undefined, order: [], nonNull: false };
    if (!this.root || path.length === 0) return unknown;
    const found = this.walk(this.root, [this.operation.selectionSet], [this.operation.selectionSet], path, 0, []);
    const located = new Set((error.locations ?? []).map((l) => `${l.line}:${l.column}`));
    const isLocated = (c: Candidate) =>
      c.allNodes.length === located.size &&
      c.allNodes.every((n) => n.loc && located.has(`${n.loc.startToken.line}:${n.loc.startToken.column}`));
    return found.find(isLocated) ?? found[0] ?? unknown;
  }

  /**
   * Every reading of `path[index..]` below `type`: `sets` are the selection sets graphql-js
   * merges (with @skip/@include applied), `allSets` the same without them.
   */
  private walk(
    type: GraphQLObjectType,
    sets: readonly SelectionSetNode[],
    allSets: readonly SelectionSetNode[],
    path: readonly (string | number)[],
    index: number,
    order: readonly number[],
  ): Candidate[] {
    const key = path[index];
    if (typeof key !== 'string') return [];
    const fields = this.collect(type, sets, true);
    const nodes = fields.get(key);
    const first = nodes?.[0];
    if (!nodes || !first) return [];
    const allNodes = this.collect(type, allSets, false).get(key) ?? nodes;
    const definition = type.getFields()[first.name.value];
    if (!definition) return [];
    const keyOrder = [...order, [...fields.keys()].indexOf(key)];
    // Past the list indices, to the next field name (or the end).
    let fieldType: GraphQLOutputType = definition.type;
    let next = index + 1;
    for (let item = path[next]; typeof item === 'number'; item = path[++next]) {
      keyOrder.push(item);
      const list = getNullableType(fieldType);
      if (!isListType(list)) return [];
      fieldType = list.ofType;
    }
    if (next === path.length) return [{ nodes, allNodes, order: keyOrder, nonNull: isNonNullType(fieldType) }];
    const named = getNamedType(fieldType);
    const runtimeTypes = isAbstractType(named)
      ? this.schema.getPossibleTypes(named)
      : isObjectType(named)
        ? [named]
        : [];
    const subSets = selectionSetsOf(nodes);
    const allSubSets = selectionSetsOf(allNodes);
    return runtimeTypes.flatMap((runtime) => this.walk(runtime, subSets, allSubSets, path, next, keyOrder));
  }

  /** graphql-js's collectFields (as @graphql-tools/executor runs it) over the merged selection sets. */
  private collect(
    runtimeType: GraphQLObjectType,
    sets: readonly SelectionSetNode[],
    applyDirectives: boolean,
  ): Map<string, FieldNode[]> {
    const fields = new Map<string, FieldNode[]>();
    const visited = new Set<string>();
    const included = (node: Parameters<typeof getDirectiveValues>[1]) => {
      if (!applyDirectives) return true;
      if (getDirectiveValues(GraphQLSkipDirective, node, this.variables)?.if === true) return false;
      return getDirectiveValues(GraphQLIncludeDirective, node, this.variables)?.if !== false;
    };
    const applies = (condition: FragmentDefinitionNode['typeCondition'] | undefined) => {
      if (!condition) return true;
      const conditional = typeFromAST(this.schema, condition);
      if (conditional === runtimeType) return true;
      return (
        conditional !== undefined && isAbstractType(conditional) && this.schema.isSubType(conditional, runtimeType)
      );
    };
    const visit = (set: SelectionSetNode) => {
      for (const selection of set.selections) {
        if (!included(selection)) continue;
        if (selection.kind === Kind.FIELD) {
          const name = selection.alias?.value ?? selection.name.value;
          const list = fields.get(name);
          if (list) list.push(selection);
          else fields.set(name, [selection]);
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          if (applies(selection.typeCondition)) visit(selection.selectionSet);
        } else {
          const name = selection.name.value;
          if (visited.has(name)) continue;
          const fragment = this.fragments[name];
          if (!fragment || !applies(fragment.typeCondition)) continue;
          visited.add(name);
          visit(fragment.selectionSet);
        }
      }
    };
    for (const set of sets) visit(set);
    return fields;
  }
}

function selectionSetsOf(nodes: readonly FieldNode[]): SelectionSetNode[] {
  const sets: SelectionSetNode[] = [];
  for (const node of nodes) if (node.selectionSet) sets.push(node.selectionSet);
  return sets;
}
