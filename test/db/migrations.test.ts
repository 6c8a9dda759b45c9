import { afterAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/client';
import { applyMigrations, diffDatabaseToSchema, migrationNames } from '../../src/db/migrate';
import { createScratchDatabase, type ScratchDatabase } from '../../src/db/scratch';
import { describeEachDatabase, lanes } from '../helpers/lanes';

describeEachDatabase('migrations from an empty database', (provider) => {
  const scratches: ScratchDatabase[] = [];
  afterAll(async () => {
    for (const s of scratches) await s.drop();
  });

  async function emptyDatabase(): Promise<ScratchDatabase> {
    const l = lanes();
    const scratch = await createScratchDatabase(provider, {
      pgAdminUrl: l.postgres?.adminUrl,
      prefix: `parley_t_${l.runId}_mig`,
    });
    scratches.push(scratch);
    return scratch;
  }

  it('applies the whole history, records it like prisma migrate deploy, and a second run is a no-op', async () => {
    const scratch = await emptyDatabase();
    const expected = migrationNames(provider);
    expect(expected.length).toBeGreaterThan(0);
    expect(await applyMigrations(scratch.url)).toEqual(expected);
    expect(await applyMigrations(scratch.url)).toEqual([]);

    const db = await createDb(scratch.url);
    try {
      const rows = await db.prisma.$queryRawUnsafe<{ migration_name: string; finished_at: unknown }[]>(
        'SELECT migration_name, finished_at FROM _prisma_migrations ORDER BY migration_name',
      );
      expect(rows.map((r) => r.migration_name)).toEqual(expected);
      expect(rows.every((r) => r.finished_at !== null)).toBe(true);
      expect(await db.pendingMigrations()).toEqual([]);
      // The tables exist and work.
      const ws = await db.prisma.workspace.create({ data: { id: 'a'.repeat(24), name: 'w' } });
      expect(ws.name).toBe('w');
    } finally {
      await db.close();
    }
  });

  it('leaves nothing between the migration history and the models (no drift)', async () => {
    const scratch = await emptyDatabase();
    await applyMigrations(scratch.url);
    expect(await diffDatabaseToSchema(scratch.url)).toBe('');
  });

  it('reports pending migrations on a database that has none applied', async () => {
    const scratch = await emptyDatabase();
    await applyMigrations(scratch.url);
    const db = await createDb(scratch.url);
    try {
      await db.prisma.$executeRawUnsafe(`DELETE FROM _prisma_migrations`);
      expect(await db.pendingMigrations()).toEqual(migrationNames(provider));
    } finally {
      await db.close();
    }
  });

  if (provider === 'sqlite') {
    it('opens SQLite with WAL, synchronous=NORMAL, a busy timeout and foreign keys on', async () => {
      const scratch = await emptyDatabase();
      await applyMigrations(scratch.url);
      const db = await createDb(scratch.url, { busyTimeoutMs: 4321 });
      try {
        const one = async (sql: string) =>
          Object.values((await db.prisma.$queryRawUnsafe<Record<string, unknown>[]>(sql))[0]!)[0];
        expect(String(await one('PRAGMA journal_mode'))).toBe('wal');
        expect(Number(await one('PRAGMA synchronous'))).toBe(1); // NORMAL
        expect(Number(await one('PRAGMA foreign_keys'))).toBe(1);
        expect(Number(await one('PRAGMA busy_timeout'))).toBe(4321);
        // Foreign keys are enforced: a project of a workspace that does not exist is refused.
        await expect(
          db.prisma.project.create({ data: { id: 'b'.repeat(24), workspaceId: 'c'.repeat(24), name: 'p' } }),
        ).rejects.toThrow();
      } finally {
        await db.close();
      }
    });
  }
});

describe('DATABASE_URL', () => {
  it('refuses a scheme it does not know', async () => {
    await expect(createDb('mysql://localhost/x')).rejects.toThrow(/file:, postgres:\/\/ or postgresql:\/\//);
  });
});
