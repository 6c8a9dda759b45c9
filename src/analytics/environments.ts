import { environmentNotFoundMessage, resolveEnvironments } from '../admin/environments';
import type { Db } from '../db/client';
import { AppError, type ErrorDetail } from '../lib/errors';
import { isId } from '../lib/ids';

/**
 * Resolves `projectEnvironmentIDOrAlias` (IDs or aliases, DECISIONS.md §1) to environment IDs of
 * the project; null stays null (every environment). An environment ID of a project the caller does
 * not reach is a 401, as a foreign `projectID` is (SPEC.md "Errors": a usage query whose key lacks
 * permission for some of the requested resources); any other name the project does not have is a
 * 404, so a typo is not mistaken for "no usage".
 */
export async function resolveEnvironmentFilter(
  db: Db,
  projectId: string,
  idsOrAliases: readonly string[] | null,
): Promise<string[] | null> {
  if (idsOrAliases === null) return null;
  const wanted = [...new Set(idsOrAliases)];
  try {
    const found = await resolveEnvironments(
      db.prisma,
      wanted.map((ref) => ({ projectId, ref })),
      () => 'filter.projectEnvironmentIDOrAlias',
    );
    return [...new Set(found.map((e) => e.id))].sort();
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'NOT_FOUND') throw err;
    // An environment ID that is not the project's is a permission problem (401, as a foreign
    // projectID is), whether it belongs to a project the caller does not reach or to none, so the
    // answer does not tell other tenants' IDs from made-up ones. A name that is no ID stays a 404.
    const own = await db.prisma.environment.findMany({
      where: { projectId, OR: [{ id: { in: wanted } }, { alias: { in: wanted } }] },
      select: { id: true, alias: true },
    });
    const foreign = wanted.filter((w) => isId(w) && !own.some((e) => e.id === w || e.alias === w));
    if (foreign.length) {
      throw new AppError('FORBIDDEN', `This API key does not have access to environment "${foreign[0]}".`, {
        details: foreign.map((id) => ({
          path: 'filter.projectEnvironmentIDOrAlias',
          message: `this API key does not have access to environment "${id}"`,
        })),
      });
    }
    throw err;
  }
}

/**
 * Resolves the environment (ID or alias) of each ingested event, for the projects named (already
 * checked as the caller's). Returns the IDs in the events' order; a name a project lacks is a 404
 * naming every such event, worded as `resolveEnvironments` words it (an ID-shaped reference is
 * looked up by ID, anything else by alias: DECISIONS.md §1). Once per ingestion batch, so it reads
 * the projects' environments with one statement through `db.queryRows` rather than Prisma's client.
 */
export async function resolveEventEnvironments(
  db: Db,
  events: readonly { projectId: string; environment: string }[],
  pathOf: (index: number) => string,
): Promise<string[]> {
  if (events.length === 0) return [];
  const projects = [...new Set(events.map((e) => e.projectId))];
  const placeholders = projects.map((_, i) => (db.provider === 'postgresql' ? `$${i + 1}` : '?')).join(', ');
  const rows = await db.queryRows(
    `SELECT "id", "alias", "projectId" FROM "Environment" WHERE "projectId" IN (${placeholders})`,
    projects,
  );
  const byRef = new Map<string, string>();
  for (const row of rows) {
    const id = String(row.id);
    byRef.set(`${row.projectId}\u0000id\u0000${id}`, id);
    byRef.set(`${row.projectId}\u0000alias\u0000${row.alias}`, id);
  }
  // Each (project, reference) pair is looked up once: a batch names a few pairs many times over.
  const resolved = new Map<string, Map<string, string | undefined>>();
  const problems: ErrorDetail[] = [];
  const ids = new Array<string>(events.length);
  for (let index = 0; index < events.length; index++) {
    const e = events[index]!;
    let ofProject = resolved.get(e.projectId);
    if (ofProject === undefined) {
      ofProject = new Map();
      resolved.set(e.projectId, ofProject);
    }
    let id = ofProject.get(e.environment);
    if (id === undefined && !ofProject.has(e.environment)) {
      id = byRef.get(`${e.projectId}\u0000${isId(e.environment) ? 'id' : 'alias'}\u0000${e.environment}`);
      ofProject.set(e.environment, id);
    }
    if (id === undefined) problems.push({ path: pathOf(index), message: environmentNotFoundMessage(e.environment) });
    ids[index] = id ?? '';
  }
  if (problems.length) {
    throw new AppError('NOT_FOUND', `${problems[0]!.path}: ${problems[0]!.message}`, { details: problems });
  }
  return ids;
}
