import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/client';
import { sqliteFilePath } from '../../src/db/schema-engine';
import type { ScratchDatabase } from '../../src/db/scratch';
import { walAutocheckpointBackstopPages } from '../../src/db/wal-checkpointer';
import { newId } from '../../src/lib/ids';
import { createTestDatabase, lanes } from '../helpers/lanes';

/**
 * SQLite only (PostgreSQL has no WAL file of the application's to checkpoint): the WAL is
 * checkpointed by a second connection on a worker thread (src/db/wal-checkpointer.ts), not by the
 * commit that crosses `wal_autocheckpoint` on the event loop, and statement journals stay in memory.
 */
describe.skipIf(!lanes().sqlite)('SQLite WAL checkpoints off the event loop [sqlite]', () => {
  let database: ScratchDatabase;
  let db: Db;
  let file: string;
  const scratch = mkdtempSync(join(tmpdir(), 'parley-wal-'));

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    file = sqliteFilePath(database.url);
    db = await createDb(database.url);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The workspace rows with `id` in the database file alone (its WAL left out): what a checkpoint copied there. */
  function checkpointedRows(id: string): number {
    const copy = join(scratch, `${newId()}.db`);
    try {
      copyFileSync(file, copy);
      const reader = new Database(copy, { readonly: true });
      try {
        return (reader.prepare('SELECT count(*) AS n FROM "Workspace" WHERE "id" = ?').get(id) as { n: number }).n;
      } finally {
        reader.close();
      }
    } catch {
      // A copy taken while a checkpoint was writing the file may be torn: read it again.
      return 0;
    } finally {
      rmSync(copy, { force: true });
    }
  }

  async function insertWorkspace(target: Db): Promise<string> {
    const id = newId();
    const now = new Date().toISOString();
    if (target.driver.provider !== 'sqlite') throw new Error('sqlite only');
    await target.driver.exclusive('test.insert', (sql) => {
      sql.run(
        'INSERT INTO "Workspace" ("id", "name", "createdAt", "updatedAt") VALUES (?, ?, ?, ?)',
        id,
        'w',
        now,
        now,
      );
    });
    return id;
  }

  it('copies a commit into the database file long before the WAL reaches the backstop', {
    timeout: 60_000,
  }, async () => {
    const [setting] =
      await db.prisma.$queryRawUnsafe<{ wal_autocheckpoint: number | bigint }[]>('PRAGMA wal_autocheckpoint');
    expect(Number(setting?.wal_autocheckpoint)).toBe(walAutocheckpointBackstopPages);

    const id = await insertWorkspace(db);
    // One small commit is a few WAL pages, far below SQLite's own threshold (1,000 pages), which
    // would leave it in the WAL: only the worker's checkpoint puts it into the file. Wait for that.
    while (checkpointedRows(id) === 0) await new Promise((r) => setTimeout(r, 50));
    expect(checkpointedRows(id)).toBe(1);
  });

  it('keeps temporary tables and statement journals in memory', async () => {
    const [row] = await db.prisma.$queryRawUnsafe<{ temp_store: number | bigint }[]>('PRAGMA temp_store');
    expect(Number(row?.temp_store)).toBe(2);
  });

  it('closes the worker connection first, so closing the database removes its WAL', async () => {
    const other = await createTestDatabase('sqlite');
    try {
      const otherDb = await createDb(other.url);
      await insertWorkspace(otherDb);
      const wal = `${sqliteFilePath(other.url)}-wal`;
      expect(existsSync(wal)).toBe(true);
      await otherDb.close();
      // The last connection to close checkpoints the WAL and deletes it: left behind, the worker's
      // connection would still be open.
      expect(existsSync(wal)).toBe(false);
    } finally {
      await other.drop();
    }
  });
});
