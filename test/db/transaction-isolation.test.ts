import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/client';
import type { ScratchDatabase } from '../../src/db/scratch';
import { newId } from '../../src/lib/ids';
import { createTestDatabase, describeEachDatabase } from '../helpers/lanes';

/**
 * Statements outside a transaction must not run inside someone else's open transaction. On SQLite
 * the Prisma adapter has one connection: without the serialisation in src/db/client.ts, a write
 * made while another request's interactive transaction awaited would be undone by its rollback,
 * and a read would see its uncommitted rows.
 */
describeEachDatabase('transaction isolation', (provider) => {
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

  it('keeps a write made outside an open transaction when that transaction rolls back, and hides its rows', async () => {
    const inside = newId();
    const outside = newId();
    let resume!: () => void;
    const paused = new Promise<void>((r) => {
      resume = r;
    });
    let wroteInside!: () => void;
    const insideWritten = new Promise<void>((r) => {
      wroteInside = r;
    });
    const transaction = db.prisma
      .$transaction(async (tx) => {
        await tx.workspace.create({ data: { id: inside, name: 'inside' } });
        wroteInside();
        await paused;
        throw new Error('roll back');
      })
      .catch((err: Error) => err);
    await insideWritten;

    // Issued while the transaction is open and waiting between its statements.
    const write = db.prisma.workspace.create({ data: { id: outside, name: 'outside' } });
    const read = db.prisma.workspace.findMany({ where: { id: { in: [inside, outside] } }, select: { id: true } });
    // Give the write time to reach the database before the transaction goes on. Without the
    // serialisation it completes here, inside the transaction, and the rollback undoes it; with
    // it, it waits for the transaction to end. (No timing is asserted: a slow machine can only
    // make this test pass without catching the bug, never fail a correct build.)
    await Promise.race([write, new Promise((r) => setTimeout(r, 500))]);
    resume();

    expect(((await transaction) as Error).message).toBe('roll back');
    await write;
    const seen = (await read).map((w) => w.id);
    expect(seen).not.toContain(inside);

    const after = await db.prisma.workspace.findMany({
      where: { id: { in: [inside, outside] } },
      select: { id: true },
    });
    expect(after.map((w) => w.id)).toEqual([outside]);
  });

  it('runs many concurrent transactions and plain writes without losing one', async () => {
    const ids = Array.from({ length: 20 }, () => newId());
    await Promise.all(
      ids.map((id, i) =>
        i % 2
          ? db.prisma.$transaction(async (tx) => {
              await tx.workspace.create({ data: { id, name: `tx ${i}` } });
              await tx.workspace.update({ where: { id }, data: { name: `tx ${i} updated` } });
            })
          : db.prisma.workspace.create({ data: { id, name: `plain ${i}` } }),
      ),
    );
    expect(await db.prisma.workspace.count({ where: { id: { in: ids } } })).toBe(ids.length);
  });
});
