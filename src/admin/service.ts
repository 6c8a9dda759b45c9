import { defaultKeyScopes, formatScopes, generateApiKey, parseScopes, type Scope } from '../auth/keys';
import type { Db } from '../db/client';
import { conflict, notFound } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub, AuditEventPayload } from '../lib/pubsub';

/** Projects, environments, API keys and the audit log. Used by GraphQL resolvers and the CLI. */

export interface AdminDeps {
  db: Db;
  pubsub: AppPubSub;
  /** Called when a key stops working, so the authenticator forgets it at once. */
  onKeyInvalidated?: (keyId: string) => void;
}

export type Tx = Parameters<Parameters<Db['prisma']['$transaction']>[0]>[0];

export const defaultEnvironmentAliases = ['development', 'production'] as const;

export interface AuditInput {
  workspaceId: string;
  actor: string;
  action: string;
  targetType: string;
  targetId: string;
  data?: Record<string, unknown>;
}

/** Writes an audit log entry inside the caller's transaction; publish it after the commit. */
export async function recordAudit(tx: Tx, input: AuditInput): Promise<AuditEventPayload> {
  const row = await tx.auditEvent.create({
    data: { id: newId(), ...input, data: (input.data ?? undefined) as never },
  });
  return { ...input, id: row.id, data: input.data ?? null, createdAt: row.createdAt.toISOString() };
}

export function publishAudit(deps: Pick<AdminDeps, 'pubsub'>, events: readonly AuditEventPayload[]): void {
  for (const event of events) {
    deps.pubsub.publish('auditEvent', event.workspaceId, event);
    deps.pubsub.publish('auditEventAll', event);
  }
}

export interface CreatedKey {
  key: Awaited<ReturnType<Tx['apiKey']['create']>>;
  /** The whole key: returned once, never stored. */
  apiKey: string;
}

async function insertKey(
  tx: Tx,
  input: {
    workspaceId: string;
    projectId: string | null;
    scopes: readonly Scope[];
    name?: string | null;
    rotatedFromId?: string;
  },
): Promise<CreatedKey> {
  const generated = generateApiKey();
  const key = await tx.apiKey.create({
    data: {
      id: generated.keyId,
      workspaceId: input.workspaceId,
      projectId: input.projectId,
      name: input.name ?? null,
      secretHash: generated.secretHash,
      scopes: formatScopes(input.scopes),
      rotatedFromId: input.rotatedFromId ?? null,
    },
  });
  return { key, apiKey: generated.apiKey };
}

export async function createWorkspace(deps: AdminDeps, input: { name: string; actor: string }) {
  const [workspace, events] = await deps.db.prisma.$transaction(async (tx) => {
    const ws = await tx.workspace.create({ data: { id: newId(), name: input.name } });
    const audit = await recordAudit(tx, {
      workspaceId: ws.id,
      actor: input.actor,
      action: 'workspace.create',
      targetType: 'workspace',
      targetId: ws.id,
      data: { name: ws.name },
    });
    return [ws, [audit]] as const;
  });
  publishAudit(deps, events);
  return workspace;
}

/**
 * Creates a project with its `development` and `production` environments, and optionally its first
 * API key, in one transaction. Without `workspaceId`, a new workspace of the same name holds it.
 */
export async function createProject(
  deps: AdminDeps,
  input: {
    name: string;
    workspaceId?: string | null;
    actor: string;
    key?: { scopes?: readonly Scope[]; name?: string | null } | null;
  },
) {
  const result = await deps.db.prisma.$transaction(async (tx) => {
    const events: AuditEventPayload[] = [];
    let workspaceId = input.workspaceId ?? null;
    if (workspaceId) {
      const ws = await tx.workspace.findUnique({ where: { id: workspaceId } });
      if (!ws) throw notFound('Workspace', workspaceId);
    } else {
      const ws = await tx.workspace.create({ data: { id: newId(), name: input.name } });
      workspaceId = ws.id;
      events.push(
        await recordAudit(tx, {
          workspaceId,
          actor: input.actor,
          action: 'workspace.create',
          targetType: 'workspace',
          targetId: ws.id,
          data: { name: ws.name },
        }),
      );
    }
    const project = await tx.project.create({ data: { id: newId(), workspaceId, name: input.name } });
    const environments = [];
    for (const alias of defaultEnvironmentAliases) {
      environments.push(await tx.environment.create({ data: { id: newId(), projectId: project.id, alias } }));
    }
    events.push(
      await recordAudit(tx, {
        workspaceId,
        actor: input.actor,
        action: 'project.create',
        targetType: 'project',
        targetId: project.id,
        data: { name: project.name },
      }),
    );
    let created: CreatedKey | null = null;
    if (input.key) {
      created = await insertKey(tx, {
        workspaceId,
        projectId: project.id,
        scopes: input.key.scopes ?? defaultKeyScopes,
        name: input.key.name,
      });
      events.push(
        await recordAudit(tx, {
          workspaceId,
          actor: input.actor,
          action: 'key.create',
          targetType: 'apiKey',
          targetId: created.key.id,
          data: { projectId: project.id, scopes: parseScopes(created.key.scopes) },
        }),
      );
    }
    return { project, environments, created, events };
  });
  publishAudit(deps, result.events);
  return { project: result.project, environments: result.environments, created: result.created };
}

/** A key for one project, or (without projectId) for every project of a workspace. */
export async function createApiKey(
  deps: AdminDeps,
  input: {
    workspaceId: string;
    projectId: string | null;
    scopes?: readonly Scope[];
    name?: string | null;
    actor: string;
  },
): Promise<CreatedKey> {
  const scopes = input.scopes ?? defaultKeyScopes;
  const [created, events] = await deps.db.prisma.$transaction(async (tx) => {
    const key = await insertKey(tx, { ...input, scopes });
    const audit = await recordAudit(tx, {
      workspaceId: input.workspaceId,
      actor: input.actor,
      action: 'key.create',
      targetType: 'apiKey',
      targetId: key.key.id,
      data: { projectId: input.projectId, scopes: [...scopes].sort() },
    });
    return [key, [audit]] as const;
  });
  publishAudit(deps, events);
  return created;
}

export async function findApiKey(deps: Pick<AdminDeps, 'db'>, keyId: string) {
  const key = await deps.db.prisma.apiKey.findUnique({ where: { id: keyId } });
  if (!key) throw notFound('API key', keyId);
  return key;
}

/** Revokes a key at once. Revoking a revoked key changes nothing. */
export async function revokeApiKey(deps: AdminDeps, input: { keyId: string; actor: string }) {
  const [key, events] = await deps.db.prisma.$transaction(async (tx) => {
    const existing = await tx.apiKey.findUnique({ where: { id: input.keyId } });
    if (!existing) throw notFound('API key', input.keyId);
    if (existing.revokedAt) return [existing, []] as const;
    const updated = await tx.apiKey.update({ where: { id: input.keyId }, data: { revokedAt: new Date() } });
    const audit = await recordAudit(tx, {
      workspaceId: existing.workspaceId,
      actor: input.actor,
      action: 'key.revoke',
      targetType: 'apiKey',
      targetId: existing.id,
    });
    return [updated, [audit]] as const;
  });
  deps.onKeyInvalidated?.(input.keyId);
  publishAudit(deps, events);
  return key;
}

/**
 * Replaces a key with a new one of the same reach and scopes. The old key keeps working as the
 * secondary key for `graceSeconds` (0 revokes it at once), so clients can move over without downtime.
 */
export async function rotateApiKey(deps: AdminDeps, input: { keyId: string; graceSeconds: number; actor: string }) {
  const result = await deps.db.prisma.$transaction(async (tx) => {
    const old = await tx.apiKey.findUnique({ where: { id: input.keyId } });
    if (!old) throw notFound('API key', input.keyId);
    const now = Date.now();
    if (old.revokedAt || (old.expiresAt && old.expiresAt.getTime() <= now)) {
      throw conflict(`API key "${old.id}" no longer works and cannot be rotated; create a new key instead`);
    }
    const created = await insertKey(tx, {
      workspaceId: old.workspaceId,
      projectId: old.projectId,
      scopes: parseScopes(old.scopes),
      name: old.name,
      rotatedFromId: old.id,
    });
    const previous = await tx.apiKey.update({
      where: { id: old.id },
      data:
        input.graceSeconds === 0
          ? { revokedAt: new Date(now) }
          : { expiresAt: new Date(now + input.graceSeconds * 1000) },
    });
    const audit = await recordAudit(tx, {
      workspaceId: old.workspaceId,
      actor: input.actor,
      action: 'key.rotate',
      targetType: 'apiKey',
      targetId: old.id,
      data: { replacedBy: created.key.id, graceSeconds: input.graceSeconds },
    });
    return { created, previous, events: [audit] };
  });
  deps.onKeyInvalidated?.(input.keyId);
  publishAudit(deps, result.events);
  return { created: result.created, previous: result.previous };
}

export async function createEnvironment(deps: AdminDeps, input: { projectId: string; alias: string; actor: string }) {
  const [environment, events] = await deps.db.prisma.$transaction(async (tx) => {
    const project = await tx.project.findUnique({ where: { id: input.projectId } });
    if (!project) throw notFound('Project', input.projectId);
    const existing = await tx.environment.findUnique({
      where: { projectId_alias: { projectId: input.projectId, alias: input.alias } },
    });
    if (existing) throw conflict(`The project already has an environment named "${input.alias}"`);
    const env = await tx.environment.create({ data: { id: newId(), projectId: input.projectId, alias: input.alias } });
    const audit = await recordAudit(tx, {
      workspaceId: project.workspaceId,
      actor: input.actor,
      action: 'environment.create',
      targetType: 'environment',
      targetId: env.id,
      data: { projectId: project.id, alias: env.alias },
    });
    return [env, [audit]] as const;
  });
  publishAudit(deps, events);
  return environment;
}
