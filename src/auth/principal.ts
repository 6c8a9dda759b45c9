import type { Scope } from './keys';

/** A project as the ownership checks need it (src/graphql/access.ts `ReachedProject`). */
export interface KeyProject {
  id: string;
  workspaceId: string;
  name: string;
}

/** Who is calling. Resolved once per request from the Authorization header. */
export type Principal =
  | { kind: 'anonymous'; reason: string }
  /** The operator, holding ADMIN_TOKEN: every scope on every workspace. */
  | { kind: 'operator' }
  | {
      kind: 'key';
      keyId: string;
      workspaceId: string;
      /** Null for a workspace key. */
      projectId: string | null;
      /** The project of a project key, read and cached with the key; null for a workspace key. */
      project: KeyProject | null;
      scopes: ReadonlySet<Scope>;
    };

export function hasScope(principal: Principal, scope: Scope): boolean {
  if (principal.kind === 'operator') return true;
  return principal.kind === 'key' && principal.scopes.has(scope);
}

export function reachesProject(principal: Principal, project: { id: string; workspaceId: string }): boolean {
  if (principal.kind === 'operator') return true;
  if (principal.kind !== 'key') return false;
  return principal.projectId === null
    ? principal.workspaceId === project.workspaceId
    : principal.projectId === project.id;
}

export function reachesWorkspace(principal: Principal, workspaceId: string): boolean {
  if (principal.kind === 'operator') return true;
  return principal.kind === 'key' && principal.projectId === null && principal.workspaceId === workspaceId;
}

/** How an action is recorded in the audit log. */
export function actorOf(principal: Principal): string {
  switch (principal.kind) {
    case 'operator':
      return 'operator';
    case 'key':
      return `key:${principal.keyId}`;
    default:
      return 'anonymous';
  }
}
