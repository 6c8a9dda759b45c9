import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import autocannon from 'autocannon';
import express from 'express';
import type { BenchContext, BenchServer, BenchSuite } from './lib';
import { fmt, printTable, startBenchServer, summarize } from './lib';
import { reportTarget } from './targets';

/**
 * Issue 6: the streaming runtime.
 *
 * - Time to first trace of a two-step flow, over sequential streams.
 * - Turns per second of a five-step flow (SQLite and PostgreSQL), many users at once.
 * - Memory per held-open stream with 500 streams open at once.
 *
 * Each beside a bare Express handler that writes the same SSE frames with no auth, GraphQL,
 * database or interpreter: the floor for the same bytes on the same machine in the same run.
 */

const twoSteps = {
  name: 'Two steps',
  startFlow: 'main',
  flows: [
    {
      id: 'main',
      start: 'hello',
      steps: [
        { id: 'hello', type: 'message', message: 'Hello {user_id}!', next: 'bye' },
        { id: 'bye', type: 'message', message: 'Goodbye.' },
      ],
    },
  ],
};

export const fiveSteps = {
  name: 'Five steps',
  startFlow: 'main',
  variables: [{ name: 'n', default: 0 }],
  flows: [
    {
      id: 'main',
      start: 'hi',
      steps: [
        { id: 'hi', type: 'message', message: 'Hi {user_id}', next: 'inc' },
        { id: 'inc', type: 'set', assignments: [{ variable: 'n', value: 'n + 1' }], next: 'check' },
        { id: 'check', type: 'condition', branches: [{ if: 'n > 0', next: 'yes' }], else: 'no' },
        { id: 'yes', type: 'message', message: 'Visit {n}', next: 'menu' },
        { id: 'no', type: 'message', message: 'never' },
        { id: 'menu', type: 'choice', buttons: [{ label: 'Again', next: 'hi' }] },
      ],
    },
  ],
};

const holding = {
  name: 'Holding',
  startFlow: 'main',
  variables: [{ name: 'hold_ms', default: 1000 }],
  flows: [
    {
      id: 'main',
      start: 'hi',
      steps: [
        { id: 'hi', type: 'message', message: 'Please hold', next: 'hold' },
        { id: 'hold', type: 'wait', ms: 'hold_ms', next: 'bye' },
        { id: 'bye', type: 'message', message: 'Thanks for holding' },
      ],
    },
  ],
};

async function publishProgram(server: BenchServer, program: unknown): Promise<void> {
  await server.running.services.runtime.publish({
    projectId: server.project.projectID,
    environment: 'development',
    program,
    actor: 'cli',
  });
}

/** The raw SSE body of one Parley turn, which the baseline handler replays. */
async function captureBody(server: BenchServer, user: string): Promise<string> {
  const res = await fetch(`${server.url}/v2/project/${server.project.projectID}/user/${user}/interact/stream`, {
    method: 'POST',
    headers: { authorization: server.project.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ action: { type: 'launch' } }),
  });
  return res.text();
}

/** A bare Express server answering POST /stream with `frames` as SSE; `holdMs` delays the rest after the first frame. */
async function startBaseline(frames: string[], holdMs = 0) {
  const app = express();
  app.use(express.json());
  app.post('/stream/:user', (req, res) => {
    // Held as long as the Parley flow would hold it (its hold_ms variable), when the request says.
    const hold = Number(req.body?.variables?.hold_ms ?? holdMs);
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.write(frames[0]);
    const rest = () => {
      for (const frame of frames.slice(1)) res.write(frame);
      res.end();
    };
    if (holdMs > 0) setTimeout(rest, hold);
    else rest();
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

function splitFrames(body: string): string[] {
  return body
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => `${f}\n\n`);
}

/** Milliseconds until the first `event: trace` frame arrives, reading the stream to its end. */
async function timeToFirstTrace(url: string, headers: Record<string, string>, body: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { method: 'POST', headers, body });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let first = Number.NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (Number.isNaN(first) && text.includes('event: trace')) first = performance.now() - started;
  }
  if (!text.includes('event: end')) throw new Error(`stream without end: ${text.slice(0, 200)}`);
  return first;
}

async function firstTraceSuite(ctx: BenchContext, rows: (string | number)[][]): Promise<void> {
  const streams = ctx.quick ? 40 : 200;
  const server = await startBenchServer(ctx, 'sqlite');
  try {
    await publishProgram(server, twoSteps);
    const baseline = await startBaseline(splitFrames(await captureBody(server, 'sample')));
    const headers = { authorization: server.project.apiKey, 'content-type': 'application/json' };
    const body = JSON.stringify({ action: { type: 'launch' } });
    const parley: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < 10; i++) {
      await timeToFirstTrace(
        `${server.url}/v2/project/${server.project.projectID}/user/warm${i}/interact/stream`,
        headers,
        body,
      );
      await timeToFirstTrace(`${baseline.url}/stream/warm${i}`, headers, body);
    }
    for (let i = 0; i < streams; i++) {
      parley.push(
        await timeToFirstTrace(
          `${server.url}/v2/project/${server.project.projectID}/user/u${i}/interact/stream`,
          headers,
          body,
        ),
      );
      bare.push(await timeToFirstTrace(`${baseline.url}/stream/u${i}`, headers, body));
    }
    await baseline.close();
    const p = summarize(parley);
    const b = summarize(bare);
    rows.push(
      ['time to first trace, bare Express SSE (baseline)', `${fmt(b.p50, 2)} ms`, `${fmt(b.p95, 2)} ms`, ''],
      [
        `time to first trace, v2 stream, two-step flow, ${streams} streams [sqlite]`,
        `${fmt(p.p50, 2)} ms`,
        `${fmt(p.p95, 2)} ms`,
        `p50 ${fmt(p.p50 / b.p50, 1)}x, p95 ${fmt(p.p95 / b.p95, 1)}x`,
      ],
    );
    reportTarget({
      id: 'first-trace',
      provider: 'sqlite',
      value: p.p50,
      baseline: b.p50,
      note: `two-step flow, ${streams} streams`,
    });
  } finally {
    await server.close();
  }
}

/** Turns per second over `durationSeconds`, each request for a new user (no lease contention). */
async function turnsPerSecond(url: (i: number) => string, headers: Record<string, string>, durationSeconds: number) {
  let i = 0;
  const result = await autocannon({
    url: url(0),
    method: 'POST',
    headers,
    body: JSON.stringify({ action: { type: 'launch' } }),
    connections: 10,
    duration: durationSeconds,
    requests: [{ setupRequest: (req) => ({ ...req, path: new URL(url(i++)).pathname }) }],
  });
  if (result.non2xx || result.errors) throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

async function throughputSuite(ctx: BenchContext, rows: (string | number)[][]): Promise<void> {
  const duration = ctx.quick ? 2 : 8;
  for (const provider of ctx.providers) {
    const server = await startBenchServer(ctx, provider);
    try {
      await publishProgram(server, fiveSteps);
      const baseline = await startBaseline(splitFrames(await captureBody(server, 'sample')));
      const headers = { authorization: server.project.apiKey, 'content-type': 'application/json' };
      const bare = await turnsPerSecond((i) => `${baseline.url}/stream/u${i}`, headers, duration);
      const turns = await turnsPerSecond(
        (i) => `${server.url}/v2/project/${server.project.projectID}/user/${provider}-u${i}/interact/stream`,
        headers,
        duration,
      );
      await baseline.close();
      rows.push(
        [`turns/s, bare Express SSE, same frames (baseline) [${provider}]`, fmt(bare), '', ''],
        [
          `turns/s, v2 stream, five-step flow, 10 connections [${provider}]`,
          fmt(turns),
          '',
          `${fmt(turns / bare, 3)}x of baseline`,
        ],
      );
      reportTarget({ id: 'turns', provider, value: turns, baseline: bare, note: `10 connections, ${duration} s` });
    } finally {
      await server.close();
    }
  }
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * The server process's JavaScript heap + external memory, and its resident set, once full
 * collections stop freeing anything (finalisers and weak references settle over a few rounds).
 */
async function memory(): Promise<{ js: number; rss: number }> {
  let last = Number.POSITIVE_INFINITY;
  let stable = 0;
  for (let round = 0; round < 30 && stable < 3; round++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
    const used = process.memoryUsage().heapUsed;
    stable = Math.abs(last - used) < 16 * 1024 ? stable + 1 : 0;
    last = used;
  }
  const m = process.memoryUsage();
  return { js: m.heapUsed + m.external, rss: m.rss };
}

/**
 * Opens `n` streams from a child process (so only the server's memory is measured here); resolves
 * once each has its first trace, with how long that took, whether every stream is still open (a
 * reading taken after one ended would count fewer streams than it divides by) and a promise for
 * all their ends.
 */
async function holdStreams(n: number, url: (i: number) => string, headers: Record<string, string>, body: string) {
  const urls = Array.from({ length: n }, (_v, i) => url(i));
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, 'hold-streams.mjs'), JSON.stringify({ urls, headers, body })],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout! });
  const seen = new Set<string>();
  lines.on('line', (line) => seen.add(line));
  const waitFor = (word: string) =>
    new Promise<void>((resolve, reject) => {
      if (seen.has(word)) return resolve();
      lines.on('line', (line) => {
        if (line === word) resolve();
      });
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`stream client exited with ${code}`))));
    });
  await waitFor('ready');
  return { openMs: performance.now() - started, allOpen: () => !seen.has('first-end'), done: waitFor('done') };
}

async function memorySuite(ctx: BenchContext, rows: (string | number)[][]): Promise<void> {
  // --quick: 100 streams (full: 500), which still moves the heap by megabytes per reading.
  const n = ctx.quick ? 100 : 500;
  const warmCount = ctx.quick ? 50 : 100;
  const server = await startBenchServer(ctx, 'sqlite', { RUNTIME_TURN_TIMEOUT_MS: '120000' });
  try {
    await publishProgram(server, holding);
    const headers = { authorization: server.project.apiKey, 'content-type': 'application/json' };
    const frames = splitFrames(await captureBody(server, 'sample'));
    const parleyUrl = (prefix: string) => (i: number) =>
      `${server.url}/v2/project/${server.project.projectID}/user/${prefix}${i}/interact/stream`;

    // Warm both paths (code compiled, caches filled, pools grown) before anything is measured.
    const warm = JSON.stringify({ action: { type: 'launch' }, variables: { hold_ms: 10 } });
    const warmed = await holdStreams(warmCount, parleyUrl('warm'), headers, warm);
    await warmed.done;
    // Every stream must still be open when the memory is read, and the first one opened waits
    // longest: hold each for twice the time the warm-up's streams took to open, scaled to n, plus
    // 2 s for the reading itself (at least 2 s with --quick, 8 s in full; at most 100 s, under the
    // turn timeout: a reading that still comes too late is marked INVALID below).
    const holdMs = Math.min(
      100_000,
      Math.max(ctx.quick ? 2000 : 8000, Math.ceil((2 * warmed.openMs * n) / warmCount) + 2000),
    );
    const baseline = await startBaseline(frames, holdMs);
    await (await holdStreams(warmCount, (i) => `${baseline.url}/stream/w${i}`, headers, warm)).done;
    const body = JSON.stringify({ action: { type: 'launch' }, variables: { hold_ms: holdMs } });

    // Connections of the warm-up close after their responses: let them.
    await new Promise((r) => setTimeout(r, 1000));
    const bareBefore = await memory();
    const bareHeld = await holdStreams(n, (i) => `${baseline.url}/stream/u${i}`, headers, body);
    const bareDuring = await memory();
    const bareValid = bareHeld.allOpen();
    await bareHeld.done;
    await baseline.close();
    await new Promise((r) => setTimeout(r, 1000));

    const before = await memory();
    const held = await holdStreams(n, parleyUrl('held'), headers, body);
    const during = await memory();
    const valid = held.allOpen();
    await held.done;

    const per = (a: { js: number; rss: number }, b: { js: number; rss: number }) => ({
      js: (b.js - a.js) / n / 1024,
      rss: (b.rss - a.rss) / n / 1024,
    });
    const bare = per(bareBefore, bareDuring);
    const parley = per(before, during);
    const invalid = (ok: boolean) => (ok ? '' : ' (INVALID: a stream ended before the reading)');
    // The resident set moves by whole pages and pool sizes on a shared machine; it is printed for
    // orientation, the heap + external figure is the comparable one.
    rows.push(
      [
        `memory per held-open stream, bare Express SSE (baseline), ${n} open ${fmt(holdMs / 1000)} s${invalid(bareValid)}`,
        `${fmt(bare.js, 1)} KiB`,
        `(RSS ${fmt(bare.rss, 0)} KiB)`,
        '',
      ],
      [
        `memory per held-open stream, v2 stream mid-turn, ${n} open ${fmt(holdMs / 1000)} s [sqlite]${invalid(valid)}`,
        `${fmt(parley.js, 1)} KiB`,
        `(RSS ${fmt(parley.rss, 0)} KiB)`,
        `+${fmt(parley.js - bare.js, 1)} KiB per stream`,
      ],
    );
  } finally {
    await server.close();
  }
}

export const runtimeBench: BenchSuite = {
  name: 'runtime',
  description: 'streaming runtime: time to first trace, turns/s, memory per open stream, each vs bare Express SSE',
  async run(ctx) {
    const rows: (string | number)[][] = [['measure', 'p50 / value', 'p95', 'vs baseline']];
    // Memory first: the other measures leave garbage and grown pools that would blur its readings.
    await memorySuite(ctx, rows);
    await firstTraceSuite(ctx, rows);
    await throughputSuite(ctx, rows);
    printTable(
      'Runtime streams (memory: the server process’s heap + external after GC; clients in another process)',
      rows,
    );
  },
};
