import { resolveEnvironments } from '../admin/environments';
import type { Db } from '../db/client';

/**
 * Resolves `projectEnvironmentIDOrAlias` (IDs or aliases, DECISIONS.md §1) to environment IDs of
 * the project; null stays null (every environment). A name the project does not have is a 404, so
 * a typo is not mistaken for "no usage".
 */
export async function resolveEnvironmentFilter(
  db: Db,
  projectId: string,
  idsOrAliases: readonly string[] | null,
): Promise<string[] | null> {
  if (idsOrAliases === null) return null;
  const wanted = [...new Set(idsOrAliases)];
  const found = await resolveEnvironments(
    db.prisma,
    wanted.map((ref) => ({ projectId, ref })),
    () => 'filter.projectEnvironmentIDOrAlias',
  );
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
  const found = await resolveEnvironments(
    db.prisma,
    events.map((e) => ({ projectId: e.projectId, ref: e.environment })),
    pathOf,
  );
  return found.map((e) => e.id);
}
