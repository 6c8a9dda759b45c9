import type { FieldCondition, FilterPath, FilterScalar, MetadataFilter } from './parse';

/**
 * The reference evaluator: DECISIONS.md §7 written out as plainly as possible, so that the SQL
 * compiler can be checked against it (test/kb/filter-conformance.test.ts, filter-random.test.ts).
 * Retrieval filters in the database; this runs in memory, for tests and for small lists.
 */
export function matchesMetadataFilter(filter: MetadataFilter, metadata: unknown): boolean {
  switch (filter.kind) {
    case 'and':
      return filter.filters.every((f) => matchesMetadataFilter(f, metadata));
    case 'or':
      return filter.filters.some((f) => matchesMetadataFilter(f, metadata));
    default:
      return matchesCondition(filter, metadata);
  }
}

function matchesCondition(condition: FieldCondition, metadata: unknown): boolean {
  const found = valuesAt(metadata, condition.path);
  switch (condition.kind) {
    case 'eq':
      return equalsSome(found, condition.value);
    case 'ne':
      return !equalsSome(found, condition.value);
    case 'in':
      return condition.values.some((x) => equalsSome(found, x));
    case 'nin':
      return !condition.values.some((x) => equalsSome(found, x));
    case 'all':
      return condition.values.length > 0 && condition.values.every((x) => equalsSome(found, x));
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const operand = condition.value;
      const holds = {
        gt: (c: number) => c > 0,
        gte: (c: number) => c >= 0,
        lt: (c: number) => c < 0,
        lte: (c: number) => c <= 0,
      }[condition.kind];
      return elementsOf(found).some((e) => {
        if (typeof operand === 'number') return typeof e === 'number' && holds(compareNumbers(e, operand));
        return typeof e === 'string' && holds(compareCodePoints(e, operand));
      });
    }
  }
}

/**
 * The values a path reaches: none when the key is missing, one for a plain path, any number
 * through `[]` (the member after `[]` of each item that is an object and has it).
 */
function valuesAt(metadata: unknown, path: FilterPath): unknown[] {
  let current: unknown[] = [metadata];
  for (const step of path.steps) {
    if (step.kind === 'each') {
      current = current.flatMap((v) => (Array.isArray(v) ? v : []));
    } else {
      // Own members only: a path "constructor" must not find Object.prototype.constructor.
      current = current.flatMap((v) => (isObject(v) && Object.hasOwn(v, step.name) ? [v[step.name]] : []));
    }
  }
  return current;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The elements of the values: the items of an array, or the value itself. */
function elementsOf(values: unknown[]): unknown[] {
  return values.flatMap((v) => (Array.isArray(v) ? v : [v]));
}

/** `$eq`: some element equals x; null also matches a missing key. */
function equalsSome(found: unknown[], x: FilterScalar): boolean {
  if (x === null && found.length === 0) return true;
  // Same JSON type and same value: 1 equals 1.0 (one JS number), true never equals 1, "1" never 1.
  return elementsOf(found).some((e) => e === x);
}

function compareNumbers(a: number, b: number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Orders strings by Unicode code point, as SQLite (binary UTF-8) and PostgreSQL (COLLATE "C")
 * do. JS `<` compares UTF-16 code units, which puts U+1F600 (surrogates D83D DE00) before U+FF5A.
 */
export function compareCodePoints(a: string, b: string): number {
  const left = Array.from(a, (c) => c.codePointAt(0)!);
  const right = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] !== right[i]) return left[i]! < right[i]! ? -1 : 1;
  }
  return left.length - right.length;
}
