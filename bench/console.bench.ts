import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { Provider } from '../src/db/schema-source';
import type { BenchContext, BenchSuite } from './lib';
import { fmt, printTable, startBenchServer, summarize } from './lib';
import { postgresDriver, seed, sqliteDriver } from './transcripts.bench';

/**
 * Issue 16: "a search over 100k transcripts stays paged and answers in under a second in the
 * browser". The transcripts of the transcript benchmark (100k, with 1M logs, property values and
 * evaluation results, bulk-inserted), a real server, and the console in headless Chromium (Debian's
 * `chromium`, or PARLEY_TEST_CHROMIUM): each figure is the time from the click (Search, Next page)
 * to the table showing the new rows, as the user sees it — the request, the server's search, the
 * answer's parsing and Preact's rendering. `--quick` uses 5k transcripts.
 */

const headingOf = (page: Page) => page.locator('section h2').filter({ hasText: /^[\d,]+ transcripts?$/ });

/**
 * Clicks, then waits (polling each animation frame) until the table's first row differs from
 * before and the heading and pager read `expect`: the new rows are on the screen.
 */
async function clickAndWaitForRows(page: Page, click: () => Promise<void>, expect: RegExp): Promise<number> {
  const before = (await page.locator('table tbody tr').first().textContent()) ?? '';
  const started = performance.now();
  await click();
  await page.waitForFunction(
    ({ before, pattern }) => {
      const row = document.querySelector('table tbody tr');
      const pager = document.querySelector('nav.pager span')?.textContent ?? '';
      const heading = [...document.querySelectorAll('section h2')].map((h) => h.textContent ?? '').join(' ');
      return row !== null && row.textContent !== before && new RegExp(pattern).test(`${heading} ${pager}`);
    },
    { before, pattern: expect.source },
    { timeout: 30_000, polling: 'raf' },
  );
  return performance.now() - started;
}

/** Alternates a search of every transcript and one of a user's (so each changes the table), then pages on. */
async function measure(page: Page, transcripts: number, iterations: number) {
  const all = new RegExp(`^${transcripts.toLocaleString('en-US')} transcripts`);
  const search = () => page.getByRole('button', { name: 'Search', exact: true }).click();
  const everything: number[] = [];
  const byUser: number[] = [];
  const paging: number[] = [];
  // The first round warms up (JIT, statement caches) and is not counted.
  for (let i = 0; i <= iterations; i++) {
    // user-999 owns the newest transcript: the others change the first row.
    await page.getByLabel('User ID').fill(`user-${(i * 7) % 999}`);
    const u = await clickAndWaitForRows(page, search, /^[\d,]+ transcripts? /);
    await page.getByLabel('User ID').fill('');
    const a = await clickAndWaitForRows(page, search, all);
    if (i > 0) {
      byUser.push(u);
      everything.push(a);
    }
  }
  for (let i = 0; i <= iterations; i++) {
    const n = await clickAndWaitForRows(
      page,
      () => page.getByRole('button', { name: 'Next page' }).click(),
      new RegExp(`Page ${i + 2} of`),
    );
    if (i > 0) paging.push(n);
  }
  return [
    ['search: every transcript (count and first page)', summarize(everything)],
    ['search: userID (100 of them)', summarize(byUser)],
    ['next page (every transcript)', summarize(paging)],
  ] as const;
}

async function runProvider(ctx: BenchContext, provider: Provider, browser: Browser, rows: (string | number)[][]) {
  const transcripts = ctx.quick ? 5_000 : 100_000;
  const iterations = ctx.quick ? 5 : 20;
  const server = await startBenchServer(ctx, provider, { JOBS_ENABLED: 'false' });
  const driver = provider === 'sqlite' ? sqliteDriver(server.database.url) : postgresDriver(server.database.url);
  try {
    const seeded = performance.now();
    await seed(server, driver, transcripts);
    console.log(
      `[${provider}] seeded ${transcripts.toLocaleString('en-US')} transcripts in ${((performance.now() - seeded) / 1000).toFixed(1)} s`,
    );
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`${server.url}/`);
    await page.getByRole('textbox', { name: 'API key' }).fill(server.project.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Transcripts' }).click();
    await headingOf(page).first().waitFor({ timeout: 60_000 });
    for (const [name, sum] of await measure(page, transcripts, iterations)) {
      rows.push([provider, name, fmt(sum.p50), fmt(sum.p95), fmt(sum.p99), sum.p95 < 1000 ? 'yes' : 'NO']);
    }
    if (errors.length) throw new Error(`console errors: ${errors.join('; ')}`);
    await context.close();
  } finally {
    await driver.close();
    await server.close();
  }
}

export const consoleBench: BenchSuite = {
  name: 'console',
  description: 'the console in Chromium: transcript search and paging over 100k transcripts, click to rendered rows',
  async run(ctx) {
    const executablePath = process.env.PARLEY_TEST_CHROMIUM ?? '/usr/bin/chromium';
    if (!existsSync(executablePath)) {
      console.log(`skipped: no Chromium at ${executablePath} (set PARLEY_TEST_CHROMIUM)`);
      return;
    }
    const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
    const rows: (string | number)[][] = [];
    try {
      for (const provider of ctx.providers) await runProvider(ctx, provider, browser, rows);
    } finally {
      await browser.close();
    }
    printTable('Console transcript search, click to rendered rows (ms)', [
      ['provider', 'action', 'p50', 'p95', 'p99', 'p95 < 1 s'],
      ...rows,
    ]);
  },
};
