import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { createProject } from '../../src/admin/service';
import type { Scope } from '../../src/auth/keys';
import type { Provider } from '../../src/db/schema-source';
import type { ScratchDatabase } from '../../src/db/scratch';
import { type Config, loadConfig } from '../../src/env';
import { createLogger } from '../../src/lib/logger';
import { type RunningServer, startServer } from '../../src/server';
import { type CreateServicesOptions, createServices } from '../../src/services';
import { createTestDatabase, lanes } from './lanes';

// biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies of every shape; each assertion checks what it needs.
export interface HttpResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface HttpOptions {
  /** Sent as the Authorization header. */
  key?: string;
  /** JSON-encoded unless it is a string (sent as is). */
  body?: unknown;
  headers?: Record<string, string>;
  query?: Record<string, string | string[]>;
}

export interface TestProject {
  workspaceID: string;
  projectID: string;
  apiKey: string;
  environments: { id: string; alias: string }[];
}

export interface TestApp {
  provider: Provider;
  url: string;
  config: Config;
  running: RunningServer;
  services: RunningServer['services'];
  database: ScratchDatabase;
  /** The ADMIN_TOKEN of this instance. */
  operatorToken: string;
  // biome-ignore lint/suspicious/noExplicitAny: see HttpResponse.
  http<T = any>(method: string, path: string, opts?: HttpOptions): Promise<HttpResponse<T>>;
  /** POST /graphql with a JSON body. */
  // biome-ignore lint/suspicious/noExplicitAny: see HttpResponse.
  gql(query: string, variables?: Record<string, unknown>, key?: string): Promise<HttpResponse<any>>;
  createProject(opts?: { name?: string; workspaceId?: string; scopes?: Scope[] }): Promise<TestProject>;
  close(): Promise<void>;
}

export interface StartTestAppOptions {
  /** Extra environment for loadConfig (DATABASE_URL, ADMIN_TOKEN and PORT are set by the helper). */
  env?: Record<string, string | undefined>;
  /** Share an existing database instead of creating one (it is then not dropped on close). */
  database?: ScratchDatabase;
  /** Parts of the services container to replace (a recording TurnRecorder, extra step types). */
  services?: Pick<CreateServicesOptions, 'turnRecorder' | 'extraStepTypes'>;
}

/** The INTEGRATION_SECRETS_KEY test apps run with (tests read the database with it). */
export const testIntegrationSecretsKey = '7f'.repeat(32);

/** Starts a real Parley server on an ephemeral port over a fresh database of `provider`. */
export async function startTestApp(provider: Provider, opts: StartTestAppOptions = {}): Promise<TestApp> {
  const database = opts.database ?? (await createTestDatabase(provider));
  const operatorToken = opts.env?.ADMIN_TOKEN ?? `op_${randomBytes(16).toString('hex')}`;
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.PARLEY_TEST_LOG_LEVEL ?? 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_TOKEN: operatorToken,
    // Test runs (several may share one Redis) must not see each other's events.
    REDIS_PREFIX: `parley-test:${lanes().runId}:`,
    // The runtime tests' APIs run on loopback servers; test/runtime/outbound-guard.test.ts turns it off.
    RUNTIME_ALLOW_PRIVATE_URLS: 'true',
    // Integration header values are stored encrypted; test/runtime/integration-secrets.test.ts runs without a key too.
    INTEGRATION_SECRETS_KEY: testIntegrationSecretsKey,
    // GRAPHQL_JIT=false npx vitest run …: the same tests on graphql-js instead of the compiled executor.
    GRAPHQL_JIT: process.env.GRAPHQL_JIT,
    ...opts.env,
    DATABASE_URL: database.url,
  });
  const services = await createServices(config, {
    logger: createLogger(config.LOG_LEVEL),
    migrate: false,
    ...opts.services,
  });
  const running = await startServer(config, { services });
  const url = running.url;

  async function http<T>(method: string, path: string, o: HttpOptions = {}): Promise<HttpResponse<T>> {
    const target = new URL(path, url);
    for (const [k, v] of Object.entries(o.query ?? {})) {
      for (const item of Array.isArray(v) ? v : [v]) target.searchParams.append(k, item);
    }
    const headers: Record<string, string> = { ...o.headers };
    if (o.key !== undefined) headers.authorization = o.key;
    let body: string | undefined;
    if (o.body !== undefined) {
      body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
        headers['content-type'] = 'application/json';
    }
    const res = await fetch(target, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {}
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  return {
    provider,
    url,
    config,
    running,
    services,
    database,
    operatorToken,
    http,
    gql: (query, variables, key) => http('POST', '/graphql', { key: key ?? operatorToken, body: { query, variables } }),
    async createProject(o = {}) {
      const created = await createProject(
        { db: services.db, pubsub: services.pubsub },
        { name: o.name ?? 'test project', workspaceId: o.workspaceId ?? null, actor: 'cli', key: { scopes: o.scopes } },
      );
      return {
        workspaceID: created.project.workspaceId,
        projectID: created.project.id,
        apiKey: created.created!.apiKey,
        environments: created.environments.map((e) => ({ id: e.id, alias: e.alias })),
      };
    },
    async close() {
      await running.close();
      if (!opts.database) await database.drop();
    },
  };
}

/** Starts a test app before the suite's tests and closes it after. Read `.app` inside tests. */
export function useTestApp(provider: Provider, opts: StartTestAppOptions = {}): { app: TestApp } {
  const holder = {} as { app: TestApp };
  beforeAll(async () => {
    holder.app = await startTestApp(provider, opts);
  });
  afterAll(async () => {
    await holder.app?.close();
  });
  return holder;
}
