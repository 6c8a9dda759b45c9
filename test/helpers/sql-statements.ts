import Database from 'better-sqlite3';
import pg from 'pg';

/**
 * Records the SQL statements sent to the database drivers (each execution of a better-sqlite3
 * statement — the SQLite client keeps prepared statements, so preparing is not executing — and
 * pg's `Client#query`) while `fn` runs: what Prisma's operations turn into, one entry per statement.
 * Prisma operations can hide follow-up queries (a relation is one more SELECT per level), so a
 * test of "no query per row" counts statements, not operations. Everything in this process is
 * recorded, so start the app with its background jobs off.
 */
export async function recordSqlStatements(fn: () => Promise<void>): Promise<string[]> {
  const statements: string[] = [];
  const scratch = new Database(':memory:');
  const statement = Object.getPrototypeOf(scratch.prepare('SELECT 1')) as Record<string, unknown>;
  scratch.close();
  const executions = ['run', 'get', 'all', 'iterate'] as const;
  const originals = executions.map((name) => statement[name] as (...args: unknown[]) => unknown);
  executions.forEach((name, i) => {
    const original = originals[i] as (...args: unknown[]) => unknown;
    statement[name] = function (this: { source: string }, ...args: unknown[]) {
      statements.push(this.source);
      return original.apply(this, args);
    };
  });
  const client = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = client.query;
  client.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
    return query.apply(this, args);
  };
  try {
    await fn();
  } finally {
    executions.forEach((name, i) => {
      statement[name] = originals[i];
    });
    client.query = query;
  }
  return statements;
}

/** The table a SELECT reads first (its FROM), without schema prefix and quotes. */
export function tableOf(sql: string): string {
  const match = /\bFROM\s+(?:[`"]?\w+[`"]?\.)?[`"]?(\w+)[`"]?/i.exec(sql);
  return match?.[1] ?? sql.slice(0, 40);
}
