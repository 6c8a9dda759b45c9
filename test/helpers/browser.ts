import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type BrowserContext, chromium } from 'playwright-core';
import { describe } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { consoleDistDir } from '../../src/http/console';
import { lanes } from './lanes';

let building: Promise<void> | null = null;

/** The newest modification time of the console's sources (web/ but its build). */
function newestSource(dir = join(projectRoot, 'web')): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'dist' || entry.name === 'node_modules') continue;
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Builds the console once per process when web/dist has no build or an older one than its sources
 * (a checkout without `npm ci`, or sources edited since), so tests never look at a stale console.
 */
export function ensureConsoleBuild(): Promise<void> {
  const index = join(consoleDistDir, 'index.html');
  if (existsSync(index) && statSync(index).mtimeMs >= newestSource()) return Promise.resolve();
  building ??= promisify(execFile)(
    process.execPath,
    [join(projectRoot, 'node_modules/tsx/dist/cli.mjs'), 'scripts/build-web.ts'],
    {
      cwd: projectRoot,
    },
  ).then(() => undefined);
  return building;
}

/** Like describe, only when the chromium lane runs; otherwise a skipped suite that says why. */
export function describeWithChromium(name: string, fn: (executablePath: string) => void): void {
  const l = lanes();
  if (l.chromium) {
    const path = l.chromium.executablePath;
    describe(`${name} [chromium]`, () => fn(path));
  } else describe.skip(`${name} [chromium] — skipped: ${l.skipped.chromium}`, () => fn(''));
}

/** Debian's chromium, headless, with a fresh profile and nothing that phones home. */
export async function launchChromium(
  executablePath: string,
  viewport = { width: 1280, height: 900 },
): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  // A fresh --user-data-dir: Playwright takes it as the persistent context's directory.
  const profile = mkdtempSync(join(tmpdir(), 'parley-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
