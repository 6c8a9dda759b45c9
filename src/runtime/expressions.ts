import jsonata from 'jsonata';

/**
 * Expressions and templates of agent programs.
 *
 * Expressions (conditions, assignments, API response mappings) are JSONata: a maintained, side-
 * effect-free query language with no access to JavaScript globals, evaluated with the user's
 * variables as its input document, so `count + 1` or `plan = "pro" and age >= 18` read variables
 * by name. Nothing is ever passed to `eval` or `Function`. Each evaluation is bounded in time,
 * depth and sequence size.
 *
 * Templates (messages, API URLs, headers and bodies) replace `{name}` or `{name.member}` with the
 * variable's value; other braces are left as they are.
 */

export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly position?: number,
  ) {
    super(message);
    this.name = 'ExpressionError';
  }
}

export interface ExpressionLimits {
  /** Milliseconds one evaluation may take. */
  timeoutMs: number;
  /** Deepest evaluation stack (recursion). */
  maxDepth: number;
  /** Longest sequence an evaluation may build. */
  maxSequence: number;
}

export const defaultExpressionLimits: ExpressionLimits = { timeoutMs: 250, maxDepth: 200, maxSequence: 100_000 };

interface AstNode {
  type: string;
  value?: unknown;
  steps?: AstNode[];
  stages?: AstNode[];
  predicate?: AstNode[];
  [key: string]: unknown;
}

/** Compiles `source`, throwing an ExpressionError with the position of a syntax error. */
function compile(source: string, limits: ExpressionLimits): jsonata.Expression {
  try {
    return jsonata(source, { timeout: limits.timeoutMs, stack: limits.maxDepth, sequence: limits.maxSequence });
  } catch (err) {
    const e = err as { message?: string; position?: number };
    throw new ExpressionError(`Invalid expression: ${e.message ?? String(err)}`, e.position);
  }
}

/** Checks an expression's syntax; returns the problem, or null. */
export function checkExpression(source: string): string | null {
  try {
    compile(source, defaultExpressionLimits);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The variables an expression reads: the first name of every path evaluated against the input
 * document. Names inside filters (`orders[status = "open"]`) are relative to the filtered items
 * and are not variables.
 */
export function expressionVariables(source: string): string[] {
  const found = new Set<string>();
  const visit = (node: unknown, inPathTail: boolean): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item, inPathTail);
      return;
    }
    if (!node || typeof node !== 'object') return;
    const n = node as AstNode;
    if (n.type === 'path' && Array.isArray(n.steps)) {
      n.steps.forEach((step, i) => {
        visit(step, i > 0);
      });
      return;
    }
    if (n.type === 'name') {
      if (!inPathTail && typeof n.value === 'string') found.add(n.value);
      // Filters and predicates are evaluated against the items, not the variables.
      return;
    }
    for (const [key, value] of Object.entries(n)) {
      if (key === 'stages' || key === 'predicate' || key === 'position' || key === 'value') continue;
      visit(value, false);
    }
  };
  visit(compile(source, defaultExpressionLimits).ast(), false);
  return [...found];
}

/** Makes a value safe to store: JSON only (functions, undefined and cycles are dropped). */
export function toJsonValue(value: unknown): unknown {
  if (value === undefined) return null;
  try {
    const text = JSON.stringify(value, (_key, v) => (typeof v === 'function' ? undefined : v));
    return text === undefined ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

export interface ExpressionEvaluator {
  /**
   * Evaluates `source` against `input` (the variables, or an API response) with `$name` bindings;
   * throws ExpressionError on a syntax or run-time error.
   */
  evaluate(source: string, input: unknown, bindings?: Record<string, unknown>): Promise<unknown>;
}

/** An evaluator that caches compiled expressions (they are immutable and reusable). */
export function createExpressionEvaluator(limits: ExpressionLimits = defaultExpressionLimits): ExpressionEvaluator {
  const cache = new Map<string, jsonata.Expression>();
  return {
    async evaluate(source, input, bindings) {
      let compiled = cache.get(source);
      if (!compiled) {
        compiled = compile(source, limits);
        if (cache.size > 5000) cache.clear();
        cache.set(source, compiled);
      }
      try {
        // JSONata sequences are arrays with extra members; normalise to plain JSON.
        return toJsonValue(await compiled.evaluate(input, bindings));
      } catch (err) {
        const e = err as { message?: string; position?: number };
        throw new ExpressionError(e.message ?? String(err), e.position);
      }
    },
  };
}

/** `{name}` or `{name.member.member}`; the first name is the variable. */
const placeholderPattern = /\{([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\}/g;

/** The variables a template refers to. */
export function templateVariables(template: string): string[] {
  return [...new Set([...template.matchAll(placeholderPattern)].map((m) => m[1]!))];
}

/** How a variable's value reads inside text. */
export function formatValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

function lookup(variables: Record<string, unknown>, name: string, members: string): unknown {
  let value: unknown = variables[name];
  for (const member of members.split('.').filter(Boolean)) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[member];
  }
  return value;
}

/**
 * Replaces every placeholder with its variable's value. `encode` transforms each inserted value
 * (URL encoding in API steps); it receives the placeholder's offset so a caller can treat a
 * placeholder at the very start differently.
 */
export function interpolate(
  template: string,
  variables: Record<string, unknown>,
  encode?: (text: string, offset: number) => string,
): string {
  return template.replace(placeholderPattern, (_match, name: string, members: string, offset: number) => {
    const text = formatValue(lookup(variables, name, members));
    return encode ? encode(text, offset) : text;
  });
}

/** Interpolates every string inside a JSON value (API bodies, custom action payloads). */
export function interpolateJson(value: unknown, variables: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    // A string that is exactly one placeholder keeps the variable's type (a number stays a number).
    const whole = /^\{([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\}$/.exec(value);
    if (whole) return toJsonValue(lookup(variables, whole[1]!, whole[2] ?? ''));
    return interpolate(value, variables);
  }
  if (Array.isArray(value)) return value.map((v) => interpolateJson(v, variables));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateJson(v, variables)]));
  }
  return value;
}

/** Template variables of every string inside a JSON value. */
export function jsonTemplateVariables(value: unknown): string[] {
  if (typeof value === 'string') return templateVariables(value);
  if (Array.isArray(value)) return value.flatMap(jsonTemplateVariables);
  if (value && typeof value === 'object') return Object.values(value).flatMap(jsonTemplateVariables);
  return [];
}

/** JSONata's notion of truth, which conditions use: empty strings, 0, null, [] and {} are false. */
export function isTruthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(isTruthy);
  if (value && typeof value === 'object') return Object.keys(value).length > 0;
  return Boolean(value);
}
