import { reachesProject, reachesWorkspace } from '../auth/principal';
import { AppError, notFound } from '../lib/errors';
import { isId } from '../lib/ids';
import type { Context } from './context';

/**
 * Tenant ownership: the one place that decides whether the caller reaches a project, a workspace
 * or a resource of a project. One rule (DECISIONS.md §2): a resource of a project the key does not
 * reach answers exactly as one that does not exist — same status, same code, same message — so
 * other tenants' IDs and their existence never leak. SPEC.md's usage queries answer 401 instead
 * of 404; that too is the same answer for "not yours" and "does not exist".
 *
 * Scopes are not checked here: every field declares its scope with `authScopes` (scope-auth
 * refuses before the resolver runs), so a scope is checked once.
 */

export interface ReachedProject {
  id: string;
  workspaceId: string;
  name: string;
}

export type DenyAs = 'not-found' | 'unauthorized';

/**
 * The project `projectId`, or null when there is none: a project key's own project comes with the
 * key (read and cached with it, src/auth/authenticate.ts), so checking it costs no query; any other
 * is read through the request's loader.
 */
function reachableProject(ctx: Context, projectId: string): Promise<ReachedProject | null> | ReachedProject | null {
  const p = ctx.principal;
  if (p.kind === 'key' && p.project && p.project.id === projectId) return p.project;
  return isId(projectId) ? ctx.loaders.project.load(projectId) : null;
}

/**
 * The project `projectId` if the caller reaches it; otherwise (missing or another tenant's) a 404
 * `Project "<id>" not found`, or with `denyAs: 'unauthorized'` SPEC.md's 401 of the usage query.
 */
export async function requireProject(
  ctx: Context,
  projectId: string,
  opts: { denyAs?: DenyAs } = {},
): Promise<ReachedProject> {
  const project = await reachableProject(ctx, projectId);
  if (!project || !reachesProject(ctx.principal, project)) {
    if (opts.denyAs === 'unauthorized') {
      throw new AppError('FORBIDDEN', `This API key does not have access to project "${projectId}".`);
    }
    throw notFound('Project', projectId);
  }
  return project;
}

/**
 * The project a call works on: `projectId` when given, else the project of a project key (the
 * knowledge base's default). A workspace key or the operator must name one.
 */
export async function requireProjectOrKeyProject(
  ctx: Context,
  projectId: string | null | undefined,
): Promise<ReachedProject> {
  const id = projectId ?? (ctx.principal.kind === 'key' ? ctx.principal.projectId : null);
  if (!id) {
    if (ctx.principal.kind === 'anonymous') throw new AppError('UNAUTHENTICATED', ctx.principal.reason);
    throw new AppError('VALIDATION_FAILED', 'projectID: is required with a workspace key or the operator token', {
      details: [{ path: 'projectID', message: 'is required with a workspace key or the operator token' }],
    });
  }
  return requireProject(ctx, id);
}

/** The kinds of project resources whose ID a request may name on its own (without its project). */
export type OwnedKind = 'Transcript' | 'Transcript property' | 'Evaluation' | 'Document' | 'Tag' | 'Agent version';

const ownerLookups: Record<OwnedKind, (ctx: Context, id: string) => Promise<{ projectId: string } | null>> = {
  Transcript: (ctx, id) => ctx.services.db.prisma.transcript.findUnique({ where: { id }, select: { projectId: true } }),
  'Transcript property': (ctx, id) =>
    ctx.services.db.prisma.transcriptProperty.findUnique({ where: { id }, select: { projectId: true } }),
  Evaluation: (ctx, id) => ctx.services.db.prisma.evaluation.findUnique({ where: { id }, select: { projectId: true } }),
  Document: (ctx, id) => ctx.services.db.prisma.kbDocument.findUnique({ where: { id }, select: { projectId: true } }),
  Tag: (ctx, id) => ctx.services.db.prisma.kbTag.findUnique({ where: { id }, select: { projectId: true } }),
  'Agent version': (ctx, id) =>
    ctx.services.db.prisma.agentVersion.findUnique({ where: { id }, select: { projectId: true } }),
};

/**
 * The project of a resource the caller reaches. Missing, or of a project the key does not reach:
 * the same 404 `<Kind> "<id>" not found`, never the project's.
 */
export async function requireOwned(ctx: Context, kind: OwnedKind, id: string): Promise<ReachedProject> {
  const row = isId(id) ? await ownerLookups[kind](ctx, id) : null;
  const project = row ? await reachableProject(ctx, row.projectId) : null;
  if (!project || !reachesProject(ctx.principal, project)) throw notFound(kind, id);
  return project;
}

/**
 * An API key the caller administers: a project key of a project it reaches, or a workspace key of
 * a workspace it reaches; otherwise the same 404 as an unknown key.
 */
export async function requireApiKey(ctx: Context, keyId: string) {
  const key = isId(keyId) ? await ctx.services.db.prisma.apiKey.findUnique({ where: { id: keyId } }) : null;
  const reaches =
    key !== null &&
    (key.projectId
      ? reachesProject(ctx.principal, { id: key.projectId, workspaceId: key.workspaceId })
      : reachesWorkspace(ctx.principal, key.workspaceId));
  if (!key || !reaches) throw notFound('API key', keyId);
  return key;
}

/**
 * The workspace the caller administers: the operator names one; a workspace key has its own (and
 * naming another answers as an unknown workspace); a project key administers no workspace.
 */
export function requireWorkspace(ctx: Context, workspaceId: string | null): string {
  const p = ctx.principal;
  if (p.kind === 'operator') {
    if (!workspaceId) throw new AppError('VALIDATION_FAILED', 'workspaceID is required for the operator');
    return workspaceId;
  }
  if (p.kind === 'key' && p.projectId === null) {
    if (workspaceId && workspaceId !== p.workspaceId) throw notFound('Workspace', workspaceId);
    return p.workspaceId;
  }
  throw new AppError('INSUFFICIENT_SCOPE', 'A project key cannot administer a workspace; use a workspace key.');
}

/**
 * A workspace named to narrow a listing: the operator may name any; a key only its own — another
 * workspace answers as an unknown one.
 */
export function requireWorkspaceFilter(ctx: Context, workspaceId: string | null): string | null {
  const p = ctx.principal;
  if (workspaceId && p.kind === 'key' && workspaceId !== p.workspaceId) throw notFound('Workspace', workspaceId);
  return workspaceId;
}
