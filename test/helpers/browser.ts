import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type BrowserContext, chromium } from 'playwright-core';
import { describe } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { consoleDistDir } from '../../src/ops/console';
import { lanes } from './lanes';

let building: Promise<void> | null = null;

/** Builds the console once per process when web/dist has no build (a checkout without `npm ci`). */
export function ensureConsoleBuild(): Promise<void> {
  if (existsSync(join(consoleDistDir, 'index.html'))) return Promise.resolve();
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
