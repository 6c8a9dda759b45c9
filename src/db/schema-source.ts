import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The two database engines Parley runs on. */
export type Provider = 'sqlite' | 'postgresql';
export const providers: readonly Provider[] = ['sqlite', 'postgresql'];

export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const schemaSourceDir = join(projectRoot, 'prisma/schema');

export function migrationsDir(provider: Provider): string {
  return join(projectRoot, 'prisma/migrations', provider);
}

export interface SchemaFile {
  path: string;
  content: string;
}

/**
 * The Prisma schema for one provider. The model files under prisma/schema are the one source of
 * truth; only the datasource and generator blocks differ between providers, so they are written
 * here rather than kept in two copies.
 */
export function providerSchemaFiles(provider: Provider, opts: { generators?: boolean } = {}): SchemaFile[] {
  const header = [
    `datasource db {\n  provider = "${provider}"\n}`,
    opts.generators
      ? [
          'generator client {',
          '  provider     = "prisma-client"',
          `  output       = "${join(projectRoot, 'src/generated', provider)}"`,
          '  runtime      = "nodejs"',
          '  moduleFormat = "esm"',
          '}',
          // The Pothos types describe models, which are the same on both providers: generate once.
          provider === 'sqlite'
            ? [
                'generator pothos {',
                '  provider     = "prisma-pothos-types"',
                '  clientOutput = "./sqlite"',
                `  output       = "${join(projectRoot, 'src/generated/pothos-types.ts')}"`,
                '}',
              ].join('\n')
            : '',
        ].join('\n')
      : '',
  ].join('\n\n');
  const files: SchemaFile[] = [{ path: '_provider.prisma', content: `${header}\n` }];
  for (const name of readdirSync(schemaSourceDir).sort()) {
    if (!name.endsWith('.prisma')) continue;
    files.push({ path: name, content: readFileSync(join(schemaSourceDir, name), 'utf8') });
  }
  return files;
}
