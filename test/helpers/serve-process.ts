import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';

const parleyBin = join(projectRoot, 'bin/parley.js');

/**
 * Runs `parley <args>` to its end with only PATH from this process's environment (plus `env`;
 * LOG_LEVEL info unless `env` says otherwise): its exit code and what it wrote.
 */
export async function runParley(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [parleyBin, ...args], {
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A real `parley serve` process for the tests of what only a process shows: signals, exit, export. */
export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** Everything the process wrote to stderr so far (its logs). */
  stderr(): string;
  /** Resolves with the exit code once the process exits. */
  exited: Promise<[number | null, NodeJS.Signals | null]>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** Starts `parley serve` on a free loopback port with `env` (PATH, PORT and HOST are set here). */
export async function startServeProcess(env: Record<string, string>): Promise<ServeProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [parleyBin, 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port), HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += String(chunk);
  });
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stderr: () => stderr,
    exited: once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>,
  };
}

/**
 * Waits until `path` (default /readyz) answers 200, for up to `timeoutMs`; fails at once if the
 * process exits first.
 */
export async function waitUntilReady(server: ServeProcess, path = '/readyz', timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null) {
      throw new Error(`server exited early with ${server.child.exitCode}: ${server.stderr()}`);
    }
    try {
      if ((await fetch(`${server.url}${path}`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server did not become ready: ${server.stderr()}`);
}

/** Waits until readiness is no longer 200 (unready, or the connection refused) after SIGTERM. */
export async function waitUntilUnready(server: ServeProcess): Promise<void> {
  await expect
    .poll(async () => {
      try {
        return (await fetch(`${server.url}/readyz`)).status;
      } catch {
        return 'refused';
      }
    })
    .not.toBe(200);
}
