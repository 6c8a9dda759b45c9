import type { Scope } from '../auth/keys';
import { hasScope, reachesProject } from '../auth/principal';
import { AppError, notFound } from '../lib/errors';
import { isId } from '../lib/ids';
import type { Context } from './context';

export type DenyAs = 'not-found' | 'unauthorized';

/**
 * Loads a project the caller may act on with `scope` (null: any scope, the key need only reach it). A project the key does not reach answers as
 * if it did not exist (404), so other tenants' IDs never leak; the usage query, which SPEC.md
 * answers with 401, passes `denyAs: 'unauthorized'`.
 */
export async function requireProject(
  ctx: Context,
  projectId: string,
  scope: Scope | null,
  opts: { denyAs?: DenyAs } = {},
): Promise<{ id: string; workspaceId: string; name: string }> {
  if (scope && !hasScope(ctx.principal, scope)) {
    throw new AppError('INSUFFICIENT_SCOPE', `This API key lacks the "${scope}" scope.`);
  }
  const project = isId(projectId) ? await ctx.loaders.project.load(projectId) : null;
  if (!project || !reachesProject(ctx.principal, project)) {
    if (opts.denyAs === 'unauthorized') {
      throw new AppError('FORBIDDEN', `This API key does not have access to project "${projectId}".`);
    }
    throw notFound('Project', projectId);
  }
  return project;
}
