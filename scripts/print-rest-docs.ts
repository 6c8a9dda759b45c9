/**
 * Writes docs/rest.md from the REST route table (`npm run docs:rest`); with --check, fails when the
 * committed file is stale. The route table is the source of truth; this keeps the reference honest.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../src/db/schema-source';
import { contractDeviations } from '../src/rest/contract-deviations';
import { routes } from '../src/rest/routes';

const lines = [
  '# REST and SSE reference',
  '',
  'Generated from `src/rest/routes.ts` by `npm run docs:rest`; do not edit by hand.',
  '',
  'Every route runs the GraphQL operation shown in the route table through the same pipeline as',
  '`/graphql`. Authentication: `Authorization: <API key>` (or `Bearer <API key>`). Errors use the body',
  'of DECISIONS.md §3: `{statusCode, statusText, errorCode, message, details?}`.',
  '',
  '| Method | Path | Success | What it does |',
  '|---|---|---|---|',
  ...routes.map((r) => {
    const path = r.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const success = r.kind === 'stream' ? '200 (text/event-stream)' : String(r.status);
    return `| ${r.method} | \`${path}\` | ${success} | ${r.summary.replace(/\|/g, '\\|')} |`;
  }),
  '',
  "## Where Parley differs from the original's documents",
  '',
  "Where a route is also in the original service's published OpenAPI documents, its statuses, members and",
  'types follow the document; the contract suite (`test/contract/`) checks every response against it. These',
  'are the only knowing differences (from `src/rest/contract-deviations.ts`; the suite relaxes exactly these):',
  '',
  '| Route | Status | Where | Keyword | Why |',
  '|---|---|---|---|---|',
  ...contractDeviations.map(
    (d) => `| \`${d.route}\` | ${d.status} | \`${d.at}\` | \`${d.keyword}\` | ${d.reason.replace(/\|/g, '\\|')} |`,
  ),
  '',
  'Error statuses a document does not list for a route (401 without a key, 404 for an unknown ID, 400 for a',
  'body that breaks a rule, 409 for a duplicate name) answer with the error body of DECISIONS.md §3; the',
  'suite allows them per route, with the reason, in `test/contract/harness.ts`. The schemas it validates',
  'against are copied from the documents into `test/fixtures/contract/` by `npm run contract:schemas`',
  '(`scripts/extract-contract-schemas.ts`, which lists its few corrections of the documents in each fixture);',
  'documented routes not served yet, and known mismatches, are listed with reasons in `test/contract/pending.ts`.',
  '',
];
const text = lines.join('\n');
const file = join(projectRoot, 'docs/rest.md');
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {}
  if (current !== text) {
    console.error('docs/rest.md is stale: run `npm run docs:rest` and commit the result.');
    process.exit(1);
  }
} else {
  writeFileSync(file, text);
  console.error(`wrote ${file}`);
}
