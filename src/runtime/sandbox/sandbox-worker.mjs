// The code step's sandbox: a worker thread that runs agent code in QuickJS compiled to
// WebAssembly. QuickJS is the security boundary (no Node APIs exist inside it: no require,
// import, process, fetch or file system); the worker keeps a slow or runaway script off the
// server's event loop and can be terminated outright if QuickJS itself misbehaves.
//
// Plain JavaScript on purpose: a worker thread is started by Node without the TypeScript loader
// the rest of the code runs under (tsx in production, Vite in tests).
import { parentPort } from 'node:worker_threads';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { newQuickJSWASMModuleFromVariant, shouldInterruptAfterDeadline } from 'quickjs-emscripten-core';

const quickjs = await newQuickJSWASMModuleFromVariant(variant);

const maxLogLines = 20;
const maxLogLength = 500;
const maxResultBytes = 1024 * 1024;

function describeError(ctx, handle) {
  const dumped = ctx.dump(handle);
  if (dumped && typeof dumped === 'object') {
    const name = typeof dumped.name === 'string' ? dumped.name : 'Error';
    const message = typeof dumped.message === 'string' ? dumped.message : JSON.stringify(dumped);
    return { name, message };
  }
  return { name: 'Error', message: String(dumped) };
}

function classify(error) {
  if (error.name === 'InternalError' && error.message === 'interrupted') return 'timeout';
  if (error.name === 'InternalError' && /out of memory/.test(error.message)) return 'memory';
  return 'error';
}

/** The author's code is the body of an async function of `variables`; its return value picks a path. */
function wrap(code) {
  return `globalThis.__result = (async function (variables) {\n${code}\n})(globalThis.__variables);`;
}

function check(task) {
  const runtime = quickjs.newRuntime({
    memoryLimitBytes: task.memoryLimitBytes,
    maxStackSizeBytes: task.maxStackBytes,
  });
  const ctx = runtime.newContext();
  try {
    const result = ctx.evalCode(wrap(task.code), 'step.js', { type: 'global', strict: true, compileOnly: true });
    if (result.error) {
      const error = describeError(ctx, result.error);
      result.error.dispose();
      return { ok: false, kind: 'error', error: `${error.name}: ${error.message}`, logs: [] };
    }
    result.value.dispose();
    return { ok: true, path: null, variables: {}, logs: [] };
  } finally {
    ctx.dispose();
    runtime.dispose();
  }
}

function run(task) {
  const runtime = quickjs.newRuntime({
    memoryLimitBytes: task.memoryLimitBytes,
    maxStackSizeBytes: task.maxStackBytes,
  });
  runtime.setInterruptHandler(shouldInterruptAfterDeadline(Date.now() + task.timeoutMs));
  const ctx = runtime.newContext();
  const logs = [];
  try {
    const log = ctx.newFunction('log', (...args) => {
      if (logs.length < maxLogLines) {
        const line = args
          .map((a) => {
            const v = ctx.dump(a);
            return typeof v === 'string' ? v : JSON.stringify(v);
          })
          .join(' ');
        logs.push(line.slice(0, maxLogLength));
      }
    });
    const consoleObject = ctx.newObject();
    for (const level of ['log', 'info', 'warn', 'error', 'debug']) ctx.setProp(consoleObject, level, log);
    ctx.setProp(ctx.global, 'console', consoleObject);
    consoleObject.dispose();
    log.dispose();

    const input = ctx.evalCode(
      `globalThis.__variables = JSON.parse(${JSON.stringify(JSON.stringify(task.variables))});`,
    );
    if (input.error) {
      const error = describeError(ctx, input.error);
      input.error.dispose();
      return { ok: false, kind: classify(error), error: `${error.name}: ${error.message}`, logs };
    }
    input.value.dispose();

    const started = ctx.evalCode(wrap(task.code), 'step.js', { type: 'global', strict: true });
    if (started.error) {
      const error = describeError(ctx, started.error);
      started.error.dispose();
      return { ok: false, kind: classify(error), error: `${error.name}: ${error.message}`, logs };
    }
    started.value.dispose();
    // Promises inside the sandbox settle by running its job queue; nothing outside can resolve them.
    const jobs = runtime.executePendingJobs();
    if (jobs.error) {
      const error = describeError(ctx, jobs.error);
      jobs.error.dispose();
      return { ok: false, kind: classify(error), error: `${error.name}: ${error.message}`, logs };
    }
    const promise = ctx.unwrapResult(ctx.evalCode('globalThis.__result'));
    const state = ctx.getPromiseState(promise);
    promise.dispose();
    if (state.type === 'pending') {
      return {
        ok: false,
        kind: 'error',
        error: 'Error: the code awaited something that never settles (only promises made in the code itself can)',
        logs,
      };
    }
    if (state.type === 'rejected') {
      const error = describeError(ctx, state.error);
      state.error.dispose();
      return { ok: false, kind: classify(error), error: `${error.name}: ${error.message}`, logs };
    }
    const returned = ctx.dump(state.value);
    state.value.dispose();
    const serialized = ctx.unwrapResult(ctx.evalCode('JSON.stringify(globalThis.__variables)'));
    const text = ctx.getString(serialized);
    serialized.dispose();
    if (text.length > maxResultBytes) {
      return { ok: false, kind: 'error', error: 'Error: the variables grew past 1 MB', logs };
    }
    if (returned !== undefined && returned !== null && typeof returned !== 'string') {
      return {
        ok: false,
        kind: 'error',
        error: `Error: the code must return a path name (a string), not ${typeof returned}`,
        logs,
      };
    }
    return { ok: true, path: returned ?? null, variables: JSON.parse(text), logs };
  } finally {
    ctx.dispose();
    runtime.dispose();
  }
}

parentPort.on('message', (task) => {
  let reply;
  try {
    reply = task.kind === 'check' ? check(task) : run(task);
  } catch (err) {
    // A failure of QuickJS itself (for example a WebAssembly trap): this worker may be unusable.
    reply = {
      ok: false,
      kind: 'crash',
      error: `SandboxError: ${err instanceof Error ? err.message : String(err)}`,
      logs: [],
    };
  }
  parentPort.postMessage({ id: task.id, ...reply });
});

parentPort.postMessage({ ready: true });
