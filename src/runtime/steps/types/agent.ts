import type { ChatMessage, ToolCall } from '../../../llm';
import { traceExecuteTool, traceInvokeAgent } from '../../../ops/genai-tracing';
import { builtInVariables } from '../../program/compile';
import { checkParameterSchema, parseArguments } from '../agent/arguments';
import { fitHistory } from '../agent/history';
import { type AgentStep, agentStepSchema } from '../agent/schema';
import { errorResult, type ResolvedTool, resolveTools, type ToolOutcome } from '../agent/tools';
import {
  type CompletionStream,
  defineStepType,
  type StepContext,
  type StepProblem,
  type StepResult,
} from '../step-type';

/**
 * The `agent` step (docs/agent-step.md): a language model that holds the conversation while the
 * user is at this step. Each user turn goes to the model with the instructions and the
 * conversation so far (newest turns within the token budget); the model answers (streamed as
 * completion traces) or calls tools, which run in parallel and whose results go back to it, up
 * to `limits.toolRounds` times; then the step waits for the next turn. An exit (offered to the
 * model as a tool) leaves the step by its path.
 */

const defaults = { toolRounds: 5, turns: 50, historyTokens: 8000 };
const traceTextLimit = 2000;

interface AgentMemory {
  history: ChatMessage[];
  turns: number;
  /** The invocation counted when the step was entered (agent_usage); absent in older state. */
  invocationID?: string;
  enteredAt?: number;
}

const memoryKey = (step: AgentStep) => `agent:${step.id}`;

function memoryOf(step: AgentStep, ctx: StepContext): AgentMemory {
  const stored = ctx.frameStorage[memoryKey(step)] as Partial<AgentMemory> | undefined;
  return {
    history: Array.isArray(stored?.history) ? stored.history : [],
    turns: typeof stored?.turns === 'number' ? stored.turns : 0,
    ...(typeof stored?.invocationID === 'string' ? { invocationID: stored.invocationID } : {}),
    ...(typeof stored?.enteredAt === 'number' ? { enteredAt: stored.enteredAt } : {}),
  };
}

const cut = (text: string, limit = traceTextLimit) => (text.length > limit ? `${text.slice(0, limit)}…` : text);

/**
 * Leaves the step: forgets its conversation and records how its invocation ended (agent_usage
 * counts the invocation when the step was entered, and its success now).
 */
function leave(
  step: AgentStep,
  ctx: StepContext,
  memory: AgentMemory,
  result: { target: string | undefined; path: string; success: boolean },
): StepResult {
  delete ctx.frameStorage[memoryKey(step)];
  ctx.recordAgentStep({
    event: 'left',
    name: step.name ?? step.id,
    success: result.success,
    turns: memory.turns,
    ...(memory.invocationID ? { invocationID: memory.invocationID, enteredAt: memory.enteredAt } : {}),
  });
  return { kind: 'next', target: result.target, path: result.path };
}

/** A new invocation ID: 24 hex characters from the turn's random source. */
function newInvocationID(ctx: StepContext): string {
  let id = '';
  while (id.length < 24)
    id += Math.floor(ctx.random() * 0x1_0000_0000)
      .toString(16)
      .padStart(8, '0');
  return id.slice(0, 24);
}

function problemsOf(step: AgentStep): StepProblem[] {
  const problems: StepProblem[] = [];
  const names = new Map<string, string>();
  const claim = (name: string, field: string) => {
    const first = names.get(name);
    if (first) problems.push({ severity: 'error', field, message: `the tool name "${name}" is also used at ${first}` });
    else names.set(name, field);
  };
  const integrations = new Set<string>();
  (step.tools ?? []).forEach((tool, i) => {
    if (tool.type === 'mcp') {
      if (integrations.has(tool.integration)) {
        problems.push({
          severity: 'error',
          field: `tools.${i}.integration`,
          message: 'this MCP server is listed twice',
        });
      }
      integrations.add(tool.integration);
      return;
    }
    claim(tool.name, `tools.${i}.name`);
    if (tool.type === 'function' || tool.type === 'api') {
      const problem = checkParameterSchema(tool.parameters);
      if (problem) problems.push({ severity: 'error', field: `tools.${i}.parameters`, message: problem });
    }
    if (tool.type === 'api') {
      if (!/^(\{[A-Za-z_][A-Za-z0-9_.]*\}|https?:\/\/)/.test(tool.url)) {
        problems.push({
          severity: 'error',
          field: `tools.${i}.url`,
          message: 'must start with http://, https:// or a {placeholder}',
        });
      }
      if (tool.body !== undefined && tool.method === 'GET') {
        problems.push({ severity: 'error', field: `tools.${i}.body`, message: 'a GET request has no body' });
      }
    }
  });
  (step.exits ?? []).forEach((exit, i) => {
    claim(exit.name, `exits.${i}.name`);
  });
  return problems;
}

/** Placeholders of API tool templates that are neither `{args…}` nor a variable of the program. */
function apiTemplateProblems(step: AgentStep, known: (name: string) => boolean): StepProblem[] {
  const problems: StepProblem[] = [];
  const placeholder = /\{([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\}/g;
  const check = (field: string, text: string) => {
    for (const m of text.matchAll(placeholder)) {
      const name = m[1]!;
      if (name === 'args' || known(name)) continue;
      problems.push({ severity: 'error', field, message: `unknown variable "${name}" (arguments are {args.name})` });
    }
  };
  const walk = (field: string, value: unknown) => {
    if (typeof value === 'string') check(field, value);
    else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) walk(`${field}.${i}`, v);
    } else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(`${field}.${k}`, v);
  };
  (step.tools ?? []).forEach((tool, i) => {
    if (tool.type !== 'api') return;
    check(`tools.${i}.url`, tool.url);
    for (const [k, v] of Object.entries(tool.headers ?? {})) check(`tools.${i}.headers.${k}`, v);
    for (const [k, v] of Object.entries(tool.query ?? {})) check(`tools.${i}.query.${k}`, v);
    if (tool.body !== undefined) walk(`tools.${i}.body`, tool.body);
  });
  return problems;
}

interface ModelReply {
  text: string;
  toolCalls: ToolCall[];
}

/**
 * One model call, its text streamed to the client as completion traces; its tokens credited. Its
 * span (`chat {model}`, GenAI conventions) is the instrumented provider's, one per call.
 */
async function callModel(
  step: AgentStep,
  ctx: StepContext,
  messages: ChatMessage[],
  tools: ResolvedTool[] | null,
): Promise<ModelReply> {
  const llm = ctx.services.llm!;
  const model = step.model ?? llm.info.defaultModel;
  let answer: CompletionStream | null = null;
  try {
    for await (const event of llm.stream({
      messages,
      model: step.model,
      temperature: step.temperature,
      maxTokens: step.maxTokens,
      tools: tools?.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })),
      signal: ctx.signal,
    })) {
      if (event.type === 'delta') {
        answer ??= ctx.completion({ model });
        answer.content(event.text);
        continue;
      }
      const { accounting, toolCalls, text } = event.result;
      answer?.end({
        query: accounting.inputTokens,
        answer: accounting.outputTokens,
        total: accounting.inputTokens + accounting.outputTokens,
      });
      await ctx.services.recordCredit?.(
        { model: accounting.model, inputTokens: accounting.inputTokens, outputTokens: accounting.outputTokens },
        { stepId: step.id, flowId: ctx.flowId },
      );
      return { text, toolCalls };
    }
    throw new Error('the model stream ended without a result');
  } catch (err) {
    answer?.end();
    throw err;
  }
}

/** Runs one tool call: arguments checked first; any failure is the model's to read. */
function runToolCall(
  call: ToolCall,
  tool: ResolvedTool | undefined,
  ctx: StepContext,
  conversationId: string | undefined,
): Promise<ToolOutcome> {
  if (!tool) return Promise.resolve(errorResult(`there is no tool named "${call.name}"`));
  return traceExecuteTool(
    {
      name: call.name,
      callId: call.id,
      type: tool.kind === 'mcp' ? 'extension' : 'function',
      description: tool.description,
      conversationId,
    },
    async (span) => {
      const args = parseArguments(call.arguments, tool.parameters);
      const outcome = args.ok
        ? await tool.run(args.value, ctx).catch((err: unknown) => {
            if (ctx.signal.aborted) throw err;
            return errorResult(`the tool failed: ${(err as Error).message}`);
          })
        : errorResult(args.error);
      span.set({ 'parley.tool.success': outcome.success });
      return outcome;
    },
  );
}

export const agentStep = defineStepType<AgentStep>({
  type: 'agent',
  description:
    'A language model that holds the conversation: each user turn goes to the model with the conversation so far; it answers (streamed as `completion` traces) or calls tools — functions, API tools, knowledge-base search, MCP servers — shown as `debug` traces of type `tool`; named exits leave it. `path` `agent:exit:NAME` / `agent:turn-limit` / `agent:failure`.',
  schema: agentStepSchema,
  exits: (step) => [
    ...(step.exits ?? []).map((e, i) => ({ field: `exits.${i}.next`, target: e.next })),
    { field: 'turnLimit', target: step.turnLimit },
    { field: 'failure', target: step.failure },
  ],
  references: (step) => ({
    templates: [
      { field: 'instructions', text: step.instructions },
      ...(step.greeting ? [{ field: 'greeting', text: step.greeting }] : []),
    ],
    jsonTemplates: (step.tools ?? []).flatMap((tool, i) =>
      tool.type === 'knowledge-base' && tool.filters !== undefined
        ? [{ field: `tools.${i}.filters`, value: tool.filters }]
        : [],
    ),
  }),
  validate: (step, ctx) => {
    const builtIns = new Set<string>(builtInVariables);
    return [
      ...problemsOf(step),
      ...apiTemplateProblems(step, (name) => builtIns.has(name) || ctx.program.variables.has(name)),
    ];
  },
  async run(step, ctx) {
    const memory: AgentMemory = { history: [], turns: 0, invocationID: newInvocationID(ctx), enteredAt: ctx.now() };
    ctx.recordAgentStep({
      event: 'entered',
      name: step.name ?? step.id,
      success: true,
      turns: 0,
      invocationID: memory.invocationID,
      enteredAt: memory.enteredAt,
    });
    if (step.greeting) {
      const greeting = ctx.interpolate(step.greeting);
      ctx.emit('text', { message: greeting });
      memory.history.push({ role: 'assistant', content: greeting });
    }
    ctx.frameStorage[memoryKey(step)] = memory;
    return { kind: 'wait' };
  },
  async resume(step, ctx, input) {
    const memory = memoryOf(step, ctx);
    // Words go to the model; an event or a requested intent may run a global trigger (and come back).
    if (input.utterance === null || input.kind === 'event') {
      const trigger = input.kind === 'event' || input.kind === 'intent' ? ctx.globalTrigger(input) : null;
      if (trigger) return trigger;
      if (input.utterance === null) return { kind: 'wait' };
    }
    const utterance = input.utterance ?? '';
    const llm = ctx.services.llm;
    const name = step.name ?? step.id;
    memory.turns++;
    if (!llm?.isLanguageModel) {
      ctx.debug(
        'The agent step needs a language model that can call tools: set LLM_BASE_URL (and LLM_DEFAULT_MODEL) to an OpenAI-compatible server. The built-in provider only extracts sentences.',
        'error',
      );
      return leave(step, ctx, memory, { target: step.failure, path: 'agent:failure', success: false });
    }
    const limits = { ...defaults, ...step.limits };
    const conversationId = ctx.services.turn?.sessionId;
    memory.history.push({ role: 'user', content: utterance });

    return traceInvokeAgent(
      { id: step.id, name, conversationId, provider: llm.info.provider, model: step.model ?? llm.info.defaultModel },
      async () => {
        const tools = await resolveTools(step, ctx);
        const byName = new Map(tools.map((t) => [t.name, t]));
        const system: ChatMessage = { role: 'system', content: ctx.interpolate(step.instructions) };
        for (let round = 1; ; round++) {
          const offerTools = round <= limits.toolRounds && tools.length > 0;
          if (!offerTools && round > 1) {
            ctx.debug(`Tool-call round limit (${limits.toolRounds}) reached: the model answers without tools`, 'tool');
          }
          const fitted = fitHistory(memory.history, limits.historyTokens, [system]);
          if (fitted.droppedTurns) memory.history = fitted.messages;
          let reply: ModelReply;
          try {
            reply = await callModel(step, ctx, [system, ...memory.history], offerTools ? tools : null);
          } catch (err) {
            if (ctx.signal.aborted) throw err;
            ctx.debug(`The language model failed: ${(err as Error).message}`, 'error');
            return leave(step, ctx, memory, { target: step.failure, path: 'agent:failure', success: false });
          }
          const calls = offerTools ? reply.toolCalls : [];
          if (!offerTools && reply.toolCalls.length) {
            ctx.debug(`The model called tools that were not offered; they were not run`, 'tool');
          }
          memory.history.push({
            role: 'assistant',
            content: reply.text,
            ...(calls.length ? { toolCalls: calls } : {}),
          });
          if (calls.length === 0) break;

          for (const call of calls) {
            ctx.emit('debug', {
              type: 'tool',
              message: cut(`call ${call.name} ${call.arguments}`, 500),
              tool: { event: 'call', id: call.id, name: call.name, arguments: cut(call.arguments) },
            });
          }
          const exitCall = calls.find((c) => byName.get(c.name)?.kind === 'exit');
          if (exitCall) {
            const exit = byName.get(exitCall.name)!;
            const skipped = calls.filter((c) => c !== exitCall).map((c) => c.name);
            ctx.emit('debug', {
              type: 'tool',
              message: cut(`exit ${exit.name}${skipped.length ? ` (not run: ${skipped.join(', ')})` : ''}`, 500),
              tool: { event: 'result', id: exitCall.id, name: exit.name, success: true, result: 'exit' },
            });
            return leave(step, ctx, memory, {
              target: exit.exitTarget,
              path: `agent:exit:${exit.name}`,
              success: true,
            });
          }
          // Every call starts now; results are reported (and given to the model) in the reply's order.
          const running = calls.map((call) => runToolCall(call, byName.get(call.name), ctx, conversationId));
          for (const [i, call] of calls.entries()) {
            const outcome = await running[i]!;
            ctx.emit('debug', {
              type: 'tool',
              message: cut(`result ${call.name} (${outcome.success ? 'ok' : 'failed'}): ${outcome.content}`, 500),
              tool: {
                event: 'result',
                id: call.id,
                name: call.name,
                success: outcome.success,
                result: cut(outcome.content),
              },
            });
            memory.history.push({ role: 'tool', content: outcome.content, toolCallId: call.id });
          }
        }
        if (memory.turns >= limits.turns) {
          return leave(step, ctx, memory, { target: step.turnLimit, path: 'agent:turn-limit', success: true });
        }
        ctx.frameStorage[memoryKey(step)] = memory;
        return { kind: 'wait' } as StepResult;
      },
    );
  },
});
