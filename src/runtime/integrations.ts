import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import { publishAudit, recordAudit } from '../admin/service';
import type { Db } from '../db/client';
import { conflict, notFound } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub } from '../lib/pubsub';
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

const rowOf = (row: { headers: unknown } & Omit<IntegrationRow, 'headers'>): IntegrationRow => ({
  ...row,
  headers: (row.headers ?? {}) as Record<string, string>,
});

const isUniqueViolation = (err: unknown) => (err as { code?: string } | null)?.code === 'P2002';

export async function listIntegrations(
  deps: Pick<IntegrationDeps, 'db'>,
  projectId: string,
): Promise<IntegrationRow[]> {
  const rows = await deps.db.prisma.integration.findMany({ where: { projectId }, orderBy: { name: 'asc' } });
  return rows.map(rowOf);
}

export async function createIntegration(
  deps: IntegrationDeps,
  input: { projectId: string; name: string; url: string; headers?: Record<string, string>; actor: string },
): Promise<IntegrationRow> {
  try {
    const [row, audit] = await deps.db.prisma.$transaction(async (tx) => {
      const project = await tx.project.findUnique({ where: { id: input.projectId } });
      if (!project) throw notFound('Project', input.projectId);
      const created = await tx.integration.create({
        data: {
          id: newId(),
          projectId: input.projectId,
          name: input.name,
          url: input.url,
          headers: input.headers ?? {},
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
    return rowOf(row);
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
          ...(input.headers !== undefined && { headers: input.headers }),
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
          headers: Object.keys(updated.headers as Record<string, string>),
        },
      });
      return [updated, event] as const;
    });
    publishAudit(deps, [audit]);
    return rowOf(row);
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
  return rowOf(row);
}

export interface IntegrationClientOptions {
  db: Db;
  /** The runtime's outbound fetch (private addresses refused unless allowed). */
  fetch: typeof fetch;
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
 * The integrations of one turn's project. Each listing or call opens a session with the server
 * (initialize), does its work and closes it: a turn is short, and nothing stays connected.
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
            return rowOf(found);
          });
        row.catch(() => {});
        rows.set(name, row);
      }
      return row;
    };
    async function withClient<T>(name: string, signal: AbortSignal, work: (client: Client) => Promise<T>): Promise<T> {
      const row = await find(name);
      const transport = new StreamableHTTPClientTransport(new URL(row.url), {
        requestInit: { headers: row.headers },
        fetch: opts.fetch,
      });
      const client = new Client({ name: 'parley', version: '1' });
      const stop = AbortSignal.any([signal, AbortSignal.timeout(opts.timeoutMs)]);
      try {
        await client.connect(transport, { signal: stop, timeout: opts.timeoutMs });
        return await work(client);
      } catch (err) {
        const e = err as Error & { cause?: Error };
        const reason = e.cause?.message ?? e.message;
        throw new Error(`MCP server "${name}": ${reason}`);
      } finally {
        await client.close().catch(() => {});
      }
    }
    return {
      listTools: (server, signal) =>
        withClient(server, signal, async (client) => {
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
        withClient(server, signal, async (client) => {
          const result = await client.callTool({ name: tool, arguments: args }, undefined, {
            signal,
            timeout: opts.timeoutMs,
          });
          return { text: resultText(result as never), isError: result.isError === true };
        }),
    };
  };
}
