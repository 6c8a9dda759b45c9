import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, withDatabaseName } from '../../src/db/scratch';
import { matchesMetadataFilter, parseMetadataFilter } from '../../src/kb/filter';
import { AppError } from '../../src/lib/errors';
import { describeEachDatabase, lanes } from '../helpers/lanes';
import { byCodeUnit, type FilterProbe, openFilterProbe } from './filter-probe';

/**
 * The filter conformance table (filter-conformance.json): for each case, the reference
 * evaluator, SQLite and PostgreSQL must return exactly the expected document IDs, or the parser
 * must refuse the filter with a 422 whose message holds the expected fragment.
 */

interface ConformanceDocument {
  id: string;
  metadata: Record<string, unknown>;
  /** JSON stored verbatim instead of JSON.stringify(metadata), e.g. to keep `1.0` as written. */
  metadataText?: string;
}

type ConformanceCase = { name: string; filter: unknown } & ({ expect: string[] } | { error: string });

const table = JSON.parse(readFileSync(new URL('./filter-conformance.json', import.meta.url), 'utf8')) as {
  documents: ConformanceDocument[];
  cases: ConformanceCase[];
};
const documents = table.documents;
const matchCases = table.cases.filter((c): c is ConformanceCase & { expect: string[] } => 'expect' in c);
const errorCases = table.cases.filter((c): c is ConformanceCase & { error: string } => 'error' in c);

const sorted = (ids: string[]) => [...ids].sort(byCodeUnit);

describe('filter conformance table', () => {
  it('is well formed', () => {
    const ids = documents.map((d) => d.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(table.cases.map((c) => c.name)).size).toBe(table.cases.length);
    for (const c of matchCases) for (const id of c.expect) expect(ids, c.name).toContain(id);
    for (const d of documents) {
      if (d.metadataText !== undefined) expect(JSON.parse(d.metadataText), d.id).toEqual(d.metadata);
    }
    expect(matchCases.length + errorCases.length).toBeGreaterThan(100);
  });

  describe('reference evaluator', () => {
    it.each(matchCases)('$name', ({ filter, expect: expected }) => {
      const parsed = parseMetadataFilter(filter);
      const got = documents.filter((d) => matchesMetadataFilter(parsed, d.metadata)).map((d) => d.id);
      expect(sorted(got)).toEqual(sorted(expected));
    });
  });

  describe('422 cases', () => {
    it.each(errorCases)('$name', ({ filter, error }) => {
      let thrown: unknown;
      try {
        parseMetadataFilter(filter);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(AppError);
      const appError = thrown as AppError;
      expect(appError.code).toBe('INVALID_FILTER');
      expect(appError.status).toBe(422);
      expect(appError.message).toContain(error);
      // The detail repeats the message, split into its path and its problem.
      expect(appError.details).toHaveLength(1);
      const [detail] = appError.details!;
      expect(`${detail!.path}: ${detail!.message}`).toBe(appError.message);
    });
  });
});

describeEachDatabase('filter conformance table in SQL', (provider) => {
  let probe: FilterProbe;
  beforeAll(async () => {
    probe = await openFilterProbe(provider);
    await probe.load(documents.map((d) => ({ id: d.id, text: d.metadataText ?? JSON.stringify(d.metadata) })));
  });
  afterAll(async () => {
    await probe?.close();
  });

  // The limits exist so that any accepted filter runs: these are the largest in bound parameters.
  const deepPath = (i: number) => Array.from({ length: 32 }, (_, j) => (j < 31 ? `m${i % 7}[]` : 'leaf')).join('.');
  it.each([
    [
      '$all of 200 values on a 32-member path',
      { [deepPath(0)]: { $all: Array.from({ length: 200 }, (_, i) => `v${i}`) } },
    ],
    ['$nin of null and 199 values', { [deepPath(1)]: { $nin: [null, ...Array.from({ length: 199 }, (_, i) => i)] } }],
    [
      '200 paths of 32 members',
      Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`${deepPath(i)}${i}`, { $ne: null }])),
    ],
  ])('the largest filters run: %s', async (_name, filter) => {
    const parsed = parseMetadataFilter(filter);
    const want = documents.filter((d) => matchesMetadataFilter(parsed, d.metadata)).map((d) => d.id);
    expect(await probe.matching(parsed)).toEqual(sorted(want));
  });

  it.each(matchCases)('$name', async ({ filter, expect: expected }) => {
    const parsed = parseMetadataFilter(filter);
    expect(await probe.matching(parsed)).toEqual(sorted(expected));
    // NOT of the expression selects exactly the rest: the expression is never NULL.
    const rest = documents.map((d) => d.id).filter((id) => !expected.includes(id));
    expect(await probe.notMatching(parsed)).toEqual(sorted(rest));
  });
});

/**
 * PostgreSQL compares text in the database's collation unless told otherwise; the test databases
 * use C.UTF-8, which already orders by code point. A database with a linguistic default (ICU
 * en-US: "a" < "Z", accents ignored at first) shows that string ranges do not depend on it.
 */
describe.skipIf(!lanes().postgres)('filter conformance table in SQL [postgresql, ICU en-US database collation]', () => {
  let probe: FilterProbe | undefined;
  let unsupported: string | undefined;
  beforeAll(async () => {
    const { adminUrl, prefix } = lanes().postgres!;
    const name = `${prefix}_icu_${randomBytes(4).toString('hex')}`;
    try {
      await adminQuery(
        adminUrl,
        `CREATE DATABASE "${name}" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`,
      );
    } catch (err) {
      unsupported = (err as Error).message;
      return;
    }
    const database = {
      url: withDatabaseName(adminUrl, name),
      drop: async () => {
        await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      },
    };
    probe = await openFilterProbe('postgresql', database);
    await probe.load(documents.map((d) => ({ id: d.id, text: d.metadataText ?? JSON.stringify(d.metadata) })));
  });
  afterAll(async () => {
    await probe?.close();
  });

  it.for(matchCases)('$name', async ({ filter, expect: expected }, ctx) => {
    if (unsupported) ctx.skip(`this server cannot create an ICU database: ${unsupported}`);
    expect(await probe!.matching(parseMetadataFilter(filter))).toEqual(sorted(expected));
  });
});
