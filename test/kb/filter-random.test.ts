import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { matchesMetadataFilter, parseMetadataFilter } from '../../src/kb/filter';
import { describeEachDatabase } from '../helpers/lanes';
import { type FilterProbe, openFilterProbe } from './filter-probe';

/**
 * Randomized parity: generated metadata and valid filters over the paths that metadata uses; the
 * SQL compiled for SQLite and PostgreSQL must select exactly what the reference evaluator does.
 * FILTER_RANDOM_SEED replays a run (fast-check prints the seed and path of a failure);
 * FILTER_RANDOM_RUNS changes the number of runs.
 */

const numRuns = Number(process.env.FILTER_RANDOM_RUNS ?? 200);
const seed = process.env.FILTER_RANDOM_SEED === undefined ? undefined : Number(process.env.FILTER_RANDOM_SEED);

/** Few keys, so that documents share paths and filters hit them; "0" is a member, never an index. */
const key = fc.oneof({ arbitrary: fc.constantFrom('a', 'b', 'c'), weight: 6 }, fc.constantFrom('x-y', '0'));

/**
 * Mostly values from a small pool, so that filters meet documents that hold them; sometimes any
 * double or any short string. The pool orders differently by code point, by UTF-16 unit and by
 * locale, and mixes types that SQLite would compare across ("9" and 9, true and 1).
 */
const commonScalar = fc.constantFrom(
  null,
  true,
  false,
  0,
  1,
  -1,
  2.5,
  9,
  10,
  'a',
  'b',
  '',
  'B',
  '9',
  '10',
  '\u00e9',
  'e\u0301',
  '\uff5a',
  '\u{1F600}',
  '\u{1F600}a',
);
const anyNumber = fc.oneof(
  fc.constantFrom(0.1, 0.30000000000000004, 1e21, 2 ** 53, -(2 ** 53), 1e-7, 5e-324, -0, 1.7976931348623157e308),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  // Integers beyond 2^53, which JSON.stringify writes in a shortest form that is not their exact value.
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(Number),
);
// U+0000 cannot be stored in PostgreSQL jsonb, and filters refuse it.
const anyString = fc.string({ unit: 'binary', maxLength: 3 }).filter((s) => !s.includes('\u0000'));
const scalar = fc.oneof({ arbitrary: commonScalar, weight: 8 }, anyNumber, anyString);
const number = scalar.filter((v): v is number => typeof v === 'number');
const string = scalar.filter((v): v is string => typeof v === 'string');

const { value } = fc.letrec<{ value: unknown; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 3, depthIdentifier: 'metadata' },
    { arbitrary: scalar, weight: 4 },
    { arbitrary: fc.array(tie('value'), { maxLength: 4, depthIdentifier: 'metadata' }), weight: 2 },
    { arbitrary: fc.array(tie('object'), { maxLength: 3, depthIdentifier: 'metadata' }), weight: 2 },
    { arbitrary: tie('object'), weight: 2 },
  ),
  object: fc.dictionary(key, tie('value'), { maxKeys: 3, depthIdentifier: 'metadata' }),
}));

const metadata = fc.dictionary(key, value, { minKeys: 1, maxKeys: 4 });

/** `a`, `a.b`, `a[].b`, `a[].b[].c`, …: members from the same keys, [] never last; short ones most often. */
const path = fc
  .oneof(
    { arbitrary: fc.constant(1), weight: 5 },
    { arbitrary: fc.constant(2), weight: 4 },
    { arbitrary: fc.constant(3), weight: 1 },
  )
  .chain((length) => fc.array(fc.record({ name: key, each: fc.boolean() }), { minLength: length, maxLength: length }))
  .map((steps) => steps.map((s, i) => (s.each && i < steps.length - 1 ? `${s.name}[]` : s.name)).join('.'));

type Scalar = string | number | boolean | null;

/**
 * The paths a set of documents uses (`a[].b` where `a` holds objects), each with the scalars
 * found there, so that generated filters mostly ask about what is there.
 */
function harvest(docs: readonly Record<string, unknown>[]): Map<string, Scalar[]> {
  const found = new Map<string, Scalar[]>();
  const record = (at: string, v: unknown) => {
    const list = found.get(at) ?? [];
    found.set(at, list);
    for (const e of Array.isArray(v) ? v : [v]) if (e === null || typeof e !== 'object') list.push(e as Scalar);
  };
  const visit = (v: unknown, at: string) => {
    if (Array.isArray(v)) {
      for (const item of v) if (isObject(item)) visitMembers(item, `${at}[]`);
    } else if (isObject(v)) visitMembers(v, at);
  };
  const visitMembers = (o: Record<string, unknown>, at: string) => {
    for (const [k, child] of Object.entries(o)) {
      const here = at === '' ? k : `${at}.${k}`;
      record(here, child);
      visit(child, here);
    }
  };
  for (const doc of docs) visitMembers(doc, '');
  return found;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Prefer the given values when there are any. */
const mostlyFrom = <T>(seen: readonly T[], otherwise: fc.Arbitrary<T>): fc.Arbitrary<T> =>
  seen.length ? fc.oneof({ arbitrary: fc.constantFrom(...seen), weight: 3 }, otherwise) : otherwise;

/** A field's value: a scalar (implicit $eq) or one or two operators with operands from `operand`. */
function fieldValue(operand: fc.Arbitrary<Scalar>): fc.Arbitrary<unknown> {
  const listOf = <T>(item: fc.Arbitrary<T>) => fc.array(item, { maxLength: 3 });
  const operator: fc.Arbitrary<[string, unknown]> = fc.oneof(
    fc.tuple(fc.constantFrom('$eq', '$ne'), operand),
    fc.tuple(
      fc.constantFrom('$gt', '$gte', '$lt', '$lte'),
      fc.oneof(
        operand.filter((v) => typeof v === 'number' || typeof v === 'string'),
        number,
        string,
      ),
    ),
    fc.tuple(fc.constantFrom('$in', '$nin'), listOf(operand)),
    fc.tuple(fc.constant('$all'), listOf(operand.filter((v) => v !== null))),
  );
  return fc.oneof(
    operand,
    fc.array(operator, { minLength: 1, maxLength: 2 }).map((ops) => Object.fromEntries(ops)),
  );
}

/** Valid filters of `field` conditions; mostly one condition, so that results vary. */
function filterArbitrary(field: fc.Arbitrary<[string, unknown]>): fc.Arbitrary<Record<string, unknown>> {
  return fc.letrec<{ filter: Record<string, unknown> }>((tie) => ({
    filter: fc.oneof(
      { maxDepth: 3, depthIdentifier: 'filter' },
      { arbitrary: field.map(([p, v]) => ({ [p]: v })), weight: 6 },
      { arbitrary: fc.array(field, { minLength: 2, maxLength: 3 }).map((f) => Object.fromEntries(f)), weight: 1 },
      {
        arbitrary: fc
          .tuple(
            fc.constantFrom('$and', '$or'),
            fc.array(tie('filter'), { minLength: 1, maxLength: 3, depthIdentifier: 'filter' }),
          )
          .map(([op, filters]) => ({ [op]: filters })),
        weight: 2,
      },
      {
        arbitrary: fc
          .tuple(field, fc.constantFrom('$and', '$or'), fc.array(tie('filter'), { minLength: 1, maxLength: 2 }))
          .map(([[p, v], op, filters]) => ({ [p]: v, [op]: filters })),
        weight: 1,
      },
      { arbitrary: fc.constant({}), weight: 1 },
    ),
  })).filter;
}

/** Documents, then filters drawn mostly from their paths and the values at those paths. */
const scenario = fc.array(metadata, { minLength: 4, maxLength: 12 }).chain((docs) => {
  // Filters see what the database holds: the JSON text (-0 is stored as 0).
  const stored = docs.map((m) => JSON.parse(JSON.stringify(m)) as Record<string, unknown>);
  const seen = [...harvest(stored)];
  const anyField = fc.tuple(path, fieldValue(scalar));
  const field = seen.length
    ? fc.oneof(
        {
          arbitrary: fc
            .constantFrom(...seen)
            .chain(([p, values]) => fc.tuple(fc.constant(p), fieldValue(mostlyFrom(values, scalar)))),
          weight: 3,
        },
        anyField,
      )
    : anyField;
  return fc.tuple(fc.constant(stored), fc.array(filterArbitrary(field), { minLength: 1, maxLength: 8 }));
});

describeEachDatabase('filters on random metadata', (provider) => {
  let probe: FilterProbe;
  beforeAll(async () => {
    probe = await openFilterProbe(provider);
  });
  afterAll(async () => {
    await probe?.close();
  });

  it('select exactly what the reference evaluator selects', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ([docs, inputs]) => {
        const stored = docs.map((m, i) => ({ id: `d${String(i).padStart(2, '0')}`, metadata: m }));
        const filters = inputs.map((input) => parseMetadataFilter(input));
        await probe.load(stored.map((d) => ({ id: d.id, text: JSON.stringify(d.metadata) })));
        const got = await probe.matchingEach(filters);
        const want = filters.map((f) => stored.filter((d) => matchesMetadataFilter(f, d.metadata)).map((d) => d.id));
        expect(got).toEqual(want);
      }),
      { numRuns, ...(seed === undefined ? {} : { seed }) },
    );
  });
});
