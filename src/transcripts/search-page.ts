import type { Db } from '../db/client';
import type { Provider } from '../db/schema-source';
import { isId } from '../lib/ids';
import { type FilterTarget, type ResolvedFilter, resolveFilters } from './search';
import type { SearchCriteria, SortOrder } from './validation';

/**
 * A page of the transcript search in one SQL statement: the page of transcripts with, per
 * transcript, its property values and evaluation results aggregated as JSON arrays (SQLite
 * json_group_array / json_object, PostgreSQL json_agg / json_build_object). Through Prisma the
 * same page was six statements, each compiled and interpreted by Prisma's query engine; the
 * database answers this one from the same indexes (the page from `Transcript(projectId,
 * createdAt, id)`, the relations from their `transcriptId` keys, for the page's rows only).
 *
 * The rows come back in the shape Prisma gives for
 * `findMany({include: {propertyValues: {include: {property}}, evaluationResults: {include:
 * {evaluation}}}})`, so the GraphQL types resolve them as they resolve Prisma's rows.
 *
 * The criteria compile to SQL here with the semantics of `buildTranscriptWhere` (src/transcripts/
 * search.ts): both start from the same resolved filters, and test/transcripts/search-sql.test.ts
 * checks that both select the same transcripts for every criterion on both engines.
 */

/** A WHERE clause on `"Transcript" t` and its parameters, in the provider's placeholder style. */
export interface SqlWhere {
  sql: string;
  params: unknown[];
}

class Params {
  readonly values: unknown[] = [];
  constructor(private readonly provider: Provider) {}
  /** The placeholder of a new parameter. */
  add(value: unknown): string {
    this.values.push(value);
    return this.provider === 'postgresql' ? `$${this.values.length}` : '?';
  }
}

/** A date as each engine's Prisma adapter stores it (SQLite: ISO text with +00:00; PostgreSQL: timestamp(3) in UTC). */
function dateParam(params: Params, provider: Provider, date: Date): string {
  const iso = date.toISOString();
  return provider === 'sqlite'
    ? params.add(iso.replace('Z', '+00:00'))
    : `${params.add(iso.slice(0, -1))}::timestamp(3)`;
}

/** SQLite keeps booleans as 0/1. */
function scalarParam(params: Params, provider: Provider, value: string | number | boolean): string {
  return params.add(typeof value === 'boolean' && provider === 'sqlite' ? (value ? 1 : 0) : value);
}

function filterSql(f: ResolvedFilter, params: Params, provider: Provider): string {
  const alias = f.kind === 'property' ? 'v' : 'r';
  const col = `${alias}."${f.column}"`;
  const value = (v: string | number | boolean) => scalarParam(params, provider, v);
  const conditions: string[] =
    f.kind === 'property'
      ? [`v."transcriptId" = t."id"`, `v."propertyId" = ${params.add(f.id)}`]
      : [`r."transcriptId" = t."id"`, `r."evaluationId" = ${params.add(f.id)}`, `r."status" = 'done'`];
  const c = f.condition;
  if (c) {
    switch (c.op) {
      case 'equals':
        conditions.push(`${col} = ${value(c.value)}`);
        break;
      case 'gt':
        conditions.push(`${col} > ${value(c.value)}`);
        break;
      case 'gte':
        conditions.push(`${col} >= ${value(c.value)}`);
        break;
      case 'lt':
        conditions.push(`${col} < ${value(c.value)}`);
        break;
      case 'lte':
        conditions.push(`${col} <= ${value(c.value)}`);
        break;
      case 'between':
        conditions.push(`${col} >= ${value(c.low)}`, `${col} <= ${value(c.high)}`);
        break;
      case 'in':
        conditions.push(c.values.length ? `${col} IN (${c.values.map(value).join(', ')})` : '1 = 0');
        break;
      case 'contains':
        // As Prisma's `contains`: the text as given between two wildcards; SQLite's LIKE ignores
        // ASCII case, PostgreSQL needs ILIKE for the same answer.
        conditions.push(
          provider === 'postgresql'
            ? `${col} ILIKE '%' || ${params.add(c.value)} || '%'`
            : `${col} LIKE '%' || ${params.add(c.value)} || '%'`,
        );
        break;
    }
  }
  const table = f.kind === 'property' ? '"TranscriptPropertyValue" v' : '"EvaluationResult" r';
  return `${f.negate ? 'NOT EXISTS' : 'EXISTS'} (SELECT 1 FROM ${table} WHERE ${conditions.join(' AND ')})`;
}

/** The WHERE of a search in SQL; throws the same 400 as `buildTranscriptWhere` for a filter that cannot apply. */
export function buildTranscriptWhereSql(
  projectId: string,
  criteria: SearchCriteria | null | undefined,
  targets: Map<string, FilterTarget>,
  provider: Provider,
): SqlWhere {
  const c = criteria ?? {};
  const resolved = resolveFilters(c.filters, targets);
  const params = new Params(provider);
  const and = [`t."projectId" = ${params.add(projectId)}`];
  if (c.sessionID) and.push(`t."sessionId" = ${params.add(c.sessionID)}`);
  if (c.userID) and.push(`t."userId" = ${params.add(c.userID)}`);
  if (c.environmentID) {
    and.push(
      isId(c.environmentID)
        ? `t."environmentId" = ${params.add(c.environmentID)}`
        : `EXISTS (SELECT 1 FROM "Environment" e WHERE e."id" = t."environmentId" AND e."alias" = ${params.add(c.environmentID)})`,
    );
  }
  if (c.startDate) and.push(`t."createdAt" >= ${dateParam(params, provider, c.startDate)}`);
  if (c.endDate) and.push(`t."createdAt" < ${dateParam(params, provider, c.endDate)}`);
  if (c.updatedAfter) and.push(`t."updatedAt" >= ${dateParam(params, provider, c.updatedAfter)}`);
  if (c.updatedBefore) and.push(`t."updatedAt" < ${dateParam(params, provider, c.updatedBefore)}`);
  if (c.ended === true) and.push(`t."endedAt" IS NOT NULL`);
  if (c.ended === false) and.push(`t."endedAt" IS NULL`);
  for (const f of resolved) and.push(filterSql(f, params, provider));
  return { sql: and.join(' AND '), params: params.values };
}

// ── The page ──────────────────────────────────────────────────────────────────────────────────

/** What a page carries besides the transcripts' own columns. */
export interface PageRelations {
  propertyValues: boolean;
  evaluationResults: boolean;
}

const transcriptColumns = [
  'id',
  'projectId',
  'environmentId',
  'sessionId',
  'userId',
  'logCount',
  'createdAt',
  'updatedAt',
  'endedAt',
  'expiresAt',
  'recordingUrl',
  'endsWhenIdle',
  'device',
  'browser',
  'os',
  'userName',
  'userImage',
] as const;
const valueColumns = ['transcriptId', 'propertyId', 'value', 'numberValue', 'createdAt', 'updatedAt'] as const;
const resultColumns = [
  'id',
  'evaluationId',
  'transcriptId',
  'status',
  'runId',
  'valueBoolean',
  'valueNumber',
  'valueString',
  'reason',
  'cost',
  'model',
  'inputTokens',
  'outputTokens',
  'error',
  'createdAt',
  'updatedAt',
] as const;
/** The property and evaluation fields the search's GraphQL types read. */
export const pagePropertyFields = ['name', 'type'] as const;
export const pageEvaluationFields = ['name', 'description', 'type', 'minimumValue', 'maximumValue'] as const;

/**
 * A JSON array of the expressions: the page's relations travel as arrays of values in a fixed
 * order (valueElement / resultElement), not as objects, so that neither the database nor
 * JSON.parse handles a member name per value (about a quarter less work for both).
 */
function jsonValues(provider: Provider, expressions: string[]): string {
  return `${provider === 'postgresql' ? 'json_build_array' : 'json_array'}(${expressions.join(', ')})`;
}

function jsonArray(provider: Provider, element: string, orderBy: string, from: string): string {
  return provider === 'postgresql'
    ? `(SELECT coalesce(json_agg(${element} ORDER BY ${orderBy}), '[]'::json) FROM ${from})`
    : `(SELECT json_group_array(${element} ORDER BY ${orderBy}) FROM ${from})`;
}

/**
 * The page statements' texts by provider, WHERE, order and relations: a text depends on nothing
 * else, and building it (some 70 column expressions) was about 1 % of a search's CPU. Bounded:
 * a WHERE differs with the criteria's shape (which filters, ops, list lengths), not their values.
 */
const pageSqlCache = new Map<string, string>();
const pageSqlCacheSize = 200;

/** The SELECT of one page; `where` from buildTranscriptWhereSql. */
export function transcriptPageSql(
  provider: Provider,
  where: SqlWhere,
  page: { order: SortOrder; skip: number; take: number; relations: PageRelations },
): SqlWhere {
  const params = [...where.params, page.take, page.skip];
  const key = `${provider} ${page.order} ${page.relations.propertyValues} ${page.relations.evaluationResults} ${where.params.length} ${where.sql}`;
  let sql = pageSqlCache.get(key);
  if (sql === undefined) {
    sql = pageSqlText(provider, where, page).sql;
    if (pageSqlCache.size >= pageSqlCacheSize) pageSqlCache.delete(pageSqlCache.keys().next().value as string);
    pageSqlCache.set(key, sql);
  }
  return { sql, params };
}

function pageSqlText(
  provider: Provider,
  where: SqlWhere,
  page: { order: SortOrder; skip: number; take: number; relations: PageRelations },
): SqlWhere {
  const params = new Params(provider);
  for (const value of where.params) params.add(value);
  const dir = page.order === 'ASC' ? 'ASC' : 'DESC';
  const limit = params.add(page.take);
  const offset = params.add(page.skip);
  // SQLite keeps JSON as text: json() embeds it as JSON, not as a string.
  const json = (expr: string) => (provider === 'postgresql' ? expr : `json(${expr})`);
  const columns = transcriptColumns.map((c) => `p."${c}"`);
  if (page.relations.propertyValues) {
    const element = jsonValues(provider, [
      ...valueColumns.map((c) => `v."${c}"`),
      json('v."metadata"'),
      ...pagePropertyFields.map((c) => `tp."${c}"`),
    ]);
    const from = `"TranscriptPropertyValue" v JOIN "TranscriptProperty" tp ON tp."id" = v."propertyId" WHERE v."transcriptId" = p."id"`;
    columns.push(`${jsonArray(provider, element, 'tp."createdAt", v."propertyId"', from)} AS "propertyValues"`);
  }
  if (page.relations.evaluationResults) {
    const element = jsonValues(provider, [
      ...resultColumns.map((c) => `r."${c}"`),
      ...pageEvaluationFields.map((c) => `e."${c}"`),
    ]);
    const from = `"EvaluationResult" r JOIN "Evaluation" e ON e."id" = r."evaluationId" WHERE r."transcriptId" = p."id"`;
    columns.push(`${jsonArray(provider, element, 'e."createdAt", r."evaluationId"', from)} AS "evaluationResults"`);
  }
  // The page is materialised first, so the relations are read for its rows only, whatever plan
  // the filters lead to.
  const sql = `WITH p AS MATERIALIZED (
  SELECT ${transcriptColumns.map((c) => `t."${c}"`).join(', ')} FROM "Transcript" t
  WHERE ${where.sql}
  ORDER BY t."createdAt" ${dir}, t."id" ${dir} LIMIT ${limit} OFFSET ${offset}
)
SELECT ${columns.join(', ')} FROM p ORDER BY p."createdAt" ${dir}, p."id" ${dir}`;
  return { sql, params: params.values };
}

// ── Rows as Prisma gives them ───────────────────────────────────────────────────────────────────

/** The digit at `i` of `text`, or -1 for any other character. */
function digitAt(text: string, i: number): number {
  const d = text.charCodeAt(i) - 48;
  return d >= 0 && d <= 9 ? d : -1;
}

/** The number of the `n` digits at `i` of `text`, or -1 when one is not a digit. */
function digitsAt(text: string, i: number, n: number): number {
  let value = 0;
  for (let k = 0; k < n; k++) {
    const d = digitAt(text, i + k);
    if (d < 0) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * `YYYY-MM-DDTHH:MM:SS.mmm+00:00`, the text Prisma's SQLite adapter stores (and json_object
 * copies), read field by field: `new Date` of it, after the zone test, took about twice as long
 * (162 dates a page). Null for any other text, and for values whose reading by `new Date` the
 * arithmetic below might not match (years before 100, which Date.UTC maps to 19xx; out-of-range
 * fields, which `new Date` rejects or rolls over in its own way): toDate parses those as before.
 * Days 29-31 of a shorter month roll over in both. test/transcripts/search-dates.test.ts
 * compares the two on every field's range and past it.
 */
function sqliteUtcText(text: string): Date | null {
  if (
    text.length !== 29 ||
    text.charCodeAt(4) !== 45 || // -
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 84 || // T
    text.charCodeAt(13) !== 58 || // :
    text.charCodeAt(16) !== 58 ||
    text.charCodeAt(19) !== 46 || // .
    !text.endsWith('+00:00')
  )
    return null;
  const year = digitsAt(text, 0, 4);
  const month = digitsAt(text, 5, 2);
  const day = digitsAt(text, 8, 2);
  const hour = digitsAt(text, 11, 2);
  const minute = digitsAt(text, 14, 2);
  const second = digitsAt(text, 17, 2);
  const ms = digitsAt(text, 20, 3);
  if (year < 100 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23) return null;
  if (minute < 0 || minute > 59 || second < 0 || second > 59 || ms < 0) return null;
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
}

/**
 * A stored date-time as a Date: a Date (pg), ISO text with or without a zone (SQLite keeps
 * `…+00:00`; json_build_object prints timestamp(3) without one, which is UTC here), or epoch ms.
 */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  if (typeof value === 'number' || typeof value === 'bigint') return new Date(Number(value));
  const text = String(value);
  const stored = sqliteUtcText(text);
  if (stored) return stored;
  const zoned = /(?:[zZ]|[+-]\d\d:?\d\d)$/.test(text);
  return new Date(zoned ? text : `${text.replace(' ', 'T')}Z`);
}

const toBool = (value: unknown): boolean | null => (value === null || value === undefined ? null : Boolean(value));
const toNumber = (value: unknown): number | null =>
  value === null || value === undefined ? null : typeof value === 'number' ? value : Number(value);
const parsed = (value: unknown): unknown => (typeof value === 'string' ? JSON.parse(value) : value);

/** Prisma's shapes of the three models, as the GraphQL types read them. */
export type PageRow = Record<string, unknown> & {
  id: string;
  propertyValues?: Record<string, unknown>[];
  evaluationResults?: Record<string, unknown>[];
};

type Raw = Record<string, unknown>;

/**
 * A property value of the page's JSON (an array: valueColumns, the metadata, pagePropertyFields)
 * in Prisma's shape. The literal follows those lists' order; search-sql.test.ts compares the rows
 * with Prisma's.
 */
function valueRow(v: unknown[]): Raw {
  return {
    transcriptId: v[0],
    propertyId: v[1],
    value: v[2],
    numberValue: v[3],
    createdAt: toDate(v[4]),
    updatedAt: toDate(v[5]),
    metadata: v[6],
    property: { name: v[7], type: v[8] },
  };
}

/** An evaluation result of the page's JSON (an array: resultColumns, pageEvaluationFields) in Prisma's shape. */
function resultRow(r: unknown[]): Raw {
  return {
    id: r[0],
    evaluationId: r[1],
    transcriptId: r[2],
    status: r[3],
    runId: r[4],
    valueBoolean: toBool(r[5]),
    valueNumber: r[6],
    valueString: r[7],
    reason: r[8],
    cost: r[9],
    model: r[10],
    inputTokens: r[11],
    outputTokens: r[12],
    error: r[13],
    createdAt: toDate(r[14]),
    updatedAt: toDate(r[15]),
    evaluation: { name: r[16], description: r[17], type: r[18], minimumValue: r[19], maximumValue: r[20] },
  };
}

/**
 * The rows `loadTranscriptPage` built, for `isPageRow`. Weak, so the rows go with their request.
 */
const pageRows = new WeakSet<object>();

/**
 * Whether `row` is a row of a page this module loaded: its `propertyValues` and
 * `evaluationResults`, when present, are the whole relation in the order of the GraphQL fields
 * `properties` / `evaluations` (loaded only for a selection `pageRelationsOf` accepted, whose
 * nested selections the rows carry whole), so those fields can answer them as they stand.
 */
export function isPageRow(row: unknown): boolean {
  return typeof row === 'object' && row !== null && pageRows.has(row);
}

/**
 * A row of the page statement in Prisma's shape (transcriptColumns, then the relations; the
 * search-sql test compares the rows with Prisma's). Built as object literals, one shape per
 * model: converting the driver's and JSON.parse's objects in place (a string member becoming a
 * Date, a JSON text an array) cost V8 a change of each object's layout, and took about twice as
 * long (in process, 26 rows: 105-115 µs in place, 60 µs as literals).
 */
function transcriptRow(raw: Raw): PageRow {
  const row: PageRow = {
    id: raw.id as string,
    projectId: raw.projectId,
    environmentId: raw.environmentId,
    sessionId: raw.sessionId,
    userId: raw.userId,
    logCount: toNumber(raw.logCount),
    createdAt: toDate(raw.createdAt),
    updatedAt: toDate(raw.updatedAt),
    endedAt: toDate(raw.endedAt),
    expiresAt: toDate(raw.expiresAt),
    recordingUrl: raw.recordingUrl,
    endsWhenIdle: toBool(raw.endsWhenIdle),
    device: raw.device,
    browser: raw.browser,
    os: raw.os,
    userName: raw.userName,
    userImage: raw.userImage,
  };
  if ('propertyValues' in raw) row.propertyValues = (parsed(raw.propertyValues) as unknown[][]).map(valueRow);
  if ('evaluationResults' in raw) row.evaluationResults = (parsed(raw.evaluationResults) as unknown[][]).map(resultRow);
  pageRows.add(row);
  return row;
}

/** Runs a statement: `Db.queryRows` (the driver adapter, without Prisma's client around it). */
export type RowReader = Pick<Db, 'provider' | 'queryRows'>;

/** Loads one page (one statement). */
export async function loadTranscriptPage(
  db: RowReader,
  where: SqlWhere,
  page: { order: SortOrder; skip: number; take: number; relations: PageRelations },
): Promise<PageRow[]> {
  const { sql, params } = transcriptPageSql(db.provider, where, page);
  const rows = await db.queryRows(sql, params);
  return rows.map(transcriptRow);
}

/** The number of transcripts a search matches (one statement). */
export async function countTranscripts(db: RowReader, where: SqlWhere): Promise<number> {
  const rows = await db.queryRows(`SELECT COUNT(*) AS "n" FROM "Transcript" t WHERE ${where.sql}`, where.params);
  return Number(rows[0]?.n ?? 0);
}

// ── Which selections a page answers ─────────────────────────────────────────────────────────────

/**
 * Whether `a` is `b`, a JSON value of arrays, objects and scalars, member for member in the same
 * order (what comparing their JSON texts said, without printing both on every request). A member
 * whose value is undefined counts here, where JSON drops it: such an ordering goes to Prisma.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length !== bk.length) return false;
  for (let i = 0; i < ak.length; i++) {
    const key = ak[i] as string;
    if (key !== bk[i]) return false;
    if (!sameJson((a as Raw)[key], (b as Raw)[key])) return false;
  }
  return true;
}
const valuesOrder = [{ property: { createdAt: 'asc' } }, { propertyId: 'asc' }];
const resultsOrder = [{ evaluation: { createdAt: 'asc' } }, { evaluationId: 'asc' }];

/** A nested relation read no wider than `fields` (`{select: {…}}` of those, or nothing). */
function nestedWithin(selection: unknown, relation: string, fields: readonly string[]): boolean {
  if (selection === undefined) return true;
  const s = selection as Record<string, unknown>;
  const keys = Object.keys(s);
  if (keys.length !== 1 || keys[0] !== 'include' || typeof s.include !== 'object' || s.include === null) return false;
  const include = s.include as Record<string, unknown>;
  for (const key of Object.keys(include)) {
    if (key !== relation) return false;
    const nested = include[key] as { select?: Record<string, unknown> } | undefined;
    if (!nested || typeof nested !== 'object' || Object.keys(nested).join() !== 'select') return false;
    for (const [field, on] of Object.entries(nested.select ?? {}))
      if (on !== true || !fields.includes(field)) return false;
  }
  return true;
}

function relationWithin(value: unknown, order: unknown, relation: string, fields: readonly string[]): boolean {
  if (value === true) return true;
  if (typeof value !== 'object' || value === null) return false;
  const { orderBy, ...rest } = value as Record<string, unknown>;
  if (orderBy !== undefined && !sameJson(orderBy, order)) return false;
  return nestedWithin(Object.keys(rest).length ? rest : undefined, relation, fields);
}

/**
 * What a page must carry for plugin-prisma's query of the search's selection (`{take, skip,
 * include}`), or null when the selection asks for more than a page carries (another relation, a
 * cursor, a backward page): then the resolver asks Prisma, as before.
 */
export function pageRelationsOf(
  query: Record<string, unknown>,
): (PageRelations & { take: number; skip: number }) | null {
  const { take, skip, include, ...rest } = query;
  if (Object.keys(rest).length) return null;
  if (typeof take !== 'number' || take < 0) return null;
  if (skip !== undefined && typeof skip !== 'number') return null;
  const relations: PageRelations = { propertyValues: false, evaluationResults: false };
  if (include !== undefined) {
    if (typeof include !== 'object' || include === null) return null;
    for (const [name, value] of Object.entries(include)) {
      if (name === 'propertyValues' && relationWithin(value, valuesOrder, 'property', pagePropertyFields))
        relations.propertyValues = true;
      else if (name === 'evaluationResults' && relationWithin(value, resultsOrder, 'evaluation', pageEvaluationFields))
        relations.evaluationResults = true;
      else return null;
    }
  }
  return { ...relations, take, skip: (skip as number | undefined) ?? 0 };
}
