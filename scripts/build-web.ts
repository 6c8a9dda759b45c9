/**
 * Builds the console (web/) into web/dist with Vite, then checks the initial-JavaScript budget
 * (every script index.html loads, gzip-compressed, at most 300 KB). `npm ci` runs this from
 * postinstall; without Vite installed (an install that left out devDependencies) it says so and
 * leaves the server to answer / with a page that says how to build.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { projectRoot } from '../src/db/schema-source';

export const initialJsBudgetBytes = 300 * 1024;

/** The scripts index.html loads at once (entry and its module preloads), gzip size of each. */
export function initialScripts(distDir: string): { file: string; gzipBytes: number }[] {
  const html = readFileSync(join(distDir, 'index.html'), 'utf8');
  const srcs = [...html.matchAll(/<(?:script[^>]*\ssrc|link[^>]*rel="modulepreload"[^>]*\shref)="([^"]+\.js)"/g)].map(
    (m) => m[1]!,
  );
  return srcs.map((src) => ({
    file: src,
    gzipBytes: gzipSync(readFileSync(join(distDir, src.replace(/^\//, '')))).length,
  }));
}

async function main() {
  const require = createRequire(import.meta.url);
  try {
    require.resolve('vite');
  } catch {
    console.warn('console: vite is not installed (devDependencies left out?); skipping the console build.');
    return;
  }
  const { build } = await import('vite');
  const configFile = join(projectRoot, 'web', 'vite.config.ts');
  await build({ configFile, logLevel: 'warn' });
  const dist = join(projectRoot, 'web', 'dist');
  if (!existsSync(join(dist, 'index.html'))) throw new Error('console: the build wrote no index.html');
  const scripts = initialScripts(dist);
  const total = scripts.reduce((sum, s) => sum + s.gzipBytes, 0);
  console.log(`console: built web/dist; initial JavaScript ${(total / 1024).toFixed(1)} KB gzip`);
  if (total > initialJsBudgetBytes) {
    throw new Error(`console: initial JavaScript is ${total} bytes gzip, over the ${initialJsBudgetBytes} budget`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
