import type { DocumentNode, ExecutionResult, GraphQLSchema } from 'graphql';
import { getOperationAST } from 'graphql';
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
 * - A document graphql-jit cannot compile (it refuses, for example, a JSON scalar literal holding
 *   variables) runs on graphql-js as before: the answer never depends on the setting.
 * - Subscriptions stay on graphql-js.
 * - Results keep the ordinary JSON serialisation (no compiled stringify), so error shaping and
 *   masking see the same result objects.
 * The plugin goes first in the pipeline, so the plugins after it (spans, metrics) wrap it.
 */
export function useCompiledExecution(logger: Logger): Plugin<Context> {
  // null: graphql-jit refused this operation; use graphql-js.
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
      const result = compileQuery(schema, document, operationName ?? undefined, { customJSONSerializer: false });
      if (isCompiledQuery(result)) entry = result;
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
    onExecute({ args, setExecuteFn }) {
      const operation = getOperationAST(args.document, args.operationName ?? undefined);
      if (!operation || operation.operation === 'subscription') return;
      const query = compiledFor(args.schema, args.document, args.operationName);
      if (!query) return;
      setExecuteFn((execArgs) => query.query(execArgs.rootValue, execArgs.contextValue, execArgs.variableValues));
    },
  };
}
