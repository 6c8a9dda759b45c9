import { Prisma } from '../../generated/sqlite/client';
import type { FilterPath, FilterScalar, MetadataFilter, RangeOperator } from './parse';

/**
 * Compiles a parsed filter into one boolean SQL expression over a JSON metadata column, with the
 * semantics of the reference evaluator (evaluate.ts, DECISIONS.md §7) on SQLite and PostgreSQL.
 *
 * - Every user value and every path member is a bound parameter; the only raw SQL is this
 *   module's own text and the caller's column.
 * - The expression is two-valued (never NULL) over a NOT NULL column: each condition is an
 *   EXISTS, a containment, a jsonb_path_exists or an IS NOT NULL test, so `$ne` and `$nin` can
 *   be written as NOT of `$eq` and `$in`.
 * - Element tests check the JSON type, so `"9"` never meets 9 and `true` never meets 1, which
 *   SQLite would otherwise allow (`'9' > 5`, booleans read as 1/0).
 * - A dot never steps into an array and a member name never indexes one (`a.0` is the member
 *   "0"): SQLite paths quote every label; PostgreSQL never uses `#>`, whose numeric path
 *   elements index arrays, nor lax jsonpath, which unwraps arrays in the middle of a path.
 *
 * SQLite correlation names start with `kbf_`, so that they do not shadow the caller's aliases.
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

/** What differs between the engines: how to reach the elements at a path, and how to test them. */
interface Dialect {
  /** Some element of the values at `path` equals one of `values` (null included: a JSON null). */
  someElementEquals(path: FilterPath, values: readonly FilterScalar[]): Prisma.Sql;
  /** Some element of the values at `path` compares true with `value`, which has the same type. */
  someElementCompares(path: FilterPath, operator: RangeOperator, value: string | number): Prisma.Sql;
  /** The path reaches at least one value (the key is not missing). */
  present(path: FilterPath): Prisma.Sql;
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
      return d.someElementCompares(filter.path, filter.kind, filter.value);
  }
}

/** `$in`: some element equals a listed value; a listed null also matches a missing key. */
function equalsAny(path: FilterPath, listed: readonly FilterScalar[], d: Dialect): Prisma.Sql {
  const values = unique(listed);
  if (values.length === 0) return FALSE;
  const some = d.someElementEquals(path, values);
  return values.includes(null) ? group([not(d.present(path)), some], ' OR ') : some;
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
  /**
   * Numbers as the double JSON.parse makes of them. SQLite reads an integer literal as an exact
   * 64-bit integer, and JSON.stringify writes a double beyond 2^53 as its shortest decimal
   * (37533417110707210 for the double 37533417110707208), so compared as stored they would differ
   * from the number the user sent. Below 2^53 the cast changes nothing; 1 = 1.0 either way.
   */
  const asDouble = Prisma.sql`CAST(${element}.value AS REAL)`;
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

  /** Some element at `path` passes `test`, an expression over the element's `type` and `value`. */
  function someElement(path: FilterPath, test: Prisma.Sql): Prisma.Sql {
    const { from, where, last, run } = projections(path);
    from.push(Prisma.sql`json_each(${last}, ${jsonPath(run)}) AS ${element}`);
    where.push(Prisma.sql`typeof(${element}.key) <> 'text'`, Prisma.sql`(${test})`);
    return Prisma.sql`EXISTS (SELECT 1 FROM ${Prisma.join(from, ', ')} WHERE ${Prisma.join(where, ' AND ')})`;
  }

  return {
    someElementEquals(path, values) {
      const tests: Prisma.Sql[] = [];
      const strings = values.filter((v) => typeof v === 'string');
      const numbers = values.filter((v) => typeof v === 'number');
      if (strings.length) {
        tests.push(Prisma.sql`(${element}.type = 'text' AND ${element}.value IN (${Prisma.join(strings)}))`);
      }
      if (numbers.length) {
        tests.push(Prisma.sql`(${element}.type IN ('integer', 'real') AND ${asDouble} IN (${Prisma.join(numbers)}))`);
      }
      // Booleans and null are told apart by type alone: a boolean's value column reads 1 or 0.
      const types = values
        .filter((v) => typeof v === 'boolean' || v === null)
        .map((v) => (v === null ? 'null' : v ? 'true' : 'false'));
      if (types.length) tests.push(Prisma.sql`${element}.type IN (${Prisma.join(types)})`);
      return someElement(path, group(tests, ' OR '));
    },
    someElementCompares(path, operator, value) {
      // Text compares with the BINARY collation: memcmp of UTF-8, which is code-point order.
      const types = typeof value === 'number' ? Prisma.raw(`('integer', 'real')`) : Prisma.raw(`('text')`);
      const left = typeof value === 'number' ? asDouble : Prisma.sql`${element}.value`;
      return someElement(path, Prisma.sql`${element}.type IN ${types} AND ${left} ${comparison[operator]} ${value}`);
    },
    present(path) {
      const { from, where, last, run } = projections(path);
      const reached = Prisma.sql`json_type(${last}, ${jsonPath(run)}) IS NOT NULL`;
      if (from.length === 0) return Prisma.sql`(${reached})`;
      where.push(reached);
      return Prisma.sql`EXISTS (SELECT 1 FROM ${Prisma.join(from, ', ')} WHERE ${Prisma.join(where, ' AND ')})`;
    },
  };
}

/**
 * PostgreSQL jsonb, with no subqueries: every condition is an operator or a function call, which
 * the planner costs as such. (EXISTS over jsonb_array_elements is costed at 100 rows per call and
 * per nesting; a filter of many of them pushed plans past jit_above_cost, and compiling those took
 * seconds.)
 *
 * Equality is containment. Below the top level `@>` needs the structures to match, so
 * `doc @> {"a": {"b": x}}` holds exactly when `a` is an object whose `b` equals x (scalars compare
 * as jsonb: type-aware, numbers numerically), and `doc @> {"a": {"b": [x]}}` exactly when `b` is
 * an array with an item equal to x (an item [x] does not count); `[]` in a path becomes an array
 * around the rest. A GIN index on the column can serve both.
 *
 * Ranges and presence are strict-mode jsonpath (`jsonb_path_exists`), written so that it never
 * raises an error, since an error would end the whole evaluation whichever items came first: each
 * step is guarded inside a filter (`? (exists(@."b"))."b"`, `? (@.type() == "array")[*]`), where an
 * error only makes that one item unknown. Strict mode never unwraps arrays (lax mode would, in the
 * middle of a path), and jsonpath orders strings by code point whatever the database collation.
 * The jsonpath text is built from member names, which parse.ts restricts to [A-Za-z0-9_-], and is
 * bound as a parameter; values are passed as jsonpath variables.
 */
function postgresDialect(column: Prisma.Sql): Dialect {
  /** Numbers travel as their shortest decimal text: a float8 parameter cast to numeric would round to 15 digits. */
  const jsonbOf = (v: FilterScalar) =>
    v === null
      ? Prisma.sql`'null'::jsonb`
      : typeof v === 'number'
        ? Prisma.sql`to_jsonb(${String(v)}::numeric)`
        : typeof v === 'string'
          ? Prisma.sql`to_jsonb(${v}::text)`
          : Prisma.sql`to_jsonb(${v}::boolean)`;

  /** The jsonb that `path` leads to, wrapped around `leaf`. */
  const nest = (path: FilterPath, leaf: Prisma.Sql): Prisma.Sql =>
    [...path.steps]
      .reverse()
      .reduce(
        (inner, step) =>
          step.kind === 'each'
            ? Prisma.sql`jsonb_build_array(${inner})`
            : Prisma.sql`jsonb_build_object(${step.name}::text, ${inner})`,
        leaf,
      );

  /** jsonpath steps from the current item to the values at `path`, raising no error on any shape. */
  const walk = (path: FilterPath): string =>
    path.steps
      .map((step) =>
        step.kind === 'each' ? ' ? (@.type() == "array")[*]' : ` ? (exists(@."${step.name}"))."${step.name}"`,
      )
      .join('');

  const jsonpathOperator: Record<RangeOperator, string> = { gt: '>', gte: '>=', lt: '<', lte: '<=' };

  return {
    someElementEquals(path, listed) {
      const probes = listed.flatMap((v) => [
        Prisma.sql`${column} @> ${nest(path, jsonbOf(v))}`,
        Prisma.sql`${column} @> ${nest(path, Prisma.sql`jsonb_build_array(${jsonbOf(v)})`)}`,
      ]);
      return group(probes, ' OR ');
    },
    someElementCompares(path, operator, value) {
      // Comparing across types would be an error (so: unknown, not selected); the type test says it plainly.
      const test = `@.type() == "${typeof value}" && @ ${jsonpathOperator[operator]} $x`;
      const values = `@${walk(path)}`;
      const jsonpath = `strict $ ? (exists(${values} ? (@.type() != "array" && ${test})) || exists(${values} ? (@.type() == "array")[*] ? (${test})))`;
      return Prisma.sql`jsonb_path_exists(${column}, ${jsonpath}::jsonpath, jsonb_build_object('x', ${jsonbOf(value)}))`;
    },
    present(path) {
      if (path.steps.every((step) => step.kind === 'member')) {
        // `->` with a text key walks objects only: NULL on arrays and scalars, and for a missing key.
        const value = path.steps.reduce(
          (sql, step) => Prisma.sql`${sql} -> ${step.kind === 'member' ? step.name : ''}::text`,
          Prisma.sql`${column}`,
        );
        return Prisma.sql`((${value}) IS NOT NULL)`;
      }
      return Prisma.sql`jsonb_path_exists(${column}, ${`strict $${walk(path)}`}::jsonpath)`;
    },
  };
}
