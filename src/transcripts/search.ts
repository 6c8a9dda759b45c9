import type { Provider } from '../db/schema-source';
import type { PrismaTx } from '../db/transaction';
import type { Prisma } from '../generated/sqlite/client';
import { type ErrorDetail, validationError } from '../lib/errors';
import { isId } from '../lib/ids';
import type { FilterOp, SearchCriteria, SortOrder, TranscriptFilter } from './validation';

/**
 * Compiles the search criteria of DECISIONS.md §5 into one Prisma `where` on Transcript, so the
 * database answers the search from its indexes: project and creation time lead
 * (`Transcript(projectId, createdAt, id)`), property and evaluation filters become EXISTS / NOT
 * EXISTS subqueries on `TranscriptPropertyValue(propertyId, value | numberValue)` and
 * `EvaluationResult(evaluationId, status, value…)`. Nothing is filtered in memory.
 *
 * Semantics of the filter ops (docs/transcripts.md): `neq` and `nin` also match transcripts without
 * a value (as MongoDB's $ne and $nin, and the knowledge-base filters, do); every other op needs a
 * value; `exists` / `not_exists` test whether there is one. Evaluation filters look at finished
 * results (status `done`) only.
 */

export interface FilterTarget {
  kind: 'property' | 'evaluation';
  /** string | number | boolean */
  type: string;
}

/** The properties and evaluations of the project that the filters name (one query each). */
export async function loadFilterTargets(
  tx: PrismaTx,
  projectId: string,
  filters: readonly TranscriptFilter[],
): Promise<Map<string, FilterTarget>> {
  const ids = [...new Set(filters.map((f) => f.id))];
  const targets = new Map<string, FilterTarget>();
  if (ids.length === 0) return targets;
  const [properties, evaluations] = await Promise.all([
    tx.transcriptProperty.findMany({ where: { projectId, id: { in: ids } }, select: { id: true, type: true } }),
    tx.evaluation.findMany({ where: { projectId, id: { in: ids } }, select: { id: true, type: true } }),
  ]);
  for (const p of properties) targets.set(p.id, { kind: 'property', type: p.type });
  for (const e of evaluations) targets.set(e.id, { kind: 'evaluation', type: e.type });
  return targets;
}

export type Column = 'value' | 'numberValue' | 'valueNumber' | 'valueBoolean' | 'valueString';

const allowedOps: Record<string, readonly FilterOp[]> = {
  string: ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'nin', 'contains', 'exists', 'not_exists'],
  number: ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'nin', 'exists', 'not_exists'],
  boolean: ['eq', 'neq', 'in', 'nin', 'exists', 'not_exists'],
};

class FilterProblem extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

function coerce(type: string, column: Column, value: unknown, path: string): string | number | boolean {
  if (type === 'number') {
    const n =
      typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN;
    if (!Number.isFinite(n)) throw new FilterProblem(path, 'must be a number for a number property or evaluation');
    return n;
  }
  if (type === 'boolean') {
    const b = value === true || value === 'true' ? true : value === false || value === 'false' ? false : null;
    if (b === null) throw new FilterProblem(path, 'must be true or false for a boolean property or evaluation');
    // Property values store booleans as the text true/false; evaluation results as booleans.
    return column === 'value' ? String(b) : b;
  }
  return String(value);
}

function columnOf(target: FilterTarget): Column {
  if (target.kind === 'property') return target.type === 'number' ? 'numberValue' : 'value';
  return target.type === 'number' ? 'valueNumber' : target.type === 'boolean' ? 'valueBoolean' : 'valueString';
}

/** A filter checked against its target and its values coerced: what both compilers (Prisma, SQL) start from. */
export interface ResolvedFilter {
  kind: 'property' | 'evaluation';
  id: string;
  column: Column;
  /** neq, nin, not_exists: the transcript has no value that matches the condition. */
  negate: boolean;
  /** null: any value (exists / not_exists). */
  condition:
    | { op: 'equals' | 'gt' | 'gte' | 'lt' | 'lte'; value: string | number | boolean }
    | { op: 'between'; low: string | number | boolean; high: string | number | boolean }
    | { op: 'in'; values: (string | number | boolean)[] }
    | { op: 'contains'; value: string }
    | null;
}

function resolveFilter(filter: TranscriptFilter, index: number, targets: Map<string, FilterTarget>): ResolvedFilter {
  const target = targets.get(filter.id);
  if (!target)
    throw new FilterProblem(`filters.${index}.id`, 'no transcript property or evaluation of this project has this ID');
  if (!allowedOps[target.type]?.includes(filter.op)) {
    throw new FilterProblem(`filters.${index}.op`, `"${filter.op}" does not apply to a ${target.type} ${target.kind}`);
  }
  const column = columnOf(target);
  const at = `filters.${index}.value`;
  const one = () => coerce(target.type, column, filter.value, at);
  const list = () => (filter.value as unknown[]).map((v, i) => coerce(target.type, column, v, `${at}.${i}`));
  let condition: ResolvedFilter['condition'] = null;
  switch (filter.op) {
    case 'eq':
    case 'neq':
      condition = { op: 'equals', value: one() };
      break;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      condition = { op: filter.op, value: one() };
      break;
    case 'between': {
      const [low, high] = list();
      condition = { op: 'between', low: low as string | number | boolean, high: high as string | number | boolean };
      break;
    }
    case 'in':
    case 'nin':
      condition = { op: 'in', values: list() };
      break;
    case 'contains':
      condition = { op: 'contains', value: String(filter.value) };
      break;
    case 'exists':
    case 'not_exists':
      condition = null;
      break;
  }
  const negate = filter.op === 'neq' || filter.op === 'nin' || filter.op === 'not_exists';
  return { kind: target.kind, id: filter.id, column, negate, condition };
}

function prismaFilter(f: ResolvedFilter, provider: Provider): Prisma.TranscriptWhereInput {
  const c = f.condition;
  let match: Record<string, unknown> = {};
  if (c?.op === 'in' && f.column === 'valueBoolean') {
    // Prisma's boolean filter has no `in`: one equality per listed value.
    match = { OR: c.values.map((value) => ({ valueBoolean: value })) };
  } else if (c) {
    const condition =
      c.op === 'between'
        ? { gte: c.low, lte: c.high }
        : c.op === 'in'
          ? { in: c.values }
          : c.op === 'contains'
            ? // SQLite's LIKE ignores ASCII case; PostgreSQL needs ILIKE for the same answer.
              { contains: c.value, ...(provider === 'postgresql' ? { mode: 'insensitive' } : {}) }
            : { [c.op]: c.value };
    match = { [f.column]: condition };
  }
  if (f.kind === 'property') {
    const where = { propertyId: f.id, ...match };
    return { propertyValues: f.negate ? { none: where } : { some: where } };
  }
  const where = { evaluationId: f.id, status: 'done', ...match };
  return { evaluationResults: f.negate ? { none: where } : { some: where } };
}

/** Resolves every filter, or throws a 400 naming each one that cannot apply. */
export function resolveFilters(
  filters: readonly TranscriptFilter[] | null | undefined,
  targets: Map<string, FilterTarget>,
): ResolvedFilter[] {
  const problems: ErrorDetail[] = [];
  const resolved: ResolvedFilter[] = [];
  (filters ?? []).forEach((filter, index) => {
    try {
      resolved.push(resolveFilter(filter, index, targets));
    } catch (err) {
      if (!(err instanceof FilterProblem)) throw err;
      problems.push({ path: err.path, message: err.message });
    }
  });
  if (problems.length) throw validationError(`${problems[0]!.path}: ${problems[0]!.message}`, problems);
  return resolved;
}

/** The `where` of a search; throws a 400 naming every filter that cannot apply. */
export function buildTranscriptWhere(
  projectId: string,
  criteria: SearchCriteria | null | undefined,
  targets: Map<string, FilterTarget>,
  provider: Provider,
): Prisma.TranscriptWhereInput {
  const c = criteria ?? {};
  const and: Prisma.TranscriptWhereInput[] = [];
  if (c.sessionID) and.push({ sessionId: c.sessionID });
  if (c.userID) and.push({ userId: c.userID });
  if (c.environmentID) {
    and.push(isId(c.environmentID) ? { environmentId: c.environmentID } : { environment: { alias: c.environmentID } });
  }
  if (c.startDate || c.endDate) {
    and.push({ createdAt: { ...(c.startDate ? { gte: c.startDate } : {}), ...(c.endDate ? { lt: c.endDate } : {}) } });
  }
  if (c.updatedAfter || c.updatedBefore) {
    and.push({
      updatedAt: {
        ...(c.updatedAfter ? { gte: c.updatedAfter } : {}),
        ...(c.updatedBefore ? { lt: c.updatedBefore } : {}),
      },
    });
  }
  if (c.ended === true) and.push({ endedAt: { not: null } });
  if (c.ended === false) and.push({ endedAt: null });
  for (const filter of resolveFilters(c.filters, targets)) and.push(prismaFilter(filter, provider));
  return and.length ? { projectId, AND: and } : { projectId };
}

/** Loads what the filters name and compiles the criteria (one or two small queries, then SQL). */
export async function compileTranscriptSearch(
  tx: PrismaTx,
  provider: Provider,
  projectId: string,
  criteria: SearchCriteria | null | undefined,
): Promise<Prisma.TranscriptWhereInput> {
  const targets = await loadFilterTargets(tx, projectId, criteria?.filters ?? []);
  return buildTranscriptWhere(projectId, criteria, targets, provider);
}

/** Newest (DESC) or oldest (ASC) first, ties broken by ID, so pages never overlap. */
export function transcriptOrderBy(order: SortOrder = 'DESC'): Prisma.TranscriptOrderByWithRelationInput[] {
  const dir = order === 'ASC' ? 'asc' : 'desc';
  return [{ createdAt: dir }, { id: dir }];
}
