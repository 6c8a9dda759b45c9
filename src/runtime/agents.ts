import { createHash } from 'node:crypto';
import { resolveEnvironment } from '../admin/environments';
import { publishAudit, recordAudit } from '../admin/service';
import type { Db } from '../db/client';
import { type AppError, notFound, validationError } from '../lib/errors';
import { newId } from '../lib/ids';
import type { AppPubSub, AuditEventPayload } from '../lib/pubsub';
import type { ProgramProblem } from './program/validate';
import { checkProgram, type ProgramCheck } from './program/validate';
import type { CodeSandbox } from './sandbox/code-sandbox';
import { functionToolCode } from './steps/agent/tools';
import type { StepRegistry } from './steps/registry';

/**
 * Publishing agent programs: each publish validates the program and stores it as an immutable,
 * numbered version of the agent of that name, then points an environment at it. Pointing another
 * environment at an existing version (promotion, rollback) is a deploy. Both are audited.
 */

export interface AgentDeps {
  db: Db;
  pubsub: AppPubSub;
  registry: StepRegistry;
  sandbox: CodeSandbox;
}

/** `checkProgram` plus what needs the sandbox: code steps that do not compile. */
export async function validateAgentProgram(
  deps: Pick<AgentDeps, 'registry' | 'sandbox'>,
  raw: unknown,
): Promise<ProgramCheck> {
  const check = checkProgram(raw, deps.registry);
  if (!check.program) return check;
  const syntaxErrors: ProgramProblem[] = [];
  for (const [f, flow] of check.program.flows.entries()) {
    for (const [s, step] of flow.steps.entries()) {
      if (step.type === 'agent') {
        // Function tools of agent steps compile as the sandbox will run them.
        const tools = (step as { tools?: { type: string; code?: string }[] }).tools ?? [];
        for (const [t, tool] of tools.entries()) {
          if (tool.type !== 'function') continue;
          const problem = await deps.sandbox.check(functionToolCode(String(tool.code ?? '')));
          if (problem)
            syntaxErrors.push({ severity: 'error', path: `flows.${f}.steps.${s}.tools.${t}.code`, message: problem });
        }
        continue;
      }
      if (step.type !== 'code') continue;
      const problem = await deps.sandbox.check(String((step as { code?: unknown }).code ?? ''));
      if (problem) syntaxErrors.push({ severity: 'error', path: `flows.${f}.steps.${s}.code`, message: problem });
    }
  }
  return syntaxErrors.length ? { ...check, program: null, compiled: null, errors: syntaxErrors } : check;
}

/** The error a program with problems is refused with: every problem, each at its path. */
export function programRefused(errors: readonly ProgramProblem[]): AppError {
  const n = errors.length;
  const first = errors[0];
  return validationError(
    `The agent program has ${n} problem${n === 1 ? '' : 's'}${first ? `; first: ${first.path ? `${first.path}: ` : ''}${first.message}` : ''}`,
    errors.map((e) => ({ path: e.path ? `program.${e.path}` : 'program', message: e.message })),
  );
}

/** JSON with object keys sorted, so equal programs hash equally. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === 'P2002';
}

/** Retries a transaction that lost a race on a unique key (two publishes of one agent at once). */
async function withRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isUniqueViolation(err) || attempt >= 4) throw err;
    }
  }
}

export interface PublishResult {
  agentId: string;
  versionId: string;
  versionNumber: number;
  environmentId: string;
  /** False when the program equals the agent's latest version, which is reused. */
  created: boolean;
  warnings: ProgramProblem[];
}

export async function publishAgent(
  deps: AgentDeps,
  input: { projectId: string; environment: string; program: unknown; actor: string },
): Promise<PublishResult> {
  const check = await validateAgentProgram(deps, input.program);
  if (!check.program) throw programRefused(check.errors);
  const program = check.program;
  const checksum = createHash('sha256').update(canonicalJson(program)).digest('hex');

  const [result, events] = await withRetry(() =>
    deps.db.prisma.$transaction(async (tx) => {
      const project = await tx.project.findUnique({ where: { id: input.projectId } });
      if (!project) throw notFound('Project', input.projectId);
      const env = await resolveEnvironment(tx, input.projectId, input.environment);
      const agent =
        (await tx.agent.findUnique({
          where: { projectId_name: { projectId: input.projectId, name: program.name } },
        })) ?? (await tx.agent.create({ data: { id: newId(), projectId: input.projectId, name: program.name } }));
      const latest = await tx.agentVersion.findFirst({ where: { agentId: agent.id }, orderBy: { number: 'desc' } });
      const reuse = latest?.checksum === checksum ? latest : null;
      const version =
        reuse ??
        (await tx.agentVersion.create({
          data: {
            id: newId(),
            agentId: agent.id,
            projectId: input.projectId,
            number: (latest?.number ?? 0) + 1,
            program: program as never,
            checksum,
            createdBy: input.actor,
          },
        }));
      await tx.agent.update({ where: { id: agent.id }, data: { updatedAt: new Date() } });
      await tx.agentDeployment.upsert({
        where: { environmentId: env.id },
        create: { environmentId: env.id, agentVersionId: version.id, deployedBy: input.actor },
        update: { agentVersionId: version.id, deployedBy: input.actor },
      });
      const audit: AuditEventPayload = await recordAudit(tx, {
        workspaceId: project.workspaceId,
        actor: input.actor,
        action: 'agent.publish',
        targetType: 'agentVersion',
        targetId: version.id,
        data: {
          projectId: input.projectId,
          agentId: agent.id,
          name: agent.name,
          version: version.number,
          environment: env.alias,
          created: !reuse,
        },
      });
      const out: PublishResult = {
        agentId: agent.id,
        versionId: version.id,
        versionNumber: version.number,
        environmentId: env.id,
        created: !reuse,
        warnings: check.warnings,
      };
      return [out, [audit]] as const;
    }),
  );
  publishAudit(deps, events);
  deps.pubsub.publish('agentDeployed', { projectId: input.projectId, environmentId: result.environmentId });
  return result;
}

/** Points an environment at an existing version of one of the project's agents. */
export async function deployAgentVersion(
  deps: Pick<AgentDeps, 'db' | 'pubsub'>,
  input: { projectId: string; versionId: string; environment: string; actor: string },
): Promise<{ environmentId: string; versionId: string }> {
  const [result, events] = await deps.db.prisma.$transaction(async (tx) => {
    const project = await tx.project.findUnique({ where: { id: input.projectId } });
    if (!project) throw notFound('Project', input.projectId);
    const version = await tx.agentVersion.findUnique({ where: { id: input.versionId }, include: { agent: true } });
    if (!version || version.projectId !== input.projectId) throw notFound('Agent version', input.versionId);
    const env = await resolveEnvironment(tx, input.projectId, input.environment);
    await tx.agentDeployment.upsert({
      where: { environmentId: env.id },
      create: { environmentId: env.id, agentVersionId: version.id, deployedBy: input.actor },
      update: { agentVersionId: version.id, deployedBy: input.actor },
    });
    const audit = await recordAudit(tx, {
      workspaceId: project.workspaceId,
      actor: input.actor,
      action: 'agent.deploy',
      targetType: 'agentVersion',
      targetId: version.id,
      data: {
        projectId: input.projectId,
        agentId: version.agentId,
        name: version.agent.name,
        version: version.number,
        environment: env.alias,
      },
    });
    return [{ environmentId: env.id, versionId: version.id }, [audit]] as const;
  });
  publishAudit(deps, events);
  deps.pubsub.publish('agentDeployed', { projectId: input.projectId, environmentId: result.environmentId });
  return result;
}
