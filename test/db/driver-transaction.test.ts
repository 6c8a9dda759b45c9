import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDb, type Db, type DriverEvent } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { newId } from '../../src/lib/ids';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

/**
 * A driver transaction (SqliteDriver.exclusive with `transaction`, SqliteDriver.transaction,
 * PostgresDriver.transaction) commits all of its statements or none: the usage writer relies on it
 * to keep the counters and the events they count together, the runtime's record batch to delete
 * a turn's outbox entry exactly when its records are written.
 */
describeEachDatabase('driver transactions', (provider) => {
  let database: ScratchDatabase;
  let db: Db;

  beforeAll(async () => {
    database = await createTestDatabase(provider);
    db = await createDb(database.url);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  /** Inserts a workspace per ID in one driver transaction, then runs `after` inside it (which may throw). */
  async function insertInTransaction(ids: readonly string[], after: () => void): Promise<void> {
    const driver = db.driver;
    const now = new Date().toISOString();
    if (driver.provider === 'sqlite') {
      await driver.exclusive(
        'test.insert',
        (sql) => {
          for (const id of ids) {
            sql.run(
              'INSERT INTO "Workspace" ("id", "name", "createdAt", "updatedAt") VALUES (?, ?, ?, ?)',
              id,
              'w',
              now,
              now,
            );
          }
          after();
        },
        { transaction: true },
      );
      return;
    }
    await driver.transaction('test.insert', async (sql) => {
      for (const id of ids) {
        await sql.query(
          'INSERT INTO "Workspace" ("id", "name", "createdAt", "updatedAt") VALUES ($1, $2, $3::timestamp(3), $3::timestamp(3))',
          [id, 'w', now],
        );
      }
      after();
    });
  }

  const countOf = (ids: readonly string[]) => db.prisma.workspace.count({ where: { id: { in: [...ids] } } });

  it('commits every statement together, reported as one commit', async () => {
    const events: DriverEvent[] = [];
    const listener = (e: DriverEvent) => events.push(e);
    db.driverListeners.add(listener);
    try {
      const ids = [newId(), newId(), newId()];
      await insertInTransaction(ids, () => {});
      expect(await countOf(ids)).toBe(3);
      expect(events).toEqual([
        { label: 'test.insert', statements: 3, commits: 1, background: false, durationMs: expect.any(Number) },
      ]);
    } finally {
      db.driverListeners.delete(listener);
    }
  });

  it('rolls every statement back when the transaction fails, and passes the error on', async () => {
    const events: DriverEvent[] = [];
    const listener = (e: DriverEvent) => events.push(e);
    db.driverListeners.add(listener);
    const ids = [newId(), newId()];
    try {
      await expect(
        insertInTransaction(ids, () => {
          throw new Error('fail after the inserts');
        }),
      ).rejects.toThrow('fail after the inserts');
    } finally {
      db.driverListeners.delete(listener);
    }
    expect(await countOf(ids)).toBe(0);
    expect(events).toEqual([
      { label: 'test.insert', statements: 2, commits: 0, background: false, durationMs: expect.any(Number) },
    ]);
  });

  it('rolls back when a statement fails (a duplicate key), and the connection stays usable', async () => {
    const first = newId();
    const other = newId();
    await insertInTransaction([first], () => {});
    await expect(insertInTransaction([other, first], () => {})).rejects.toThrow();
    expect(await countOf([other])).toBe(0);
    // The connection (SQLite's one, or the pooled one PostgreSQL used) is out of its transaction.
    const again = newId();
    await insertInTransaction([again], () => {});
    expect(await countOf([again])).toBe(1);
  });

  it.runIf(provider === 'postgresql')('refuses a statement made after the transaction ended', async () => {
    const driver = db.driver;
    if (driver.provider !== 'postgresql') return;
    let leaked: Parameters<Parameters<typeof driver.transaction>[1]>[0] | undefined;
    await driver.transaction('test.leak', async (sql) => {
      leaked = sql;
    });
    await expect(leaked?.query('SELECT 1', [])).rejects.toThrow(/outside its transaction/);
  });

  it.runIf(provider === 'postgresql')(
    'survives its connection being lost while it waits between statements: the transaction fails, the process does not',
    async () => {
      const lost: Error[] = [];
      const own = await createDb(database.url, { onConnectionError: (err) => lost.push(err) });
      try {
        const driver = own.driver;
        if (driver.provider !== 'postgresql') return;
        const tx = driver.transaction('test.lost', async (sql) => {
          const { rows } = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', []);
          // Another session ends this one's backend while the transaction waits on its caller's work
          // (as a PostgreSQL restart or an operator would): the connection emits 'error' with no
          // statement in flight, which, unheard, would end the test process.
          await db.queryRows('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
          await expect.poll(() => lost.length, { timeout: 5000 }).toBeGreaterThan(0);
          await sql.query('SELECT 1', []);
        });
        await expect(tx).rejects.toThrow();
        expect(lost[0]?.message).toMatch(/terminat/);
        // The pool replaced the connection: the next transaction runs.
        const again = await driver.transaction('test.after', (sql) =>
          sql.query<{ one: number }>('SELECT 1 AS one', []),
        );
        expect(again.rows[0]?.one).toBe(1);
      } finally {
        await own.close();
      }
    },
  );

  it.runIf(provider === 'postgresql')('isolates concurrent transactions on separate connections', async () => {
    const driver = db.driver;
    if (driver.provider !== 'postgresql') return;
    const id = newId();
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let inserted!: () => void;
    const insertedInside = new Promise<void>((r) => {
      inserted = r;
    });
    const now = new Date().toISOString();
    const tx = driver.transaction('test.open', async (sql) => {
      await sql.query(
        'INSERT INTO "Workspace" ("id", "name", "createdAt", "updatedAt") VALUES ($1, $2, $3::timestamp(3), $3::timestamp(3))',
        [id, 'open', now],
      );
      inserted();
      await held;
      throw new Error('roll back');
    });
    await insertedInside;
    // Outside the open transaction its row is not visible.
    const seen = await driver.query<{ n: string }>(
      'test.read',
      'SELECT count(*) AS n FROM "Workspace" WHERE "id" = $1',
      [id],
    );
    expect(Number(seen.rows[0]?.n)).toBe(0);
    release();
    await expect(tx).rejects.toThrow('roll back');
    expect(await countOf([id])).toBe(0);
  });

  it.runIf(provider === 'sqlite')(
    'runs an awaiting SQLite transaction alone on the connection, all or nothing, and refuses a late statement',
    async () => {
      const driver = db.driver;
      if (driver.provider !== 'sqlite') return;
      const now = new Date().toISOString();
      const insert = 'INSERT INTO "Workspace" ("id", "name", "createdAt", "updatedAt") VALUES (?, ?, ?, ?)';
      const events: DriverEvent[] = [];
      const listener = (e: DriverEvent) => events.push(e);
      db.driverListeners.add(listener);
      const [a, b, c, d] = [newId(), newId(), newId(), newId()];
      let leaked: Parameters<Parameters<typeof driver.transaction>[1]>[0] | undefined;
      try {
        // A Prisma read asked for while the transaction awaits between its statements runs after
        // its COMMIT (the connection's lock), so it never sees the transaction half done.
        let read: Promise<number> | undefined;
        await driver.transaction('test.async', async (sql) => {
          leaked = sql;
          sql.run(insert, a, 'w', now, now);
          read = countOf([a, b]);
          await new Promise((resolve) => setTimeout(resolve, 20));
          sql.run(insert, b, 'w', now, now);
        });
        expect(await read).toBe(2);
        await expect(
          driver.transaction('test.async', async (sql) => {
            sql.run(insert, c, 'w', now, now);
            await Promise.resolve();
            sql.run(insert, d, 'w', now, now);
            throw new Error('fail after the inserts');
          }),
        ).rejects.toThrow('fail after the inserts');
      } finally {
        db.driverListeners.delete(listener);
      }
      expect(await countOf([c, d])).toBe(0);
      expect(events).toEqual([
        { label: 'test.async', statements: 2, commits: 1, background: false, durationMs: expect.any(Number) },
        { label: 'test.async', statements: 2, commits: 0, background: false, durationMs: expect.any(Number) },
      ]);
      expect(() => leaked?.run('SELECT 1')).toThrow(/after its end/);
      // The connection is out of its transaction: the next one commits.
      await driver.transaction('test.async', async (sql) => {
        sql.run(insert, c, 'w', now, now);
      });
      expect(await countOf([c])).toBe(1);
    },
  );
});
