import { Prisma } from '../../generated/sqlite/client';
import type { FilterPath, FilterScalar, MetadataFilter, RangeOperator } from './parse';

/**
 * Compiles a parsed filter into one boolean SQL expression over a JSON metadata column, with the
 * semantics of the reference evaluator (evaluate.ts, DECISIONS.md §7) on SQLite and PostgreSQL.
 *
 * - Every user value and every path member is a bound parameter; the only raw SQL is this
 *   module's own text and the caller's column.
 * - The expression is two-valued (never NULL): each condition is an EXISTS, a NOT of one, or an
 *   IS [NOT] NULL test, so `$ne` and `$nin` can be written as NOT of `$eq` and `$in`.
 * - Element tests check the JSON type first, so `"9"` never meets 9 and `true` never meets 1,
 *   which SQLite would otherwise allow (`'9' > 5`, booleans read as 1/0).
 * - A dot never steps into an array and a member name never indexes one (`a.0` is the member
 *   "0"): SQLite paths quote every label, PostgreSQL walks with `-> text`, which is NULL on an
 *   array, never `#>`, whose numeric path elements index arrays.
 *
 * Correlation names start with `kbf_` so they do not shadow the caller's table alias.
 */
export function compileMetadataFilter(
  filter: MetadataFilter,
  dialect: 'sqlite' | 'postgresql',
  column: Prisma.Sql,
): Prisma.Sql {
  const target = dialect === 'sqlite' ? sqliteDialect(column) : postgresDialect(column);
  return compile(filter, target);
}

const TRUE = Prisma.raw('TRUE');
const FALSE = Prisma.raw('FALSE');

/** What differs between the engines: how to reach the elements at a path, and how to test one. */
interface Dialect {
  /** Some element of the values at `path` passes `test` (written with `element*` below). */
  someElement(path: FilterPath, test: Prisma.Sql): Prisma.Sql;
  /** The path reaches at least one value (the key is not missing). */
  present(path: FilterPath): Prisma.Sql;
  /** The element is one of `values` (same JSON type, numbers numerically); none of them null. */
  elementIn(values: readonly (string | number | boolean)[]): Prisma.Sql;
  elementIsNull: Prisma.Sql;
  elementCompares(operator: RangeOperator, value: string | number): Prisma.Sql;
  /** A cheap condition implied by "some element equals one of values" (may be TRUE). */
  equalityHint(path: FilterPath, values: readonly (string | number | boolean)[]): Prisma.Sql;
}

function compile(filter: MetadataFilter, d: Dialect): Prisma.Sql {
  switch (filter.kind) {
    case 'and':
      return filter.filters.length === 0
        ? TRUE
        : group(
            filter.filters.map((f) => compile(f, d)),
            ' AND ',
          );
    case 'or':
      return group(
        filter.filters.map((f) => compile(f, d)),
        ' OR ',
      );
    case 'eq':
      return equalsAny(filter.path, [filter.value], d);
    case 'ne':
      return not(equalsAny(filter.path, [filter.value], d));
    case 'in':
      return equalsAny(filter.path, filter.values, d);
    case 'nin':
      return not(equalsAny(filter.path, filter.values, d));
    case 'all':
      return filter.values.length === 0
        ? FALSE
        : group(
            unique(filter.values).map((v) => equalsAny(filter.path, [v], d)),
            ' AND ',
          );
    default:
      return d.someElement(filter.path, d.elementCompares(filter.kind, filter.value));
  }
}

/** `$in`: some element equals a listed value; a listed null also matches a missing key. */
function equalsAny(path: FilterPath, listed: readonly FilterScalar[], d: Dialect): Prisma.Sql {
  const values = unique(listed.filter((v): v is string | number | boolean => v !== null));
  const withNull = listed.includes(null);
  const tests = [...(values.length ? [d.elementIn(values)] : []), ...(withNull ? [d.elementIsNull] : [])];
  if (tests.length === 0) return FALSE;
  const some = d.someElement(path, group(tests, ' OR '));
  if (withNull) return group([not(d.present(path)), some], ' OR ');
  const hint = d.equalityHint(path, values);
  return hint === TRUE ? some : group([hint, some], ' AND ');
}

function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}

function group(parts: Prisma.Sql[], separator: string): Prisma.Sql {
  return parts.length === 1 ? parts[0]! : Prisma.join(parts, separator, '(', ')');
}

const not = (sql: Prisma.Sql) => Prisma.sql`(NOT ${sql})`;

const comparison: Record<RangeOperator, Prisma.Sql> = {
  gt: Prisma.raw('>'),
  gte: Prisma.raw('>='),
  lt: Prisma.raw('<'),
  lte: Prisma.raw('<='),
};

/** A path's members between the `[]`s: `a[].b.c` → [['a'], ['b', 'c']]. */
function memberRuns(path: FilterPath): string[][] {
  const runs: string[][] = [[]];
  for (const step of path.steps) {
    if (step.kind === 'each') runs.push([]);
    else runs[runs.length - 1]!.push(step.name);
  }
  return runs;
}

/**
 * SQLite: `json_each(json, path)` yields the items of an array (integer keys), the value itself
 * for a scalar (NULL key), the members of an object (text keys), and nothing for a missing key.
 * So elements are the rows whose key is not text, and `[]` keeps the rows with integer keys.
 * `type` is 'text', 'integer', 'real', 'true', 'false', 'null', 'array' or 'object'.
 */
function sqliteDialect(column: Prisma.Sql): Dialect {
  // Labels are always quoted: `$."a"."0"` is the member "0", never an array index. Members are
  // [A-Za-z0-9_-] (parse.ts), so there is nothing to escape inside the quotes.
  const jsonPath = (members: string[]) => '$' + members.map((m) => `."${m}"`).join('');
  const element = Prisma.raw('kbf_e');
  /** A projected item's JSON when it is an object; '{}' otherwise, since json_each on the text of a string item would fail. */
  const objectOrEmpty = (alias: Prisma.Sql) =>
    Prisma.sql`CASE WHEN ${alias}.type = 'object' THEN ${alias}.value ELSE '{}' END`;

  /** FROM items and WHERE conditions walking the `[]`s of a path; the last run is left to the caller. */
  function projections(path: FilterPath): { from: Prisma.Sql[]; where: Prisma.Sql[]; last: Prisma.Sql; run: string[] } {
    const runs = memberRuns(path);
    const from: Prisma.Sql[] = [];
    const where: Prisma.Sql[] = [];
    let source = column;
    for (let i = 0; i < runs.length - 1; i++) {
      const alias = Prisma.raw(`kbf_p${i + 1}`);
      from.push(Prisma.sql`json_each(${source}, ${jsonPath(runs[i]!)}) AS ${alias}`);
      where.push(Prisma.sql`typeof(${alias}.key) = 'integer'`);
      source = objectOrEmpty(alias);
    }
    return { from, where, last: source, run: runs[runs.length - 1]! };
  }

  return {
    someElement(path, test) {
      const { from, where, last, run } = projections(path);
      from.push(Prisma.sql`json_each(${last}, ${jsonPath(run)}) AS ${element}`);
      where.push(Prisma.sql`typeof(${element}.key) <> 'text'`, Prisma.sql`(${test})`);
      return Prisma.sql`EXISTS (SELECT 1 FROM ${Prisma.join(from, ', ')} WHERE ${Prisma.join(where, ' AND ')})`;
    },
    present(path) {
      const { from, where, last, run } = projections(path);
      const reached = Prisma.sql`json_type(${last}, ${jsonPath(run)}) IS NOT NULL`;
      if (from.length === 0) return Prisma.sql`(${reached})`;
      where.push(reached);
      return Prisma.sql`EXISTS (SELECT 1 FROM ${Prisma.join(from, ', ')} WHERE ${Prisma.join(where, ' AND ')})`;
    },
    elementIn(values) {
      const tests: Prisma.Sql[] = [];
      const strings = values.filter((v) => typeof v === 'string');
      const numbers = values.filter((v) => typeof v === 'number');
      if (strings.length)
        tests.push(Prisma.sql`(${element}.type = 'text' AND ${element}.value IN (${Prisma.join(strings)}))`);
      // Integer and real compare numerically in SQLite (1 = 1.0), exactly between the two kinds.
      if (numbers.length)
        tests.push(
          Prisma.sql`(${element}.type IN ('integer', 'real') AND ${element}.value IN (${Prisma.join(numbers)}))`,
        );
      // Booleans are told apart by type alone: their value column reads 1 or 0.
      const booleans = values.filter((v) => typeof v === 'boolean').map((b) => (b ? 'true' : 'false'));
      if (booleans.length) tests.push(Prisma.sql`${element}.type IN (${Prisma.join(booleans)})`);
      return group(tests, ' OR ');
    },
    elementIsNull: Prisma.sql`${element}.type = 'null'`,
    elementCompares(operator, value) {
      // Text compares with the BINARY collation: memcmp of UTF-8, which is code-point order.
      const types = typeof value === 'number' ? Prisma.raw(`('integer', 'real')`) : Prisma.raw(`('text')`);
      return Prisma.sql`(${element}.type IN ${types} AND ${element}.value ${comparison[operator]} ${value})`;
    },
    equalityHint: () => TRUE,
  };
}

/**
 * PostgreSQL jsonb: `->` with a text key walks objects only (NULL on arrays and scalars, and
 * for a missing key). The elements of a value are those of jsonb_array_elements over the value,
 * or over a one-item array made of it; a missing value (SQL NULL) gives '[]', because
 * jsonb_build_array(NULL) is [null] and would make a missing key look like a null.
 */
function postgresDialect(column: Prisma.Sql): Dialect {
  const element = Prisma.raw('kbf_e.value');
  const walk = (from: Prisma.Sql, members: string[]) =>
    members.reduce((sql, m) => Prisma.sql`${sql} -> ${m}::text`, Prisma.sql`${from}`);
  /** Numbers travel as their shortest decimal text: a float8 parameter cast to numeric would round to 15 digits. */
  const numeric = (n: number) => Prisma.sql`to_jsonb(${String(n)}::numeric)`;
  const jsonbOf = (v: string | number | boolean) =>
    typeof v === 'number'
      ? numeric(v)
      : typeof v === 'string'
        ? Prisma.sql`to_jsonb(${v}::text)`
        : Prisma.sql`to_jsonb(${v}::boolean)`;

  /** FROM items walking a path to its values (column `v` of the last alias, NULL when missing). */
  function values(path: FilterPath): { from: Prisma.Sql; value: Prisma.Sql } {
    const runs = memberRuns(path);
    let value = Prisma.raw('kbf_v0.v');
    let from = Prisma.sql`(SELECT ${walk(column, runs[0]!)} AS v) AS kbf_v0`;
    for (let i = 1; i < runs.length; i++) {
      const item = Prisma.raw(`kbf_p${i}`);
      const next = Prisma.raw(`kbf_v${i}`);
      from = Prisma.sql`${from}
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(${value}) = 'array' THEN ${value} ELSE '[]'::jsonb END) AS ${item}
        CROSS JOIN LATERAL (SELECT ${walk(Prisma.sql`${item}.value`, runs[i]!)} AS v) AS ${next}`;
      value = Prisma.raw(`kbf_v${i}.v`);
    }
    return { from, value };
  }

  /** The jsonb `path` leads to, wrapped around `leaf`: what `@>` looks for. */
  function nest(path: FilterPath, leaf: Prisma.Sql): Prisma.Sql {
    return [...path.steps]
      .reverse()
      .reduce(
        (inner, step) =>
          step.kind === 'each'
            ? Prisma.sql`jsonb_build_array(${inner})`
            : Prisma.sql`jsonb_build_object(${step.name}::text, ${inner})`,
        leaf,
      );
  }

  return {
    someElement(path, test) {
      const { from, value } = values(path);
      return Prisma.sql`EXISTS (SELECT 1 FROM ${from}
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN ${value} IS NULL THEN '[]'::jsonb WHEN jsonb_typeof(${value}) = 'array' THEN ${value} ELSE jsonb_build_array(${value}) END) AS kbf_e
        WHERE ${test})`;
    },
    present(path) {
      const runs = memberRuns(path);
      if (runs.length === 1) return Prisma.sql`((${walk(column, runs[0]!)}) IS NOT NULL)`;
      const { from, value } = values(path);
      return Prisma.sql`EXISTS (SELECT 1 FROM ${from} WHERE ${value} IS NOT NULL)`;
    },
    // jsonb equality is type-aware and numeric: 1 = 1.0, true <> 1, "1" <> 1.
    elementIn: (values) =>
      values.length === 1
        ? Prisma.sql`${element} = ${jsonbOf(values[0]!)}`
        : Prisma.sql`${element} IN (${Prisma.join(values.map(jsonbOf))})`,
    elementIsNull: Prisma.sql`jsonb_typeof(${element}) = 'null'`,
    elementCompares(operator, value) {
      // Two numbers compare numerically as jsonb. Strings compare as text in the "C" collation
      // (code-point order, like SQLite), whatever the database's collation is.
      if (typeof value === 'number') {
        return Prisma.sql`(jsonb_typeof(${element}) = 'number' AND ${element} ${comparison[operator]} ${numeric(value)})`;
      }
      return Prisma.sql`(jsonb_typeof(${element}) = 'string' AND (${element} #>> '{}') COLLATE "C" ${comparison[operator]} ${value}::text)`;
    },
    /**
     * An element equal to x at `a.b` means the document contains {"a": {"b": x}} or, when b is an
     * array, {"a": {"b": [x]}} (containment compares numbers numerically too). `@>` can use a GIN
     * index on the column; the exact test still decides.
     */
    equalityHint(path, listed) {
      const probes = listed.flatMap((v) => [
        Prisma.sql`${column} @> ${nest(path, jsonbOf(v))}`,
        Prisma.sql`${column} @> ${nest(path, Prisma.sql`jsonb_build_array(${jsonbOf(v)})`)}`,
      ]);
      return group(probes, ' OR ');
    },
  };
}
