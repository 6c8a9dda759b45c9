import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * SQLite's WAL checkpoints, run on a worker thread instead of the connection's own thread.
 *
 * With `wal_autocheckpoint`, the commit that takes the WAL past the threshold copies the WAL's
 * pages into the database file and fsyncs both files, on the thread that committed: the event
 * loop, which answers nothing meanwhile. On ext4 each fsync took 2–180 ms here, and a turn (about
 * 30 WAL pages) reached the 1,000-page threshold every ~33 turns. A second connection to the same
 * file, on a worker thread, checkpoints instead (PASSIVE: it never blocks the writer, which goes on
 * appending while it copies), so the event loop only ever appends to the WAL. Durability is
 * unchanged: commits are written to the WAL exactly as before (`synchronous = NORMAL`), and the
 * checkpoint is SQLite's own; a process killed during one leaves a WAL that the next open recovers.
 *
 * One worker per process serves every SQLite database the process opens (each with its own
 * connection there); it is created with the first and never keeps the process alive.
 */

/**
 * How often the worker checkpoints each database: about 3,000 WAL pages at 500 turns/s. Each complete
 * checkpoint lets the next commit restart the WAL, which syncs its header on the committing thread,
 * so this also bounds those syncs (5 a second at most, against one per ~33 turns before).
 */
export const walCheckpointIntervalMs = 200;

/**
 * The main connection's `wal_autocheckpoint` beside the worker: a backstop that bounds the WAL
 * (≈40 MB) should the worker ever fall behind, far above what it lets accumulate.
 */
export const walAutocheckpointBackstopPages = 10_000;

// The worker's source: CommonJS, evaluated (no file of its own to build or find). It opens a
// connection per registered database and checkpoints each every interval; `remove` closes it and
// answers once closed, so the caller's own close() can then be the last connection, which
// checkpoints the rest and removes the WAL.
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.betterSqlite3);
const connections = new Map();
const checkpoint = (db) => {
  // PASSIVE never waits: when the main connection holds a lock it needs, it copies what it can
  // now and the next round copies the rest.
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch {}
};
setInterval(() => { for (const db of connections.values()) checkpoint(db); }, workerData.intervalMs);
parentPort.on('message', (message) => {
  if (message.add) {
    try {
      const db = new Database(message.add.file, { fileMustExist: true, timeout: 0 });
      connections.set(message.add.id, db);
      parentPort.postMessage({ added: message.add.id });
    } catch (err) {
      parentPort.postMessage({ added: message.add.id, error: String(err && err.message || err) });
    }
  } else if (message.remove !== undefined) {
    const db = connections.get(message.remove);
    connections.delete(message.remove);
    try { if (db) db.close(); } catch {}
    parentPort.postMessage({ removed: message.remove });
  }
});
`;

let worker: Worker | null = null;
/** Workers that exited or failed: nothing posted to one is ever answered. */
const gone = new WeakSet<Worker>();
let nextId = 1;
const waiting = new Map<string, (reply: { error?: string }) => void>();
/** Databases registered and not yet removed: the worker is referenced (kept alive) while it has none pending. */
let pending = 0;

function checkpointWorker(): Worker {
  if (worker) return worker;
  const betterSqlite3 = createRequire(import.meta.url).resolve('better-sqlite3');
  const made = new Worker(workerSource, {
    eval: true,
    workerData: { betterSqlite3, intervalMs: walCheckpointIntervalMs },
  });
  made.unref();
  made.on('message', (reply: { added?: number; removed?: number; error?: string }) => {
    const key = reply.added !== undefined ? `added:${reply.added}` : `removed:${reply.removed}`;
    const resolve = waiting.get(key);
    waiting.delete(key);
    resolve?.(reply);
  });
  const fail = (err: unknown) => {
    // A worker that failed (it could not load the driver, say) checkpoints nothing: answer every
    // waiting caller, and the next database starts a new one.
    gone.add(made);
    if (worker === made) worker = null;
    for (const resolve of waiting.values()) resolve({ error: String(err) });
    waiting.clear();
  };
  made.on('error', fail);
  made.on('exit', (code) => fail(new Error(`the WAL checkpoint worker exited (${code})`)));
  worker = made;
  return made;
}

function ask(target: Worker, key: string, message: unknown): Promise<{ error?: string }> {
  if (gone.has(target)) return Promise.resolve({ error: 'the WAL checkpoint worker is gone' });
  return new Promise((resolve) => {
    waiting.set(key, resolve);
    // Referenced while a reply is awaited, so a caller awaiting it is not left hanging at exit.
    pending++;
    target.ref();
    target.postMessage(message);
  }).finally(() => {
    if (--pending === 0) target.unref();
  }) as Promise<{ error?: string }>;
}

/** A database registered with the checkpoint worker. */
export interface WalCheckpointer {
  /** Closes the worker's connection; call it before closing the database's own. */
  stop(): Promise<void>;
}

/**
 * Checkpoints the SQLite database `file` (in WAL mode) from the worker thread until `stop`.
 * Resolves once the worker's connection is open; rejects when it could not open one (the caller
 * then keeps SQLite's own checkpoints).
 */
export async function startWalCheckpointer(file: string): Promise<WalCheckpointer> {
  const target = checkpointWorker();
  const id = nextId++;
  const added = await ask(target, `added:${id}`, { add: { id, file } });
  if (added.error) throw new Error(`the WAL checkpoint worker could not open ${file}: ${added.error}`);
  let stopped: Promise<void> | null = null;
  return {
    stop() {
      stopped ??= ask(target, `removed:${id}`, { remove: id }).then(() => {});
      return stopped;
    },
  };
}
