import { interpolate, interpolateJson } from '../../expressions';
import type { StepContext } from '../step-type';
import { parseBody, readLimited, recordedUrl } from '../types/api';
import type { AgentStep, ApiTool, FunctionTool, KnowledgeBaseTool } from './schema';

/**
 * The tools of one agent step as the model sees them, and how each runs. Every tool returns a
 * result for the model (JSON text); a failure is a result too (`{"error": …}`), never an error
 * for the user. Usage is recorded here, one call at a time.
 */

export interface ToolOutcome {
  /** What the model reads. */
  content: string;
  success: boolean;
}

export interface ResolvedTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** `function`, `api`, `knowledge-base`, `mcp` or `exit` (gen_ai.tool.type reads `function` or `extension`). */
  kind: 'function' | 'api' | 'knowledge-base' | 'mcp' | 'exit';
  run(args: Record<string, unknown>, ctx: StepContext): Promise<ToolOutcome>;
  /** For exits: the step to go to. */
  exitTarget?: string;
}

/** Longest tool result sent to the model, in characters. */
export const maxToolResultChars = 16_000;

const clip = (text: string) =>
  text.length > maxToolResultChars ? `${text.slice(0, maxToolResultChars)}… [cut at ${maxToolResultChars}]` : text;

export const errorResult = (message: string): ToolOutcome => ({
  content: JSON.stringify({ error: message }),
  success: false,
});

/** Placeholders of tool templates: `{args.x}` the arguments, `{name}` a variable. */
function templateValues(args: Record<string, unknown>, ctx: StepContext): Record<string, unknown> {
  return { ...ctx.variables.all(), args };
}

/** The code of a function tool as the sandbox runs it: the result comes back as JSON text. */
export function functionToolCode(code: string): string {
  return `const __result = await (async function (args, variables) {\n${code}\n})(variables.args, variables.variables);\nreturn JSON.stringify(__result === undefined ? null : __result);`;
}

const defaultCodeTimeoutMs = 1000;
const defaultApiTimeoutMs = 10_000;

function functionTool(step: AgentStep, tool: FunctionTool): ResolvedTool {
  return {
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    kind: 'function',
    async run(args, ctx) {
      const timeoutMs = Math.max(
        1,
        Math.min(tool.timeoutMs ?? defaultCodeTimeoutMs, ctx.services.maxCodeTimeoutMs, ctx.deadline - ctx.now()),
      );
      const result = await ctx.services.sandbox.run(
        { code: functionToolCode(tool.code), variables: { args, variables: ctx.variables.all() }, timeoutMs },
        ctx.signal,
      );
      for (const line of result.logs) ctx.debug(line, 'code');
      const record = { name: tool.name, toolID: `${step.id}:${tool.name}`, durationMs: Math.round(result.durationMs) };
      if (!result.ok) {
        const error = result.kind === 'timeout' ? `stopped after ${timeoutMs} ms (${result.error})` : result.error;
        ctx.recordFunctionCall({ ...record, success: false, error });
        return errorResult(error);
      }
      ctx.recordFunctionCall({ ...record, success: true });
      return { content: clip(result.path ?? 'null'), success: true };
    },
  };
}

function apiTool(step: AgentStep, tool: ApiTool): ResolvedTool {
  return {
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    kind: 'api',
    async run(args, ctx) {
      const started = performance.now();
      const values = templateValues(args, ctx);
      const timeoutMs = Math.min(tool.timeoutMs ?? defaultApiTimeoutMs, ctx.services.maxApiTimeoutMs);
      let url: URL | null = null;
      const done = (success: boolean, status: number | null, error?: string) => {
        const durationMs = Math.round(performance.now() - started);
        const shown = url ? recordedUrl(url) : tool.url;
        ctx.debug(
          success
            ? `API tool ${tool.name}: ${tool.method} ${shown} answered ${status} in ${durationMs} ms`
            : `API tool ${tool.name}: ${tool.method} ${shown} failed after ${durationMs} ms: ${error}`,
          'api',
        );
        ctx.recordApiCall({
          name: tool.name,
          toolID: `${step.id}:${tool.name}`,
          method: tool.method,
          url: shown,
          status,
          success,
          durationMs,
          ...(error ? { error } : {}),
        });
      };
      try {
        const text = interpolate(tool.url, values, (value, offset) =>
          offset === 0 ? value : encodeURIComponent(value),
        );
        url = new URL(text);
        if (url.protocol !== 'http:' && url.protocol !== 'https:')
          throw new Error(`unsupported URL scheme ${url.protocol}`);
        for (const [name, template] of Object.entries(tool.query ?? {}))
          url.searchParams.append(name, interpolate(template, values));
      } catch (err) {
        const error = `invalid URL: ${(err as Error).message}`;
        done(false, null, error);
        return errorResult(error);
      }
      const headers = new Headers();
      for (const [name, template] of Object.entries(tool.headers ?? {}))
        headers.set(name, interpolate(template, values));
      let body: string | undefined;
      if (tool.body !== undefined && tool.method !== 'GET') {
        body = JSON.stringify(interpolateJson(tool.body, values));
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]);
      try {
        const response = await ctx.services.fetch(url, {
          method: tool.method,
          headers,
          body,
          signal,
          redirect: 'follow',
        });
        const text = await readLimited(response, ctx.services.maxApiResponseBytes);
        if (response.status < 200 || response.status > 299) {
          done(false, response.status, `status ${response.status}`);
          return {
            content: clip(JSON.stringify({ error: `status ${response.status}`, body: text.slice(0, 2000) })),
            success: false,
          };
        }
        done(true, response.status);
        const parsed = parseBody(text, response.headers.get('content-type'));
        return { content: clip(typeof parsed === 'string' ? parsed : JSON.stringify(parsed)), success: true };
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        const e = err as Error;
        const error =
          e.name === 'TimeoutError' || e.name === 'AbortError'
            ? `timed out after ${timeoutMs} ms`
            : ((e.cause as Error | undefined)?.message ?? e.message);
        done(false, null, error);
        return errorResult(error);
      }
    },
  };
}

const knowledgeBaseParameters = {
  type: 'object',
  properties: { query: { type: 'string', minLength: 1, description: 'What to search for, in words.' } },
  required: ['query'],
  additionalProperties: false,
};

function knowledgeBaseTool(step: AgentStep, tool: KnowledgeBaseTool): ResolvedTool {
  return {
    name: tool.name,
    description: tool.description,
    parameters: knowledgeBaseParameters,
    kind: 'knowledge-base',
    async run(args, ctx) {
      const ask = ctx.services.askKnowledgeBase;
      if (!ask) return errorResult('this runtime has no knowledge base');
      try {
        const answer = await ask({
          question: String(args.query),
          chunkLimit: tool.chunkLimit ?? 3,
          filters: tool.filters === undefined ? undefined : ctx.interpolateJson(tool.filters),
          synthesis: false,
          stepId: step.id,
          flowId: ctx.flowId,
          signal: ctx.signal,
        });
        ctx.debug(`Knowledge-base tool ${tool.name}: ${answer.chunks.length} chunk(s)`, 'knowledge-base');
        const chunks = answer.chunks.map((c) => ({
          content: c.content,
          score: Math.round(c.score * 1000) / 1000,
          source: c.source.name,
          ...(c.source.url ? { url: c.source.url } : {}),
        }));
        return { content: clip(JSON.stringify({ chunks })), success: true };
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        return errorResult(`the knowledge-base search failed: ${(err as Error).message}`);
      }
    },
  };
}

const exitParameters = {
  type: 'object',
  properties: { reason: { type: 'string', description: 'Why, in a few words.' } },
  additionalProperties: false,
};

/** The tool name of an MCP server's tool: `server__tool`, cut to the 64 characters models accept. */
export function integrationToolName(integration: string, tool: string): string {
  return `${integration}__${tool}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
}

/**
 * Every tool of the step, MCP servers' tools listed now (a server that cannot be listed is
 * reported and left out, so the agent still answers). Names are unique: the program's are checked
 * at publish time, an MCP tool whose name is taken is left out with a debug trace.
 */
export async function resolveTools(step: AgentStep, ctx: StepContext): Promise<ResolvedTool[]> {
  const tools: ResolvedTool[] = [];
  const taken = new Set<string>();
  const add = (tool: ResolvedTool) => {
    if (taken.has(tool.name)) {
      ctx.debug(`Tool "${tool.name}" is left out: another tool has that name`, 'tool');
      return;
    }
    taken.add(tool.name);
    tools.push(tool);
  };
  for (const tool of step.tools ?? []) {
    if (tool.type === 'function') add(functionTool(step, tool));
    else if (tool.type === 'api') add(apiTool(step, tool));
    else if (tool.type === 'knowledge-base') add(knowledgeBaseTool(step, tool));
    else {
      const access = ctx.services.integrations;
      if (!access) {
        ctx.debug(`MCP server "${tool.integration}" is left out: this runtime has no integrations`, 'tool');
        continue;
      }
      let listed: Awaited<ReturnType<typeof access.listTools>>;
      try {
        listed = await access.listTools(tool.integration, ctx.signal);
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        ctx.debug(`MCP server "${tool.integration}" is left out: ${(err as Error).message}`, 'tool');
        continue;
      }
      const allowed = tool.tools ? new Set(tool.tools) : null;
      for (const remote of listed) {
        if (allowed && !allowed.has(remote.name)) continue;
        const integration = tool.integration;
        add({
          name: integrationToolName(integration, remote.name),
          description: remote.description || remote.name,
          parameters: remote.inputSchema,
          kind: 'mcp',
          async run(args, c) {
            const started = performance.now();
            const record = (success: boolean, error?: string) =>
              c.recordIntegrationCall({
                integrationToolName: `${integration}.${remote.name}`,
                success,
                durationMs: Math.round(performance.now() - started),
                ...(error ? { error } : {}),
              });
            try {
              const result = await access.callTool(integration, remote.name, args, c.signal);
              record(!result.isError, result.isError ? result.text.slice(0, 200) : undefined);
              return result.isError ? errorResult(result.text) : { content: clip(result.text), success: true };
            } catch (err) {
              if (c.signal.aborted) throw err;
              const message = (err as Error).message;
              record(false, message);
              return errorResult(message);
            }
          },
        });
      }
    }
  }
  for (const exit of step.exits ?? []) {
    add({
      name: exit.name,
      description: `Leave this conversation: ${exit.description}`,
      parameters: exitParameters,
      kind: 'exit',
      exitTarget: exit.next,
      run: async () => ({ content: JSON.stringify({ ok: true }), success: true }),
    });
  }
  return tools;
}
