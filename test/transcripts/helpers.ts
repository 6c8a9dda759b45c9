import { expect } from 'vitest';
import { defaultKeyScopes } from '../../src/auth/keys';
import type { TestApp, TestProject } from '../helpers/app';

/** Ingests a transcript over REST and returns its ID. */
export async function ingestTranscript(
  app: TestApp,
  project: TestProject,
  opts: { sessionID?: string; userID?: string; environment?: string; logs?: unknown[] } = {},
): Promise<string> {
  const res = await app.http('POST', '/v1/transcript', {
    key: project.apiKey,
    body: {
      projectID: project.projectID,
      sessionID: opts.sessionID ?? `session-${Math.random().toString(36).slice(2)}`,
      ...(opts.userID ? { userID: opts.userID } : {}),
      ...(opts.environment ? { environment: opts.environment } : {}),
      logs: opts.logs ?? conversation('hello'),
    },
  });
  if (res.status !== 201) throw new Error(`ingest failed: ${res.status} ${res.text}`);
  return res.body.transcript.id;
}

/** A turn: the user's text action, the agent's text trace and a debug trace. */
export function conversation(
  userSays: string,
  agentSays = `You said: ${userSays}`,
): { type: 'action' | 'trace' | 'end'; data: unknown }[] {
  return [
    { type: 'action', data: { type: 'text', payload: userSays } },
    { type: 'trace', data: { type: 'text', payload: { message: agentSays }, time: 1_760_000_000_000 } },
    {
      type: 'trace',
      data: { type: 'debug', payload: { type: 'api', message: 'called the API' }, time: 1_760_000_000_001 },
    },
  ];
}

/** A project whose key also holds the admin scope (needed to define evaluations). */
export function adminProject(app: TestApp, workspaceId?: string): Promise<TestProject> {
  return app.createProject({
    workspaceId,
    scopes: ['admin', 'transcripts:read', 'transcripts:write', 'analytics:read'],
  });
}

/** The REST error body of DECISIONS.md §3 with this status and code. */
export function errorBody(statusCode: number, errorCode: string) {
  return { statusCode, errorCode, statusText: expect.any(String), message: expect.any(String) };
}

/**
 * The Prisma operations a request made, without what runs beside it: the job runner's polls (raw
 * SQL, Job) and the authenticator's last-used stamp (ApiKey).
 */
export function requestOperations(operations: string[]): string[] {
  return operations.filter((o) => !/^(undefined|Job|ApiKey)\./.test(o)).sort();
}

/** A project whose key may also read unredacted logs (`transcripts:read-unredacted`). */
export function unredactedProject(app: TestApp): Promise<TestProject> {
  return app.createProject({ scopes: [...defaultKeyScopes, 'transcripts:read-unredacted'] });
}
