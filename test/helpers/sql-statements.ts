import Database from 'better-sqlite3';
import pg from 'pg';

/**
 * Records the SQL statements sent to the database drivers (better-sqlite3's `prepare`, pg's
 * `Client#query`) while `fn` runs: what Prisma's operations turn into, one entry per statement.
 * Prisma operations can hide follow-up queries (a relation is one more SELECT per level), so a
 * test of "no query per row" counts statements, not operations. Everything in this process is
 * recorded, so start the app with its background jobs off.
 */
export async function recordSqlStatements(fn: () => Promise<void>): Promise<string[]> {
  const statements: string[] = [];
  const sqlite = Database.prototype as unknown as { prepare: (sql: string) => unknown };
  const client = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const prepare = sqlite.prepare;
  const query = client.query;
  sqlite.prepare = function (this: unknown, sql: string) {
    statements.push(sql);
    return prepare.call(this, sql);
  };
  client.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
    return query.apply(this, args);
  };
  try {
    await fn();
  } finally {
    sqlite.prepare = prepare;
    client.query = query;
  }
  return statements;
}

/** The table a SELECT reads first (its FROM), without schema prefix and quotes. */
export function tableOf(sql: string): string {
  const match = /\bFROM\s+(?:[`"]?\w+[`"]?\.)?[`"]?(\w+)[`"]?/i.exec(sql);
  return match?.[1] ?? sql.slice(0, 40);
}
