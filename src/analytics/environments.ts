import type { Db } from '../db/client';
import { AppError, type ErrorDetail } from '../lib/errors';

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
  reaches: (project: { id: string; workspaceId: string }) => boolean,
): Promise<string[] | null> {
  if (idsOrAliases === null) return null;
  const wanted = [...new Set(idsOrAliases)];
  const found = await db.prisma.environment.findMany({
    where: { projectId, OR: [{ id: { in: wanted } }, { alias: { in: wanted } }] },
    select: { id: true, alias: true },
  });
  const missing = wanted.filter((w) => !found.some((e) => e.id === w || e.alias === w));
  if (missing.length) {
    const elsewhere = await db.prisma.environment.findMany({
      where: { id: { in: missing } },
      select: { id: true, project: { select: { id: true, workspaceId: true } } },
    });
    const foreign = elsewhere.filter((e) => !reaches(e.project)).map((e) => e.id);
    if (foreign.length) {
      throw new AppError('FORBIDDEN', `This API key does not have access to environment "${foreign[0]}".`, {
        details: foreign.map((id) => ({
          path: 'filter.projectEnvironmentIDOrAlias',
          message: `this API key does not have access to environment "${id}"`,
        })),
      });
    }
    throw new AppError('NOT_FOUND', `The project has no environment "${missing[0]}"`, {
      details: missing.map((m) => ({
        path: 'filter.projectEnvironmentIDOrAlias',
        message: `the project has no environment "${m}"`,
      })),
    });
  }
  return [...new Set(found.map((e) => e.id))].sort();
}

/**
 * Resolves the environment (ID or alias) of each ingested event, for the projects named. Returns
 * the IDs in the events' order; a name a project lacks is a 404 naming every such event.
 */
export async function resolveEventEnvironments(
  db: Db,
  events: readonly { projectId: string; environment: string }[],
  pathOf: (index: number) => string,
): Promise<string[]> {
  const projectIds = [...new Set(events.map((e) => e.projectId))];
  const environments = await db.prisma.environment.findMany({
    where: { projectId: { in: projectIds } },
    select: { id: true, alias: true, projectId: true },
  });
  const byProject = new Map<string, Map<string, string>>();
  for (const env of environments) {
    const names = byProject.get(env.projectId) ?? new Map<string, string>();
    names.set(env.id, env.id);
    names.set(env.alias, env.id);
    byProject.set(env.projectId, names);
  }
  const problems: ErrorDetail[] = [];
  const ids = events.map((e, index) => {
    const id = byProject.get(e.projectId)?.get(e.environment);
    if (!id) problems.push({ path: pathOf(index), message: `the project has no environment "${e.environment}"` });
    return id ?? '';
  });
  if (problems.length) {
    throw new AppError('NOT_FOUND', `${problems[0]!.path}: ${problems[0]!.message}`, { details: problems });
  }
  return ids;
}
