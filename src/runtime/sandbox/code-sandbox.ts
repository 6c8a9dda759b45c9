import { Worker } from 'node:worker_threads';

/**
 * Runs agent code (code steps) in QuickJS/WebAssembly inside a small pool of worker threads.
 * Inside, the code sees `variables` (a JSON copy it may change) and `console.log`, and nothing
 * of Node: no network, no files, no process. Each run gets a fresh QuickJS runtime with a memory
 * limit and an interrupt deadline; a worker that does not answer shortly after the deadline is
 * terminated and replaced, so not even a fault in QuickJS can hold a turn.
 */

export interface CodeRunRequest {
  code: string;
  variables: Record<string, unknown>;
  timeoutMs: number;
}

export type CodeRunResult =
  | { ok: true; path: string | null; variables: Record<string, unknown>; logs: string[]; durationMs: number }
  | {
      ok: false;
      /** timeout: the deadline passed; memory: the memory limit was hit; error: the code threw; crash: the sandbox failed. */
      kind: 'timeout' | 'memory' | 'error' | 'crash';
      error: string;
      logs: string[];
      durationMs: number;
    };

export interface CodeSandbox {
  run(request: CodeRunRequest, signal?: AbortSignal): Promise<CodeRunResult>;
  /** Compiles without running: the syntax error, or null. */
  check(code: string): Promise<string | null>;
  close(): Promise<void>;
}

export interface CodeSandboxOptions {
  /** Worker threads (each holds one QuickJS module, about 2 MB). */
  workers: number;
  memoryLimitBytes: number;
  /** QuickJS stack; larger values overflow the WebAssembly stack before QuickJS notices. */
  maxStackBytes?: number;
}

/** A result before its duration is measured. */
type CodeRunReply = CodeRunResult extends infer R ? (R extends unknown ? Omit<R, 'durationMs'> : never) : never;

interface Task {
  id: number;
  kind: 'run' | 'check';
  code: string;
  variables: Record<string, unknown>;
  timeoutMs: number;
  resolve(result: CodeRunResult): void;
  started: number;
  signal?: AbortSignal;
}

interface PoolWorker {
  worker: Worker;
  ready: Promise<void>;
  busy: Task | null;
  watchdog: NodeJS.Timeout | null;
}

type WorkerReply = { id: number } & (
  | { ok: true; path: string | null; variables: Record<string, unknown>; logs: string[] }
  | { ok: false; kind: 'timeout' | 'memory' | 'error' | 'crash'; error: string; logs: string[] }
);

/** Time a worker gets past a run's deadline before it is considered stuck. */
const watchdogGraceMs = 2000;

export function createCodeSandbox(opts: CodeSandboxOptions): CodeSandbox {
  const workerUrl = new URL('./sandbox-worker.mjs', import.meta.url);
  const pool: PoolWorker[] = [];
  const queue: Task[] = [];
  let nextId = 1;
  let closed = false;

  function finish(slot: PoolWorker, reply: CodeRunReply): void {
    const task = slot.busy;
    if (!task) return;
    slot.busy = null;
    if (slot.watchdog) clearTimeout(slot.watchdog);
    slot.watchdog = null;
    task.resolve({ ...reply, durationMs: performance.now() - task.started } as CodeRunResult);
    dispatch();
  }

  function spawn(): PoolWorker {
    const worker = new Worker(workerUrl, {
      // The sandboxed code never sees Node, but the worker needs no secrets either.
      env: {},
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 },
    });
    worker.unref();
    let markReady: () => void = () => {};
    const slot: PoolWorker = {
      worker,
      ready: new Promise<void>((resolve) => {
        markReady = resolve;
      }),
      busy: null,
      watchdog: null,
    };
    worker.on('message', (message: WorkerReply | { ready: true }) => {
      if ('ready' in message) {
        markReady();
        return;
      }
      if (!slot.busy || slot.busy.id !== message.id) return;
      const { id: _id, ...reply } = message;
      finish(slot, reply);
      if (!reply.ok && reply.kind === 'crash') replace(slot);
    });
    const fail = (error: string) => {
      finish(slot, { ok: false, kind: 'crash', error, logs: [] });
      replace(slot);
    };
    worker.on('error', (err) => fail(`SandboxError: ${err.message}`));
    worker.on('exit', (code) => {
      if (!closed && pool.includes(slot)) fail(`SandboxError: the sandbox worker exited (code ${code})`);
    });
    return slot;
  }

  function replace(slot: PoolWorker): void {
    const index = pool.indexOf(slot);
    if (index >= 0) pool.splice(index, 1);
    slot.worker.terminate().catch(() => {});
    dispatch();
  }

  function dispatch(): void {
    if (closed) return;
    while (queue.length) {
      let slot = pool.find((w) => !w.busy);
      if (!slot) {
        if (pool.length >= opts.workers) return;
        slot = spawn();
        pool.push(slot);
      }
      const task = queue.shift()!;
      if (task.signal?.aborted) {
        task.resolve({
          ok: false,
          kind: 'timeout',
          error: 'the turn ended before the code ran',
          logs: [],
          durationMs: 0,
        });
        continue;
      }
      slot.busy = task;
      const target = slot;
      target.ready.then(() => {
        if (target.busy !== task) return;
        // The clock starts when the code does: a worker still loading its WebAssembly costs the code nothing.
        task.started = performance.now();
        target.watchdog = setTimeout(() => {
          finish(target, {
            ok: false,
            kind: 'timeout',
            error: `the code did not stop within ${task.timeoutMs} ms and its sandbox was terminated`,
            logs: [],
          });
          replace(target);
        }, task.timeoutMs + watchdogGraceMs);
        target.worker.postMessage({
          id: task.id,
          kind: task.kind,
          code: task.code,
          variables: task.variables,
          timeoutMs: task.timeoutMs,
          memoryLimitBytes: opts.memoryLimitBytes,
          maxStackBytes: opts.maxStackBytes ?? 256 * 1024,
        });
      });
    }
  }

  function submit(kind: Task['kind'], request: CodeRunRequest, signal?: AbortSignal): Promise<CodeRunResult> {
    if (closed)
      return Promise.resolve({ ok: false, kind: 'crash', error: 'the sandbox is closed', logs: [], durationMs: 0 });
    return new Promise((resolve) => {
      queue.push({ id: nextId++, kind, ...request, resolve, started: performance.now(), signal });
      dispatch();
    });
  }

  return {
    run: (request, signal) => submit('run', request, signal),
    async check(code) {
      const result = await submit('check', { code, variables: {}, timeoutMs: 1000 });
      return result.ok ? null : result.error;
    },
    async close() {
      closed = true;
      for (const task of queue.splice(0)) {
        task.resolve({ ok: false, kind: 'crash', error: 'the sandbox is closed', logs: [], durationMs: 0 });
      }
      await Promise.all(pool.splice(0).map((slot) => slot.worker.terminate().catch(() => 0)));
    },
  };
}
