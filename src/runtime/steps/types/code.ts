import { z } from 'zod';
import { stepIdSchema } from '../../program/common';
import { defineStepType, type StepProblem } from '../step-type';

const pathNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, "_" or "-"');

const schema = z
  .strictObject({
    id: stepIdSchema,
    type: z.literal('code'),
    name: z.string().max(200).optional().describe('The function’s name in usage records (default: the step ID).'),
    code: z
      .string()
      .min(1)
      .max(50_000)
      .describe(
        'The body of an async JavaScript function of `variables`. Change `variables.x` to set a variable; `return "name"` to take a path.',
      ),
    paths: z
      .array(z.strictObject({ name: pathNameSchema, next: stepIdSchema.optional() }))
      .max(20)
      .optional()
      .describe('Named paths the code may return.'),
    next: stepIdSchema.optional().describe('When the code returns nothing.'),
    failure: stepIdSchema
      .optional()
      .describe('When the code throws, runs out of time or memory, or returns an unknown path.'),
    timeoutMs: z.number().int().min(1).max(60_000).optional().describe('Default 1000; capped by the server.'),
  })
  .describe('Runs JavaScript in a sandbox (QuickJS in WebAssembly, no network or files).');

type CodeStep = z.infer<typeof schema>;

const defaultTimeoutMs = 1000;

export const codeStep = defineStepType<CodeStep>({
  type: 'code',
  description:
    'Runs JavaScript in a QuickJS/WebAssembly sandbox with memory and time limits and no network or file access. It reads and changes `variables` and picks a path by returning its name; `console.log` lines become `debug` traces of type `code`.',
  schema,
  exits: (step) => [
    { field: 'next', target: step.next },
    { field: 'failure', target: step.failure },
    ...(step.paths ?? []).map((p, i) => ({ field: `paths.${i}.next`, target: p.next })),
  ],
  validate: (step) => {
    const problems: StepProblem[] = [];
    const seen = new Set<string>();
    (step.paths ?? []).forEach((p, i) => {
      if (seen.has(p.name))
        problems.push({ severity: 'error', field: `paths.${i}.name`, message: `duplicate path "${p.name}"` });
      seen.add(p.name);
    });
    return problems;
  },
  async run(step, ctx) {
    const name = step.name ?? step.id;
    const timeoutMs = Math.max(
      1,
      Math.min(step.timeoutMs ?? defaultTimeoutMs, ctx.services.maxCodeTimeoutMs, ctx.deadline - ctx.now()),
    );
    const before = ctx.variables.all();
    const result = await ctx.services.sandbox.run({ code: step.code, variables: { ...before }, timeoutMs }, ctx.signal);
    for (const line of result.logs) ctx.debug(line, 'code');
    const failed = (message: string) => {
      ctx.debug(`Code step "${step.id}" failed: ${message}`, 'code');
      ctx.recordFunctionCall({ name, success: false, durationMs: Math.round(result.durationMs), error: message });
      return { kind: 'next' as const, target: step.failure, path: 'code:failure' };
    };
    if (!result.ok)
      return failed(result.kind === 'timeout' ? `stopped after ${timeoutMs} ms (${result.error})` : result.error);
    const path = result.path === null ? null : (step.paths ?? []).find((p) => p.name === result.path);
    if (result.path !== null && !path) return failed(`returned "${result.path}", which is not one of its paths`);
    const unknown: string[] = [];
    for (const [variable, value] of Object.entries(result.variables)) {
      if (!ctx.program.variables.has(variable)) {
        if (!(variable in before)) unknown.push(variable);
        continue;
      }
      if (JSON.stringify(value) !== JSON.stringify(before[variable])) ctx.variables.set(variable, value);
    }
    if (unknown.length) ctx.debug(`Code step "${step.id}" ignored undeclared variables: ${unknown.join(', ')}`, 'code');
    ctx.recordFunctionCall({ name, success: true, durationMs: Math.round(result.durationMs) });
    return path
      ? { kind: 'next', target: path.next, path: `code:${path.name}` }
      : { kind: 'next', target: step.next, path: 'code:default' };
  },
});
