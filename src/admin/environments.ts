import type { PrismaDb } from '../db/client';
import type { Prisma } from '../generated/sqlite/client';
import { AppError, type ErrorDetail } from '../lib/errors';
import { isId } from '../lib/ids';

/**
 * Environment references (DECISIONS.md §1): wherever a request names an environment it may give
 * its ID or its alias. This module is the one place that turns such a reference into an
 * environment of a project, and the one wording of the 404 when the project has none by that name.
 *
 * Aliases never look like IDs (src/admin/validation.ts refuses them), so a reference shaped like
 * an ID is looked up by ID only, anything else by alias only.
 */

/** The environment a request runs in when it names none. */
export const defaultEnvironment = 'development';

/** A Prisma client or an interactive transaction's client: anything with the environment model. */
export type EnvironmentClient = Pick<PrismaDb, 'environment'>;

const baseSelect = { id: true, alias: true, projectId: true } as const satisfies Prisma.EnvironmentSelect;

/** The message of the 404 for an environment reference the project does not have. */
export function environmentNotFoundMessage(ref: string): string {
  return `Environment "${ref}" not found`;
}

function whereOf(projectId: string, ref: string): Prisma.EnvironmentWhereInput {
  return isId(ref) ? { projectId, id: ref } : { projectId, alias: ref };
}

/**
 * The environment of `projectId` named by `ref` (ID or alias; null or absent: `development`), or a
 * 404. `select` adds fields to the default id, alias and projectId (the runtime also reads the
 * deployment in the same query).
 */
export async function resolveEnvironment<S extends Prisma.EnvironmentSelect = typeof baseSelect>(
  client: EnvironmentClient,
  projectId: string,
  ref?: string | null,
  select?: S,
): Promise<Prisma.EnvironmentGetPayload<{ select: typeof baseSelect & S }>> {
  const wanted = ref ?? defaultEnvironment;
  const env = await client.environment.findFirst({
    where: whereOf(projectId, wanted),
    select: { ...baseSelect, ...select },
  });
  if (!env) throw new AppError('NOT_FOUND', environmentNotFoundMessage(wanted));
  return env as unknown as Prisma.EnvironmentGetPayload<{ select: typeof baseSelect & S }>;
}

/**
 * Resolves many references at once (one query), in the order given. Every reference a project
 * lacks is named in the 404's details at `pathOf(index)`; the message is the first one's.
 */
export async function resolveEnvironments(
  client: EnvironmentClient,
  refs: readonly { projectId: string; ref: string }[],
  pathOf: (index: number) => string,
): Promise<{ id: string; alias: string; projectId: string }[]> {
  if (refs.length === 0) return [];
  const unique = new Map<string, { projectId: string; ref: string }>();
  for (const r of refs) unique.set(`${r.projectId}\u0000${r.ref}`, r);
  const found = await client.environment.findMany({
    where: { OR: [...unique.values()].map((r) => whereOf(r.projectId, r.ref)) },
    select: baseSelect,
  });
  const byRef = new Map<string, (typeof found)[number]>();
  for (const env of found) {
    byRef.set(`${env.projectId}\u0000${env.id}`, env);
    byRef.set(`${env.projectId}\u0000${env.alias}`, env);
  }
  const problems: ErrorDetail[] = [];
  const resolved = refs.map((r, index) => {
    const env = byRef.get(`${r.projectId}\u0000${r.ref}`);
    if (!env) problems.push({ path: pathOf(index), message: environmentNotFoundMessage(r.ref) });
    return env;
  });
  if (problems.length) {
    throw new AppError('NOT_FOUND', `${problems[0]!.path}: ${problems[0]!.message}`, { details: problems });
  }
  return resolved as { id: string; alias: string; projectId: string }[];
}
