import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { z } from 'zod';
import { publishAudit, recordAudit } from '../admin/service';
import type { Db } from '../db/client';
import { AppError, conflict, notFound, validationError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub } from '../lib/pubsub';
import { keyIdOf, type SecretBox } from '../lib/secret-box';
import type { IntegrationPool } from './integration-pool';
import type { IntegrationAccess, IntegrationTool, TurnScope } from './steps/step-type';

/**
 * MCP servers as integrations (docs/agent-step.md "MCP servers"): a project registers servers
 * (name, Streamable HTTP URL, headers that may hold credentials), and agent steps list and call
 * their tools through the official MCP TypeScript SDK. Every request goes through the runtime's
 * outbound fetch, so private and loopback addresses are refused unless RUNTIME_ALLOW_PRIVATE_URLS
 * allows them, as for API steps.
 */

export const integrationNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,40}$/, 'must be 1 to 40 letters, digits, "_" or "-"')
  .describe('What agent steps name it by.');

export const integrationUrlSchema = z
  .string()
  .max(2000)
  .refine((text) => {
    try {
      const url = new URL(text);
      return url.protocol === 'http:' || url.protocol === 'https:';
    } catch {
      return false;
    }
  }, 'must be an http(s) URL');

export const integrationHeadersSchema = z
  .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name'), z.string().max(4000))
  .refine((h) => Object.keys(h).length <= 20, 'at most 20 headers');

export interface IntegrationDeps {
  db: Db;
  pubsub: AppPubSub;
  /** Seals header values at rest (INTEGRATION_SECRETS_KEY); null when no key is configured. */
  integrationSecrets: SecretBox | null;
}

export interface IntegrationRow {
  id: string;
  projectId: string;
  name: string;
  url: string;
  headers: Record<string, string>;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * How header values are stored (docs/agent-step.md "Credentials at rest"): `{}` when there are
 * none; `{"sealed:v1": "<AES-256-GCM value>"}` (the JSON of all headers, sealed with the row's ID
 * as context) when a key is configured; the plain `{name: value}` object only in rows written
 * before encryption existed (read as they are, sealed at the next start with a key). The member
 * name holds a colon, which no header name can, so the two forms cannot be confused.
 */
const sealedMember = 'sealed:v1';
const headerContext = (id: string) => `integration-headers:${id}`;

/** Header values to store: sealed, or refused without a key (credentials are never stored in clear). */
export function sealHeaders(
  box: SecretBox | null,
  id: string,
  headers: Record<string, string>,
): Record<string, string> {
  if (Object.keys(headers).length === 0) return {};
  if (!box) {
    throw validationError(
      'Header values of integrations are stored encrypted: set INTEGRATION_SECRETS_KEY (32 bytes, hex or base64) on the server first',
      [{ path: 'headers', message: 'needs INTEGRATION_SECRETS_KEY on the server' }],
    );
  }
  return { [sealedMember]: box.seal(JSON.stringify(headers), headerContext(id)) };
}

/** Whether stored headers are in the plain form of rows written before encryption existed. */
export const hasPlainHeaders = (stored: unknown) =>
  !!stored && typeof stored === 'object' && Object.keys(stored).length > 0 && !(sealedMember in stored);

export function openHeaders(box: SecretBox | null, id: string, stored: unknown): Record<string, string> {
  const value = (stored ?? {}) as Record<string, string>;
  const sealed = value[sealedMember];
  if (sealed === undefined) return value;
  // The server's configuration, not the request, is at fault: 503 with what to set, rather than
  // an unexpected error (and never the credentials of another key's reading).
  if (!box) {
    throw new AppError(
      'SERVICE_UNAVAILABLE',
      `The header values of integration "${id}" are encrypted and this server has no INTEGRATION_SECRETS_KEY`,
    );
  }
  try {
    return JSON.parse(box.open(sealed, headerContext(id))) as Record<string, string>;
  } catch (err) {
    throw new AppError(
      'SERVICE_UNAVAILABLE',
      `The header values of integration "${id}" cannot be decrypted with this server's keys (${(err as Error).message}); add the key that sealed them to INTEGRATION_SECRETS_PREVIOUS_KEYS`,
    );
  }
}

const rowOf = (box: SecretBox | null, row: { headers: unknown } & Omit<IntegrationRow, 'headers'>): IntegrationRow => ({
  ...row,
  headers: openHeaders(box, row.id, row.headers),
});

/**
 * Brings stored header values to the configured key (run at start, and by `parley secrets
 * reseal`): rows written in clear before encryption existed are sealed, and rows sealed with a
 * previous key (INTEGRATION_SECRETS_PREVIOUS_KEYS) are sealed again with INTEGRATION_SECRETS_KEY.
 * Each row is rewritten only if it is unchanged since it was read (another instance starting at
 * the same time may have done it already). Returns the counts, the rows still in clear (without a
 * key), and the IDs of rows sealed with a key the box does not hold (left as they are).
 */
export async function sealStoredIntegrationHeaders(
  deps: Pick<IntegrationDeps, 'db' | 'integrationSecrets'>,
): Promise<{ sealed: number; resealed: number; plain: number; unreadable: string[] }> {
  const rows = await deps.db.prisma.integration.findMany({ select: { id: true, headers: true, updatedAt: true } });
  const box = deps.integrationSecrets;
  const plain = rows.filter((r) => hasPlainHeaders(r.headers));
  const sealedWith = (r: (typeof rows)[number]) => {
    const value = (r.headers as Record<string, string> | null)?.[sealedMember];
    return typeof value === 'string' ? keyIdOf(value) : null;
  };
  const sealedRows = rows.filter((r) => sealedWith(r) !== null);
  const opens = (keyId: string) => !!box && (keyId === box.keyId || box.previousKeyIds.includes(keyId));
  const unreadable = sealedRows.filter((r) => !opens(sealedWith(r)!));
  if (!box) return { sealed: 0, resealed: 0, plain: plain.length, unreadable: unreadable.map((r) => r.id) };
  const rewrite = async (row: (typeof rows)[number], headers: Record<string, string>) =>
    (
      await deps.db.prisma.integration.updateMany({
        where: { id: row.id, updatedAt: row.updatedAt },
        // updatedAt is the row's own: re-sealing changes how it is stored, not what it holds.
        data: { headers: sealHeaders(box, row.id, headers), updatedAt: row.updatedAt },
      })
    ).count;
  let sealed = 0;
  for (const row of plain) sealed += await rewrite(row, row.headers as Record<string, string>);
  let resealed = 0;
  for (const row of sealedRows) {
    const keyId = sealedWith(row)!;
    if (keyId === box.keyId || !opens(keyId)) continue;
    resealed += await rewrite(row, openHeaders(box, row.id, row.headers));
  }
  return { sealed, resealed, plain: plain.length - sealed, unreadable: unreadable.map((r) => r.id) };
}

const isUniqueViolation = (err: unknown) => (err as { code?: string } | null)?.code === 'P2002';

export async function listIntegrations(
  deps: Pick<IntegrationDeps, 'db' | 'integrationSecrets'>,
  projectId: string,
): Promise<IntegrationRow[]> {
  const rows = await deps.db.prisma.integration.findMany({ where: { projectId }, orderBy: { name: 'asc' } });
  return rows.map((row) => rowOf(deps.integrationSecrets, row));
}

export async function createIntegration(
  deps: IntegrationDeps,
  input: { projectId: string; name: string; url: string; headers?: Record<string, string>; actor: string },
): Promise<IntegrationRow> {
  try {
    const [row, audit] = await deps.db.prisma.$transaction(async (tx) => {
      const project = await tx.project.findUnique({ where: { id: input.projectId } });
      if (!project) throw notFound('Project', input.projectId);
      const id = newId();
      const created = await tx.integration.create({
        data: {
          id,
          projectId: input.projectId,
          name: input.name,
          url: input.url,
          headers: sealHeaders(deps.integrationSecrets, id, input.headers ?? {}),
        },
      });
      const event = await recordAudit(tx, {
        workspaceId: project.workspaceId,
        actor: input.actor,
        action: 'integration.create',
        targetType: 'integration',
        targetId: created.id,
        // Header names only: their values may be credentials.
        data: {
          projectId: input.projectId,
          name: input.name,
          url: input.url,
          headers: Object.keys(input.headers ?? {}),
        },
      });
      return [created, event] as const;
    });
    publishAudit(deps, [audit]);
    return rowOf(deps.integrationSecrets, row);
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`The project already has an integration named "${input.name}"`);
    throw err;
  }
}

export async function updateIntegration(
  deps: IntegrationDeps,
  input: {
    id: string;
    projectId: string;
    name?: string;
    url?: string;
    headers?: Record<string, string>;
    actor: string;
  },
): Promise<IntegrationRow> {
  try {
    const [row, audit] = await deps.db.prisma.$transaction(async (tx) => {
      const existing = await tx.integration.findUnique({ where: { id: input.id }, include: { project: true } });
      if (!existing || existing.projectId !== input.projectId) throw notFound('Integration', input.id);
      const updated = await tx.integration.update({
        where: { id: input.id },
        data: {
          ...(input.name !== undefined && { name: input.name }),
          ...(input.url !== undefined && { url: input.url }),
          ...(input.headers !== undefined && {
            headers: sealHeaders(deps.integrationSecrets, input.id, input.headers),
          }),
        },
      });
      const event = await recordAudit(tx, {
        workspaceId: existing.project.workspaceId,
        actor: input.actor,
        action: 'integration.update',
        targetType: 'integration',
        targetId: input.id,
        data: {
          projectId: input.projectId,
          name: updated.name,
          url: updated.url,
          headers: Object.keys(input.headers ?? openHeaders(deps.integrationSecrets, input.id, updated.headers)),
        },
      });
      return [updated, event] as const;
    });
    publishAudit(deps, [audit]);
    return rowOf(deps.integrationSecrets, row);
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`The project already has an integration named "${input.name}"`);
    throw err;
  }
}

export async function deleteIntegration(
  deps: IntegrationDeps,
  input: { id: string; projectId: string; actor: string },
): Promise<IntegrationRow> {
  const [row, audit] = await deps.db.prisma.$transaction(async (tx) => {
    const existing = await tx.integration.findUnique({ where: { id: input.id }, include: { project: true } });
    if (!existing || existing.projectId !== input.projectId) throw notFound('Integration', input.id);
    await tx.integration.delete({ where: { id: input.id } });
    const event = await recordAudit(tx, {
      workspaceId: existing.project.workspaceId,
      actor: input.actor,
      action: 'integration.delete',
      targetType: 'integration',
      targetId: input.id,
      data: { projectId: input.projectId, name: existing.name },
    });
    return [existing, event] as const;
  });
  publishAudit(deps, [audit]);
  // The row is gone whatever its headers: a value that no longer opens is answered as none.
  let headers: Record<string, string> = {};
  try {
    headers = openHeaders(deps.integrationSecrets, row.id, row.headers);
  } catch {}
  return { ...row, headers };
}

export interface IntegrationClientOptions {
  db: Db;
  integrationSecrets: SecretBox | null;
  /** The MCP sessions, kept open per integration (./integration-pool.ts). */
  pool: IntegrationPool;
  /** Longest wait for one MCP request (listing or a call), in milliseconds. */
  timeoutMs: number;
}

/** Text of an MCP tool result: its text parts, else its structured content, else a JSON dump. */
function resultText(result: { content?: unknown; structuredContent?: unknown }): string {
  const parts = Array.isArray(result.content) ? result.content : [];
  const texts = parts.flatMap((p: { type?: string; text?: unknown }) =>
    p?.type === 'text' && typeof p.text === 'string' ? [p.text] : [],
  );
  if (texts.length) return texts.join('\n');
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return JSON.stringify(parts);
}

/**
 * The integrations of one turn's project. Listings and calls go through the pooled session of
 * each integration (./integration-pool.ts): a server is initialised once, not per call.
 */
export function createIntegrationAccess(opts: IntegrationClientOptions): (scope: TurnScope) => IntegrationAccess {
  return (scope) => {
    const rows = new Map<string, Promise<IntegrationRow>>();
    const find = (name: string) => {
      let row = rows.get(name);
      if (!row) {
        row = opts.db.prisma.integration
          .findUnique({ where: { projectId_name: { projectId: scope.projectId, name } } })
          .then((found) => {
            if (!found) throw new Error(`the project has no MCP server named "${name}"`);
            return rowOf(opts.integrationSecrets, found);
          });
        row.catch(() => {});
        rows.set(name, row);
      }
      return row;
    };
    async function withClient<T>(
      name: string,
      retry: 'always' | 'session-lost',
      work: (client: Client) => Promise<T>,
    ): Promise<T> {
      const row = await find(name);
      try {
        return await opts.pool.use({ id: row.id, url: row.url, headers: row.headers }, work, { retry });
      } catch (err) {
        const e = err as Error & { cause?: Error };
        const reason = e.cause?.message ?? e.message;
        throw new Error(`MCP server "${name}": ${reason}`);
      }
    }
    return {
      listTools: (server, signal) =>
        withClient(server, 'always', async (client) => {
          const tools: IntegrationTool[] = [];
          let cursor: string | undefined;
          do {
            const page = await client.listTools(cursor ? { cursor } : undefined, { signal, timeout: opts.timeoutMs });
            for (const t of page.tools) {
              tools.push({
                name: t.name,
                description: t.description ?? '',
                inputSchema: t.inputSchema as Record<string, unknown>,
              });
            }
            cursor = page.nextCursor;
          } while (cursor && tools.length < 500);
          return tools;
        }),
      callTool: (server, tool, args, signal) =>
        withClient(server, 'session-lost', async (client) => {
          const result = await client.callTool({ name: tool, arguments: args }, undefined, {
            signal,
            timeout: opts.timeoutMs,
          });
          return { text: resultText(result as never), isError: result.isError === true };
        }),
    };
  };
}
