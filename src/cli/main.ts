import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
// Only what parsing arguments and reporting errors needs is imported here. Each command imports
// the rest when it runs: `parley migrate` or a usage error does not load the server, and
// `parley project create` does not load the HTTP and GraphQL stack (a CLI process starts in a
// fraction of the time; the tests start hundreds of them).
import { graceSecondsSchema, idSchema, projectNameSchema, scopesSchema } from '../admin/validation';
import { type Scope, scopes } from '../auth/keys';
import { demoLimits } from '../demo/limits';
import { type Config, ConfigError, loadConfig } from '../env';
import { AppError } from '../lib/errors';
import { parseTimestamp, timestampProblemMessage } from '../lib/time';
import type { AppServices } from '../services';
import type { WebChatSettingsInput } from '../webchat/settings';

const usage = `Usage: parley <command> [options]

  serve                                   start the server (same as npm start)
  worker                                  run background jobs only (no HTTP), e.g. beside servers with JOBS_ENABLED=false
  migrate                                 apply pending database migrations
  project create --name NAME [--workspace ID] [--scopes a,b]
                                          create a project, its environments and first API key
  key create --project ID [--scopes a,b] [--name NAME]
  key create --workspace ID [--scopes a,b] [--name NAME]
                                          create a project key or a workspace key
  key revoke KEY_ID                       revoke a key at once
  key rotate KEY_ID [--grace SECONDS]     replace a key; the old one works for SECONDS more (default 86400)
  secrets reseal                          seal integration header values stored in clear or with a previous
                                          key (INTEGRATION_SECRETS_PREVIOUS_KEYS) with INTEGRATION_SECRETS_KEY
  agent publish FILE --project ID [--environment ALIAS]
                                          publish an agent program (JSON) to an environment (default development)
  agent validate FILE                     check an agent program and list its problems
  demo [--seed N] [--days N] [--name NAME] [--now ISO-TIME]
                                          create a demo project: a published support bot, knowledge-base
                                          documents and N days (default 30) of conversations, evaluations and
                                          usage; the same seed (default 1) gives the same data (docs/demo.md)
  webchat show --project ID [--environment ALIAS]
                                          print an environment's web chat settings
  webchat set --project ID [--environment ALIAS] [--enable|--disable] [--origin URL]... [--title T]
      [--description D] [--color #RRGGBB] [--avatar URL] [--launcher URL] [--position left|right]
      [--persistence localStorage|sessionStorage|memory] [--feedback|--no-feedback]
                                          change them (--origin replaces the allowed origins)

Scopes: ${scopes.join(', ')}. A new key gets every scope but admin, analytics:write and
transcripts:read-unredacted unless --scopes names them.

Every command works on the database of DATABASE_URL (default file:./data/parley.db), applying
pending migrations first. Results are printed as one JSON object on stdout; logs go to stderr.`;

class UsageError extends Error {}

function parseScopeList(raw: string | undefined): Scope[] | undefined {
  if (raw === undefined) return undefined;
  const parsed = scopesSchema.safeParse(
    raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  if (!parsed.success) throw new UsageError(`--scopes: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

function requireValid<T>(
  schema: {
    safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } };
  },
  value: unknown,
  what: string,
): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new UsageError(`${what}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

async function withServices<T>(config: Config, fn: (services: AppServices) => Promise<T>): Promise<T> {
  const [{ createServices }, { createLogger }] = await Promise.all([import('../services'), import('../lib/logger')]);
  const services = await createServices(config, { logger: createLogger(config.LOG_LEVEL, { component: 'cli' }) });
  try {
    return await fn(services);
  } finally {
    await services.close();
  }
}

/**
 * A key the CLI revokes or rotates is announced as the API does (`apiKeyChanged`): with REDIS_URL,
 * running servers drop it from their key caches at once; without Redis they re-read it by age
 * (KEY_CACHE_TTL_MS). The announcement is sent before the command exits (the pub/sub's close
 * flushes what was published).
 */
const adminDeps = (services: AppServices) => ({
  db: services.db,
  pubsub: services.pubsub,
  onKeyInvalidated: (keyId: string) => services.auth.invalidate(keyId),
});

/** The audit log's actor for CLI commands: `cli:<operating-system user>`, so it says who ran them. */
const cliActor = (() => {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return 'cli';
  }
})();

export async function runCli(argv: string[], env: Record<string, string | undefined>): Promise<number> {
  const [command, sub, ...rest] = argv;
  const config = loadConfig(env);
  switch (command) {
    case 'serve': {
      const [{ setupTracing }, { createLogger }, { exitOnSignals, startServer }] = await Promise.all([
        import('../ops/tracing'),
        import('../lib/logger'),
        import('../server'),
      ]);
      const tracing = await setupTracing(config, createLogger(config.LOG_LEVEL, { component: 'tracing' }));
      const running = await startServer(config);
      exitOnSignals(running, { beforeExit: tracing?.shutdown });
      return -1; // keep running
    }
    case 'worker': {
      const [{ setupTracing }, { createLogger }, { createServices }] = await Promise.all([
        import('../ops/tracing'),
        import('../lib/logger'),
        import('../services'),
      ]);
      const tracing = await setupTracing(config, createLogger(config.LOG_LEVEL, { component: 'tracing' }));
      const services = await createServices(config, {
        logger: createLogger(config.LOG_LEVEL, { component: 'worker' }),
      });
      services.startJobs();
      services.logger.info({ workerId: services.jobs.workerId }, 'Parley worker running');
      const stop = (signal: string) => {
        services.logger.info({ signal }, 'worker stopping');
        services.close().then(
          async () => {
            await tracing?.shutdown();
            process.exit(0);
          },
          () => process.exit(1),
        );
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
      return -1;
    }
    case 'migrate': {
      const { applyMigrations } = await import('../db/migrate');
      const applied = await applyMigrations(config.DATABASE_URL);
      print({ applied });
      return 0;
    }
    case 'project': {
      if (sub !== 'create') throw new UsageError(`unknown command: project ${sub ?? ''}`);
      const { values } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, workspace: { type: 'string' }, scopes: { type: 'string' } },
        strict: true,
      });
      if (!values.name) throw new UsageError('project create needs --name NAME');
      const name = requireValid(projectNameSchema, values.name, '--name');
      const workspaceId = values.workspace ? requireValid(idSchema, values.workspace, '--workspace') : null;
      const scopes = parseScopeList(values.scopes);
      const { createProject } = await import('../admin/service');
      const out = await withServices(config, async (services) => {
        const created = await createProject(adminDeps(services), {
          name,
          workspaceId,
          actor: cliActor,
          key: { scopes },
        });
        return {
          workspaceID: created.project.workspaceId,
          projectID: created.project.id,
          apiKey: created.created?.apiKey,
          environments: created.environments.map((e) => ({ id: e.id, alias: e.alias })),
        };
      });
      print(out);
      return 0;
    }
    case 'key': {
      if (sub === 'create') {
        const { values } = parseArgs({
          args: rest,
          options: {
            project: { type: 'string' },
            workspace: { type: 'string' },
            scopes: { type: 'string' },
            name: { type: 'string' },
          },
          strict: true,
        });
        if (Boolean(values.project) === Boolean(values.workspace)) {
          throw new UsageError('key create needs exactly one of --project ID or --workspace ID');
        }
        const scopes = parseScopeList(values.scopes);
        const { createApiKey } = await import('../admin/service');
        const out = await withServices(config, async (services) => {
          let workspaceId: string;
          let projectId: string | null = null;
          if (values.project) {
            projectId = requireValid(idSchema, values.project, '--project');
            const project = await services.db.prisma.project.findUnique({ where: { id: projectId } });
            if (!project) throw new AppError('NOT_FOUND', `Project "${projectId}" not found`);
            workspaceId = project.workspaceId;
          } else {
            workspaceId = requireValid(idSchema, values.workspace, '--workspace');
            const ws = await services.db.prisma.workspace.findUnique({ where: { id: workspaceId } });
            if (!ws) throw new AppError('NOT_FOUND', `Workspace "${workspaceId}" not found`);
          }
          const created = await createApiKey(adminDeps(services), {
            workspaceId,
            projectId,
            scopes,
            name: values.name ?? null,
            actor: cliActor,
          });
          return { keyID: created.key.id, apiKey: created.apiKey, scopes: created.key.scopes.split(' ') };
        });
        print(out);
        return 0;
      }
      if (sub === 'revoke' || sub === 'rotate') {
        const { values, positionals } = parseArgs({
          args: rest,
          options: { grace: { type: 'string' } },
          allowPositionals: true,
          strict: true,
        });
        if (positionals.length !== 1) throw new UsageError(`key ${sub} needs exactly one KEY_ID`);
        const keyId = requireValid(idSchema, positionals[0], 'KEY_ID');
        const { findApiKey, revokeApiKey, rotateApiKey } = await import('../admin/service');
        const out = await withServices(config, async (services) => {
          await findApiKey(services, keyId);
          if (sub === 'revoke') {
            const key = await revokeApiKey(adminDeps(services), { keyId, actor: cliActor });
            return { keyID: key.id, revokedAt: key.revokedAt?.toISOString() ?? null };
          }
          const graceSeconds = requireValid(
            graceSecondsSchema,
            values.grace === undefined ? 86_400 : Number(values.grace),
            '--grace',
          );
          const { created, previous } = await rotateApiKey(adminDeps(services), {
            keyId,
            graceSeconds,
            actor: cliActor,
          });
          return {
            keyID: created.key.id,
            apiKey: created.apiKey,
            scopes: created.key.scopes.split(' '),
            previous: {
              keyID: previous.id,
              expiresAt: previous.expiresAt?.toISOString() ?? null,
              revokedAt: previous.revokedAt?.toISOString() ?? null,
            },
          };
        });
        print(out);
        return 0;
      }
      throw new UsageError(`unknown command: key ${sub ?? ''}`);
    }
    case 'secrets': {
      if (sub !== 'reseal') throw new UsageError(`unknown command: secrets ${sub ?? ''}`);
      if (rest.length) throw new UsageError('secrets reseal takes no arguments');
      const [{ applyMigrations }, { createDb }, { integrationSecretBox }, { sealStoredIntegrationHeaders }] =
        await Promise.all([
          import('../db/migrate'),
          import('../db/client'),
          import('../lib/secret-box'),
          import('../runtime/integrations'),
        ]);
      const box = integrationSecretBox(config);
      if (!box) throw new ConfigError('secrets reseal needs INTEGRATION_SECRETS_KEY (the key to seal with)');
      await applyMigrations(config.DATABASE_URL);
      const db = await createDb(config.DATABASE_URL);
      try {
        const done = await sealStoredIntegrationHeaders({ db, integrationSecrets: box });
        print({
          keyID: box.keyId,
          previousKeyIDs: box.previousKeyIds,
          sealed: done.sealed,
          resealed: done.resealed,
          unreadable: done.unreadable,
        });
        if (done.unreadable.length) {
          process.stderr.write(
            `parley: ${done.unreadable.length} integration(s) hold header values sealed with a key that is not configured; add it to INTEGRATION_SECRETS_PREVIOUS_KEYS and run this again\n`,
          );
          return 1;
        }
        return 0;
      } finally {
        await db.close();
      }
    }
    case 'agent':
      return runAgentCommand(config, sub, rest);
    case 'demo':
      return runDemoCommand(config, sub === undefined ? [] : [sub, ...rest]);
    case 'webchat':
      return runWebChatCommand(config, sub, rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${usage}\n`);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

/** A whole number from an option, or a usage error naming the option. */
function integerOption(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`${name} must be a whole number, not "${raw}"`);
  return Number(raw.trim());
}

async function runDemoCommand(config: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      seed: { type: 'string' },
      days: { type: 'string' },
      name: { type: 'string' },
      now: { type: 'string' },
    },
    strict: true,
  });
  const seed = integerOption(values.seed, '--seed');
  if (seed !== undefined && seed > demoLimits.seed.max)
    throw new UsageError(`--seed must be at most ${demoLimits.seed.max}`);
  const days = integerOption(values.days, '--days');
  if (days !== undefined && (days < demoLimits.days.min || days > demoLimits.days.max)) {
    throw new UsageError(`--days must be from ${demoLimits.days.min} to ${demoLimits.days.max}`);
  }
  const name = values.name === undefined ? undefined : requireValid(projectNameSchema, values.name, '--name');
  let now: Date | undefined;
  if (values.now !== undefined) {
    const parsed = parseTimestamp(values.now);
    if (!parsed.ok) throw new UsageError(`--now: ${timestampProblemMessage[parsed.problem]}`);
    now = parsed.date;
  }
  // Loaded only for this command: the other commands start no faster or slower because of it.
  const { seedDemo } = await import('../demo/seed');
  const out = await withServices(config, async (services) => {
    const { summary, ...project } = await seedDemo(services, { seed, days, name, now, actor: cliActor });
    process.stderr.write(
      `parley: demo project "${project.projectID}": ${summary.transcripts} transcripts, ${summary.logs} logs, ` +
        `${summary.evaluationResults} evaluation results, ${summary.usageEvents} usage events, ${summary.documents} documents\n`,
    );
    return project;
  });
  print(out);
  return 0;
}

/** Reads an agent program file: JSON, or a usage error naming the file. */
function readProgramFile(file: string | undefined): unknown {
  if (!file) throw new UsageError('needs the program FILE');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
}

function printProblems(problems: readonly { severity?: string; path: string; message: string }[]): void {
  for (const p of problems) process.stderr.write(`  ${p.severity ?? 'error'} ${p.path || '(program)'}: ${p.message}\n`);
}

async function runAgentCommand(config: Config, sub: string | undefined, rest: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: rest,
    options: { project: { type: 'string' }, environment: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw new UsageError(`agent ${sub ?? ''} needs exactly one program FILE`);
  const program = readProgramFile(positionals[0]);
  if (sub === 'validate') {
    return withServices(config, async (services) => {
      const check = await services.runtime.validate(program);
      print({ valid: check.errors.length === 0, errors: check.errors, warnings: check.warnings });
      if (check.errors.length) {
        process.stderr.write(`parley: ${positionals[0]} has ${check.errors.length} problem(s):\n`);
        printProblems([...check.errors, ...check.warnings]);
        return 1;
      }
      printProblems(check.warnings);
      return 0;
    });
  }
  if (sub !== 'publish') throw new UsageError(`unknown command: agent ${sub ?? ''}`);
  if (!values.project) throw new UsageError('agent publish needs --project ID');
  const projectId = requireValid(idSchema, values.project, '--project');
  const environment = values.environment ?? 'development';
  return withServices(config, async (services) => {
    const project = await services.db.prisma.project.findUnique({ where: { id: projectId } });
    if (!project) throw new AppError('NOT_FOUND', `Project "${projectId}" not found`);
    try {
      const published = await services.runtime.publish({ projectId, environment, program, actor: cliActor });
      print({
        agentID: published.agentId,
        versionID: published.versionId,
        version: published.versionNumber,
        environment,
        created: published.created,
        warnings: published.warnings,
      });
      printProblems(published.warnings);
      return 0;
    } catch (err) {
      if (err instanceof AppError && err.code === 'VALIDATION_FAILED' && err.details) {
        process.stderr.write(`parley: ${positionals[0]} was not published: ${err.details.length} problem(s):\n`);
        printProblems(err.details.map((d) => ({ path: d.path.replace(/^program\.?/, ''), message: d.message })));
        return 1;
      }
      throw err;
    }
  });
}

async function runWebChatCommand(config: Config, sub: string | undefined, rest: string[]): Promise<number> {
  if (sub !== 'show' && sub !== 'set') throw new UsageError(`unknown command: webchat ${sub ?? ''}`);
  const { values } = parseArgs({
    args: rest,
    options: {
      project: { type: 'string' },
      environment: { type: 'string' },
      ...(sub === 'set'
        ? {
            enable: { type: 'boolean' },
            disable: { type: 'boolean' },
            origin: { type: 'string', multiple: true },
            title: { type: 'string' },
            description: { type: 'string' },
            color: { type: 'string' },
            avatar: { type: 'string' },
            launcher: { type: 'string' },
            position: { type: 'string' },
            persistence: { type: 'string' },
            feedback: { type: 'boolean' },
            'no-feedback': { type: 'boolean' },
          }
        : {}),
    },
    strict: true,
  });
  if (!values.project) throw new UsageError(`webchat ${sub} needs --project ID`);
  const projectId = requireValid(idSchema, values.project, '--project');
  const v = values as Record<string, string | string[] | boolean | undefined>;
  const { getWebChatSettings, updateWebChatSettings, webChatSettingsInputSchema } = await import('../webchat/settings');
  let input: WebChatSettingsInput = {};
  if (sub === 'set') {
    if (v.enable && v.disable) throw new UsageError('--enable and --disable exclude each other');
    if (v.feedback && v['no-feedback']) throw new UsageError('--feedback and --no-feedback exclude each other');
    const raw = {
      enabled: v.enable ? true : v.disable ? false : undefined,
      allowedOrigins: v.origin,
      title: v.title,
      description: v.description,
      primaryColor: v.color,
      avatarImage: v.avatar,
      launcherImage: v.launcher,
      position: v.position,
      persistence: v.persistence,
      feedback: v.feedback ? true : v['no-feedback'] ? false : undefined,
    };
    const parsed = webChatSettingsInputSchema.safeParse(raw);
    if (!parsed.success) {
      throw new UsageError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    }
    input = parsed.data;
  }
  return withServices(config, async (services) => {
    const project = await services.db.prisma.project.findUnique({ where: { id: projectId } });
    if (!project) throw new AppError('NOT_FOUND', `Project "${projectId}" not found`);
    const settings =
      sub === 'set'
        ? await updateWebChatSettings(services.db.prisma, projectId, values.environment, input)
        : await getWebChatSettings(services.db.prisma, projectId, values.environment);
    print(settings);
    return 0;
  });
}

export async function main(): Promise<void> {
  try {
    const code = await runCli(process.argv.slice(2), process.env);
    if (code >= 0) process.exit(code);
  } catch (err) {
    if (
      err instanceof UsageError ||
      (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))
    ) {
      process.stderr.write(`parley: ${err.message}\n\n${usage}\n`);
      process.exit(2);
    }
    if (err instanceof ConfigError || err instanceof AppError) {
      process.stderr.write(`parley: ${err.message}\n`);
      process.exit(1);
    }
    // A second server on a port the first one holds: say so, without a stack trace.
    const code = (err as NodeJS.ErrnoException | null)?.code;
    if (code === 'EADDRINUSE' || code === 'EACCES') {
      const { address, port } = err as NodeJS.ErrnoException & { address?: string; port?: number };
      process.stderr.write(
        code === 'EADDRINUSE'
          ? `parley: port ${port} (${address}) is already in use, perhaps by another Parley server. Stop that one, or start this one on another port: PORT=3001 npx parley serve\n`
          : `parley: not allowed to listen on port ${port} (${address}); choose a port above 1023 with PORT\n`,
      );
      process.exit(1);
    }
    process.stderr.write(`parley: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  }
}
