/**
 * Generates the Prisma client for each provider (and the Pothos types) from prisma/schema.
 * Runs on `npm ci` (postinstall) and needs no network: Prisma 7's client is TypeScript plus a
 * WASM query compiler shipped in @prisma/client.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot, providerSchemaFiles, providers } from '../src/db/schema-source';

const buildRoot = join(projectRoot, 'prisma/.build');
for (const provider of providers) {
  const dir = join(buildRoot, provider);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const file of providerSchemaFiles(provider, { generators: true })) {
    writeFileSync(join(dir, file.path), file.content);
  }
  execFileSync(join(projectRoot, 'node_modules/.bin/prisma'), ['generate', '--schema', dir], {
    cwd: projectRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      // The CLI looks for the schema-engine binary before generating, though generate never runs it;
      // the binary cannot be downloaded here, so point the check at a file that exists.
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
      CHECKPOINT_DISABLE: '1',
    },
  });
}
