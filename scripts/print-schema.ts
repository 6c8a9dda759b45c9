/**
 * Prints the GraphQL schema to schema.graphql (`npm run schema:print`), or with --check fails when
 * the committed file differs from the schema the code builds.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { printSchema } from 'graphql';
import { projectRoot } from '../src/db/schema-source';
import { schema } from '../src/graphql/schema';

const file = join(projectRoot, 'schema.graphql');
const printed = `${printSchema(schema)}\n`;
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {}
  if (current !== printed) {
    console.error('schema.graphql is stale: run `npm run schema:print` and commit the result.');
    process.exit(1);
  }
} else {
  writeFileSync(file, printed);
  console.error(`wrote ${file}`);
}
