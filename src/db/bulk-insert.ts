import { Prisma } from '../generated/sqlite/client';
import type { PrismaDb } from './client';
import type { Provider } from './schema-source';

/**
 * Inserts many rows into one table with one statement per few thousand rows: the rows travel as a
 * single JSON parameter that the database unpacks (json_each on SQLite, json_to_recordset on
 * PostgreSQL), as the usage recorder does for its counters. `createMany` binds every value as its
 * own parameter and costs about a millisecond per row through the driver adapters; this costs a
 * few microseconds. For bulk writes of rows the caller built (the demo data); table and column
 * names are the caller's constants, never input.
 */

export type BulkColumnType = 'text' | 'int' | 'float' | 'bool' | 'timestamp' | 'json';

export type BulkColumns = Readonly<Record<string, BulkColumnType>>;

/** A row: strings, numbers, booleans, Dates, null; `json` columns take any JSON value (undefined: SQL NULL). */
export type BulkRow = Record<string, unknown>;

const pgTypes: Record<BulkColumnType, string> = {
  text: 'text',
  int: 'integer',
  float: 'double precision',
  bool: 'boolean',
  timestamp: 'timestamp(3)',
  // Carried as text and cast, so a JSON null stays a JSON null (json_to_recordset would make it SQL NULL).
  json: 'text',
};

const quote = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`;

/** DateTime as each engine's Prisma adapter stores it (the same text on SQLite, so ordering and reads agree). */
function storedTimestamp(provider: Provider, date: Date): string {
  const iso = date.toISOString();
  return provider === 'sqlite' ? iso.replace('Z', '+00:00') : iso;
}

function encodeRow(provider: Provider, columns: BulkColumns, row: BulkRow): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, type] of Object.entries(columns)) {
    const value = row[name];
    if (type === 'json') out[name] = value === undefined ? null : JSON.stringify(value);
    else if (value === undefined || value === null) out[name] = null;
    else if (type === 'timestamp') out[name] = storedTimestamp(provider, value as Date);
    else out[name] = value;
  }
  return out;
}

export const bulkRowsPerStatement = 2000;

export async function bulkInsert(
  tx: Pick<PrismaDb, '$executeRaw'>,
  provider: Provider,
  table: string,
  columns: BulkColumns,
  rows: readonly BulkRow[],
): Promise<void> {
  const names = Object.keys(columns);
  const columnList = Prisma.raw(names.map(quote).join(', '));
  for (let i = 0; i < rows.length; i += bulkRowsPerStatement) {
    const json = JSON.stringify(rows.slice(i, i + bulkRowsPerStatement).map((r) => encodeRow(provider, columns, r)));
    if (provider === 'postgresql') {
      const select = names.map((n) => (columns[n] === 'json' ? `CAST(r.${quote(n)} AS jsonb)` : `r.${quote(n)}`));
      const shape = names.map((n) => `${quote(n)} ${pgTypes[columns[n] as BulkColumnType]}`);
      await tx.$executeRaw`INSERT INTO ${Prisma.raw(quote(table))} (${columnList})
        SELECT ${Prisma.raw(select.join(', '))}
        FROM json_to_recordset(CAST(${json} AS json)) AS r(${Prisma.raw(shape.join(', '))})`;
    } else {
      const select = names.map((n) => `value ->> '${n.replace(/'/g, "''")}'`);
      await tx.$executeRaw`INSERT INTO ${Prisma.raw(quote(table))} (${columnList})
        SELECT ${Prisma.raw(select.join(', '))} FROM json_each(${json})`;
    }
  }
}
