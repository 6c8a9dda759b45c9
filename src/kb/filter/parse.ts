import { AppError, type ErrorDetail } from '../../lib/errors';
import { isStorableText } from '../../lib/storable-text';

/**
 * Knowledge-base metadata filters (docs/knowledge-base-filters.md): the validated form that the
 * reference evaluator (evaluate.ts) and the SQL compiler (sql.ts) both take. Everything a user can
 * get wrong is refused here, with a 422 that names the operator or path, so the other two never
 * meet a malformed filter.
 */

/** A value a comparison can be made with. Objects and arrays are never operands. */
export type FilterScalar = string | number | boolean | null;

/**
 * One step of a metadata path: a member of an object, or `[]`, which goes through every item of
 * an array (only items that are objects reach the member after it).
 */
export type PathStep = { kind: 'member'; name: string } | { kind: 'each' };

export interface FilterPath {
  /** As the user wrote it, e.g. `authors[].name`; for messages. */
  text: string;
  /** Never empty; starts and ends with a member; an `each` is always followed by a member. */
  steps: readonly PathStep[];
}

export type EqualityOperator = 'eq' | 'ne';
export type RangeOperator = 'gt' | 'gte' | 'lt' | 'lte';
export type ListOperator = 'in' | 'nin';

export type FieldCondition =
  | { kind: EqualityOperator; path: FilterPath; value: FilterScalar }
  | { kind: RangeOperator; path: FilterPath; value: string | number }
  | { kind: ListOperator; path: FilterPath; values: readonly FilterScalar[] }
  | { kind: 'all'; path: FilterPath; values: readonly (string | number | boolean)[] };

/**
 * A parsed filter. `and` with no filters matches everything (it is what `{}` parses to); `or`
 * always has at least one filter, since `$or: []` is refused.
 */
export type MetadataFilter =
  | { kind: 'and'; filters: readonly MetadataFilter[] }
  | { kind: 'or'; filters: readonly MetadataFilter[] }
  | FieldCondition;

export const filterLimits = {
  /** Filter objects nested through `$and`/`$or`, counting the top-level object as 1. */
  depth: 10,
  /**
   * Field conditions; each listed value of `$in`, `$nin` and `$all` counts as one, and so does an
   * empty filter object, so that `$or: [{}, {}, …]` cannot grow without bound either.
   */
  conditions: 200,
  /** Member names in one path. Keeps the bound parameters of any filter within both engines' limits. */
  pathMembers: 32,
} as const;

const operatorKinds = {
  $eq: 'eq',
  $ne: 'ne',
  $gt: 'gt',
  $gte: 'gte',
  $lt: 'lt',
  $lte: 'lte',
  $in: 'in',
  $nin: 'nin',
  $all: 'all',
} as const satisfies Record<string, FieldCondition['kind']>;

type FieldOperator = keyof typeof operatorKinds;

const segmentPattern = /^[A-Za-z0-9_-]+(\[\])?$/;

export interface ParseOptions {
  /** Where the filter sits in the request, the start of every error path. Default `filters`. */
  at?: string;
}

/**
 * Validates a filter object (MongoDB-style, DECISIONS.md §7) and returns its AST.
 * Throws AppError INVALID_FILTER (422) naming the bad operator or path.
 */
export function parseMetadataFilter(input: unknown, opts: ParseOptions = {}): MetadataFilter {
  const state: ParseState = { conditions: 0 };
  return parseFilterObject(input, opts.at ?? 'filters', 1, state);
}

interface ParseState {
  conditions: number;
}

function fail(path: string, message: string): never {
  const details: ErrorDetail[] = [{ path, message }];
  throw new AppError('INVALID_FILTER', `${path}: ${message}`, { details });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** What a value is, for messages: "null", "an empty array", "a string", … */
function kindOf(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return value.length ? 'an array' : 'an empty array';
  const type = typeof value;
  return type === 'object' ? 'an object' : `a ${type}`;
}

function parseFilterObject(input: unknown, at: string, depth: number, state: ParseState): MetadataFilter {
  if (!isPlainObject(input)) {
    fail(at, `a filter must be an object of metadata paths and operators, not ${kindOf(input)}`);
  }
  if (depth > filterLimits.depth) {
    fail(at, `filters nest deeper than ${filterLimits.depth} levels`);
  }
  const parts: MetadataFilter[] = [];
  const entries = Object.entries(input);
  if (entries.length === 0) countConditions(state, 1, at);
  for (const [key, value] of entries) {
    const here = `${at}.${key}`;
    if (key.startsWith('$')) {
      if (key !== '$and' && key !== '$or') {
        fail(
          here,
          Object.hasOwn(operatorKinds, key)
            ? `operator "${key}" must be applied to a path, e.g. {"path": {"${key}": …}}`
            : `unknown operator "${key}" (only $and and $or may appear beside paths)`,
        );
      }
      if (!Array.isArray(value) || value.length === 0) {
        fail(here, `"${key}" needs a non-empty array of filter objects, not ${kindOf(value)}`);
      }
      const filters = value.map((item, i) => parseFilterObject(item, `${here}.${i}`, depth + 1, state));
      parts.push({ kind: key === '$and' ? 'and' : 'or', filters });
      continue;
    }
    const path = parsePath(key, here);
    parts.push(...parseFieldValue(path, value, here, state));
  }
  return parts.length === 1 ? parts[0]! : { kind: 'and', filters: parts };
}

function parsePath(text: string, at: string): FilterPath {
  const steps: PathStep[] = [];
  const segments = text.split('.');
  if (segments.length > filterLimits.pathMembers) {
    fail(at, `invalid path: more than ${filterLimits.pathMembers} member names`);
  }
  for (const [i, segment] of segments.entries()) {
    const match = segmentPattern.exec(segment);
    if (!match) {
      fail(
        at,
        `invalid path "${text}": use member names of letters, digits, "_" and "-" separated by dots, with name[] to go through an array of objects`,
      );
    }
    const each = match[1] !== undefined;
    steps.push({ kind: 'member', name: each ? segment.slice(0, -2) : segment });
    if (each) {
      if (i === segments.length - 1) {
        fail(
          at,
          `invalid path "${text}": "[]" must be followed by a member (e.g. ${segment}.name); to match the items of an array, filter on "${segment.slice(0, -2)}" itself`,
        );
      }
      steps.push({ kind: 'each' });
    }
  }
  return { text, steps };
}

/** A field's value: a scalar (implicit `$eq`) or an object of operators, ANDed. */
function parseFieldValue(path: FilterPath, value: unknown, at: string, state: ParseState): FieldCondition[] {
  if (Array.isArray(value)) {
    fail(at, `an array cannot be matched as a whole; use {"$in": […]} for any of its values or {"$all": […]} for all`);
  }
  if (!isPlainObject(value)) {
    return [{ kind: 'eq', path, value: scalarOperand('the value', value, at, state, true) }];
  }
  const keys = Object.keys(value);
  if (keys.length === 0) {
    fail(at, 'empty operator object: give at least one operator, e.g. {"$eq": …}');
  }
  const member = keys.find((k) => !k.startsWith('$'));
  if (member !== undefined) {
    fail(
      at,
      keys.some((k) => k.startsWith('$'))
        ? `"${member}" is not an operator: an operator object holds only $-operators`
        : `"${member}" is not an operator: objects are not compared as values; address nested members with dot notation ("${path.text}.${member}")`,
    );
  }
  return keys.map((key) => parseOperator(path, key, value[key], at, state));
}

/** `at` is the field's error path; messages name the operator (and the list item) themselves. */
function parseOperator(path: FilterPath, key: string, operand: unknown, at: string, state: ParseState): FieldCondition {
  if (key === '$and' || key === '$or') {
    fail(at, `"${key}" is not allowed inside a field's operator object; use it beside paths, around whole filters`);
  }
  if (!Object.hasOwn(operatorKinds, key)) fail(at, `unknown operator "${key}"`);
  const operator = key as FieldOperator;
  const kind = operatorKinds[operator];
  switch (kind) {
    case 'eq':
    case 'ne':
      return { kind, path, value: scalarOperand(`"${operator}"`, operand, at, state, true) };
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (typeof operand !== 'number' && typeof operand !== 'string') {
        fail(at, `"${operator}" needs a number or a string, not ${kindOf(operand)}`);
      }
      return { kind, path, value: scalarOperand(`"${operator}"`, operand, at, state, false) as string | number };
    }
    case 'in':
    case 'nin':
    case 'all': {
      if (!Array.isArray(operand)) fail(at, `"${operator}" needs an array of values, not ${kindOf(operand)}`);
      // An empty list is still one condition: it decides the result on its own.
      if (operand.length === 0) countConditions(state, 1, at);
      const values = operand.map((item, i) =>
        scalarOperand(`"${operator}" item ${i}`, item, at, state, kind !== 'all'),
      );
      return kind === 'all' ? { kind, path, values: values as (string | number | boolean)[] } : { kind, path, values };
    }
  }
}

function countConditions(state: ParseState, n: number, at: string): void {
  state.conditions += n;
  if (state.conditions > filterLimits.conditions) {
    fail(
      at,
      `the filter has more than ${filterLimits.conditions} conditions (each value listed in $in, $nin or $all counts as one)`,
    );
  }
}

/** `what` names the operand in messages: `"$eq"`, `"$in" item 2`. */
function scalarOperand(what: string, value: unknown, at: string, state: ParseState, allowNull: boolean): FilterScalar {
  countConditions(state, 1, at);
  if (value === null) {
    if (allowNull) return null;
    fail(at, `${what} cannot be null`);
  }
  switch (typeof value) {
    case 'string':
      // PostgreSQL cannot store such text in jsonb, so no metadata holds it.
      if (!isStorableText(value)) {
        fail(at, `${what} holds U+0000 or an unpaired surrogate, which no stored metadata can hold`);
      }
      return value;
    case 'number':
      if (!Number.isFinite(value)) fail(at, `${what} must be a finite number`);
      return value;
    case 'boolean':
      return value;
    default:
      fail(
        at,
        `${what} must be a ${allowNull ? 'string, number, boolean or null' : 'string, number or boolean'}, not ${kindOf(value)}`,
      );
  }
}
