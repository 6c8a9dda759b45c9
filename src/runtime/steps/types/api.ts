import { z } from 'zod';
import { checkExpression } from '../../expressions';
import {
  expressionSchema,
  jsonValueSchema,
  stepIdSchema,
  templateSchema,
  variableNameSchema,
} from '../../program/common';
import { defineStepType, type StepContext, type StepProblem } from '../step-type';

const headerNameSchema = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name');

const httpMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
type HttpMethod = (typeof httpMethods)[number];
const methodList = 'GET, POST, PUT, PATCH or DELETE';
const methodProblem = `must be ${methodList}, or a template with a {variable} such as "{verb}"`;

/**
 * A fixed method, or a template that gives one when the step runs (`{verb}`). A template must hold
 * a placeholder: a fixed word that is not a method (`FETCH`, `get`) is a mistake to report at
 * publish time, not at run time.
 */
const methodSchema = z
  .union(
    [
      z.enum(httpMethods),
      templateSchema
        .max(200)
        // Zod reports this branch's message for any string that is neither, so it names both forms.
        .regex(/\{[A-Za-z_][A-Za-z0-9_.]*\}/, methodProblem)
        .describe('A template with a `{variable}`, e.g. `{verb}`.'),
    ],
    { error: methodProblem },
  )
  .describe(
    `${methodList}; or a template such as \`{verb}\`, which must give one of them (any case) when the step runs, else the step takes its failure path.`,
  );

function isHttpMethod(text: string): text is HttpMethod {
  return (httpMethods as readonly string[]).includes(text);
}

/**
 * The method to send: the fixed one, or the template filled and upper-cased. Only ASCII letters
 * are upper-cased, so no other text (`poſt` upper-cases to `POST` in JavaScript) passes for a method.
 */
function resolveMethod(
  step: ApiStep,
  ctx: StepContext,
): { ok: true; method: HttpMethod } | { ok: false; text: string } {
  if (isHttpMethod(step.method)) return { ok: true, method: step.method };
  const text = ctx.interpolate(step.method).trim();
  const upper = /^[A-Za-z]+$/.test(text) ? text.toUpperCase() : text;
  return isHttpMethod(upper) ? { ok: true, method: upper } : { ok: false, text };
}

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('api'),
    name: z.string().max(200).optional().describe('The API’s name in usage records (default: the step ID).'),
    method: methodSchema,
    url: templateSchema
      .min(1)
      .describe('An http(s) URL. Placeholders are percent-encoded, except one at the very start (a base address).'),
    headers: z.record(headerNameSchema, templateSchema).optional(),
    query: z.record(z.string().min(1).max(200), templateSchema).optional().describe('Query parameters, encoded.'),
    body: jsonValueSchema
      .optional()
      .describe(
        'A string (sent as is, placeholders filled) or a JSON value (its strings filled; sent as JSON). Not sent with GET.',
      ),
    timeoutMs: z.number().int().min(1).max(120_000).optional().describe('Default 10000; capped by the server.'),
    responseMappings: z
      .array(
        z.strictObject({
          variable: variableNameSchema,
          path: expressionSchema.describe(
            'JSONata over the response body (`$status` and `$headers` are bound), e.g. `order.status` or `$status`.',
          ),
        }),
      )
      .max(50)
      .optional()
      .describe('Applied when the call succeeds (2xx).'),
    next: stepIdSchema.optional().describe('After a 2xx answer.'),
    failure: stepIdSchema.optional().describe('After any other answer, a network error or a timeout.'),
  })
  .describe('Calls an HTTP API: a `debug` trace of type `api`, then the success or failure path.');

type ApiStep = z.infer<typeof schema>;

const defaultTimeoutMs = 10_000;

/** Fills the URL template; a placeholder at offset 0 is a base address and is inserted as is. */
function buildUrl(step: ApiStep, ctx: StepContext): URL {
  const text = ctx.interpolate(step.url, (value, offset) => (offset === 0 ? value : encodeURIComponent(value)));
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported URL scheme ${url.protocol}`);
  for (const [name, template] of Object.entries(step.query ?? {}))
    url.searchParams.append(name, ctx.interpolate(template));
  return url;
}

export async function readLimited(response: Response, limit: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new Error(`the response is larger than ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function parseBody(text: string, contentType: string | null): unknown {
  if (!text) return null;
  if (contentType?.includes('json') || /^\s*[[{"]/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** The URL as recorded: no query string (it may carry secrets) and no credentials. */
export function recordedUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

export const apiStep = defineStepType<ApiStep>({
  type: 'api',
  description:
    'Calls an HTTP API with templated method, URL, headers and body; maps fields of the answer to variables; takes the success (2xx) or failure path. Emits a `debug` trace of type `api`.',
  schema,
  exits: (step) => [
    { field: 'next', target: step.next },
    { field: 'failure', target: step.failure },
  ],
  references: (step) => ({
    templates: [
      { field: 'method', text: step.method },
      { field: 'url', text: step.url },
      ...Object.entries(step.headers ?? {}).map(([name, text]) => ({ field: `headers.${name}`, text })),
      ...Object.entries(step.query ?? {}).map(([name, text]) => ({ field: `query.${name}`, text })),
    ],
    jsonTemplates: step.body === undefined ? [] : [{ field: 'body', value: step.body }],
    writes: (step.responseMappings ?? []).map((m, i) => ({
      field: `responseMappings.${i}.variable`,
      name: m.variable,
    })),
  }),
  validate: (step) => {
    const problems: StepProblem[] = [];
    if (step.body !== undefined && step.method === 'GET') {
      problems.push({ severity: 'error', field: 'body', message: 'a GET request has no body' });
    }
    (step.responseMappings ?? []).forEach((m, i) => {
      const syntax = checkExpression(m.path);
      if (syntax) problems.push({ severity: 'error', field: `responseMappings.${i}.path`, message: syntax });
    });
    if (!/^(\{[A-Za-z_][A-Za-z0-9_.]*\}|https?:\/\/)/.test(step.url)) {
      problems.push({ severity: 'error', field: 'url', message: 'must start with http://, https:// or a {variable}' });
    }
    return problems;
  },
  async run(step, ctx) {
    const name = step.name ?? step.id;
    const started = performance.now();
    const timeoutMs = Math.min(step.timeoutMs ?? defaultTimeoutMs, ctx.services.maxApiTimeoutMs);
    let url: URL | null = null;
    // What the records show: the method sent, or the template until it is resolved.
    let method = step.method;
    const fail = (message: string, status: number | null) => {
      const durationMs = Math.round(performance.now() - started);
      ctx.debug(`API ${method} ${url ? recordedUrl(url) : step.url} failed after ${durationMs} ms: ${message}`, 'api');
      ctx.recordApiCall({
        name,
        method,
        url: url ? recordedUrl(url) : step.url,
        status,
        success: false,
        durationMs,
        error: message,
      });
      return { kind: 'next' as const, target: step.failure, path: 'api:failure' };
    };
    const resolved = resolveMethod(step, ctx);
    if (!resolved.ok) {
      method = resolved.text.slice(0, 20);
      return fail(`invalid method ${JSON.stringify(resolved.text.slice(0, 100))}: must be ${methodList}`, null);
    }
    method = resolved.method;
    try {
      url = buildUrl(step, ctx);
    } catch (err) {
      return fail(`invalid URL: ${(err as Error).message}`, null);
    }
    const headers = new Headers();
    for (const [header, template] of Object.entries(step.headers ?? {})) headers.set(header, ctx.interpolate(template));
    let body: string | undefined;
    // A GET has no body: refused at publish time for a fixed GET, left out for a template that gives GET.
    if (step.body !== undefined && method !== 'GET') {
      if (typeof step.body === 'string') {
        body = ctx.interpolate(step.body);
        if (!headers.has('content-type')) headers.set('content-type', 'text/plain; charset=utf-8');
      } else {
        body = JSON.stringify(ctx.interpolateJson(step.body));
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
    }
    const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]);
    let response: Response;
    let text: string;
    try {
      response = await ctx.services.fetch(url, { method, headers, body, signal, redirect: 'follow' });
      text = await readLimited(response, ctx.services.maxApiResponseBytes);
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      const e = err as Error;
      const reason =
        e.name === 'TimeoutError' || e.name === 'AbortError'
          ? `timed out after ${timeoutMs} ms`
          : ((e.cause as Error | undefined)?.message ?? e.message);
      return fail(reason, null);
    }
    if (response.status < 200 || response.status > 299) return fail(`status ${response.status}`, response.status);
    const durationMs = Math.round(performance.now() - started);
    ctx.debug(`API ${method} ${recordedUrl(url)} answered ${response.status} in ${durationMs} ms`, 'api');
    ctx.recordApiCall({
      name,
      method,
      url: recordedUrl(url),
      status: response.status,
      success: true,
      durationMs,
    });
    const parsed = parseBody(text, response.headers.get('content-type'));
    const responseHeaders = Object.fromEntries(response.headers.entries());
    for (const mapping of step.responseMappings ?? []) {
      try {
        ctx.variables.set(
          mapping.variable,
          await ctx.evaluate(mapping.path, parsed, { status: response.status, headers: responseHeaders }),
        );
      } catch (err) {
        ctx.debug(`Could not map "${mapping.path}" to "${mapping.variable}": ${(err as Error).message}`, 'error');
      }
    }
    return { kind: 'next', target: step.next, path: 'api:success' };
  },
});
