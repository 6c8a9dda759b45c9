/**
 * A second Parley "instance" for concurrency tests: a separate process that records usage batches
 * into the same database. It connects, prints "ready", waits for "go" on stdin, records every
 * batch at once, and prints the number of events each batch stored as JSON.
 *
 *   node --import tsx test/helpers/usage-writer.ts <DATABASE_URL> <batches.json>
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { UsageEvent } from '../../src/analytics/events';
import { recordUsageEvents } from '../../src/analytics/usage-event-writer';
import { createDb } from '../../src/db/client';

const [url, file] = process.argv.slice(2);
if (!url || !file) throw new Error('usage: usage-writer.ts <DATABASE_URL> <batches.json>');
const batches = JSON.parse(readFileSync(file, 'utf8'), (key, value) =>
  key === 'occurredAt' ? new Date(value) : value,
) as UsageEvent[][];
const db = await createDb(url);
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) if (line.trim() === 'go') break;
lines.close();
try {
  const results = await Promise.all(batches.map((events) => recordUsageEvents({ db }, events)));
  process.stdout.write(`${JSON.stringify(results.map((r) => r.recorded))}\n`);
} finally {
  await db.close();
}
