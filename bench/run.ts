/**
 * npm run bench [-- <suite>... ] [--providers sqlite,postgresql] [--quick]   (entry: bench/main.ts)
 *
 * Runs the benchmark suites (all by default) and prints their figures, each beside a baseline
 * measured in the same run, then the table of issue 17 (bench/targets.ts): every measure with its
 * ratio and target, pass or miss. PostgreSQL runs on PARLEY_PG_ADMIN_URL (default the local server).
 */
import { createDatabaseTemplates, defaultBenchContext } from './lib';
import { suites } from './suites';
import { printTargets } from './targets';

const { ctx, names } = defaultBenchContext(process.argv.slice(2));
const unknown = names.filter((n) => !suites.some((s) => s.name === n));
if (unknown.length) {
  console.error(`unknown suite(s): ${unknown.join(', ')}; known: ${suites.map((s) => s.name).join(', ')}`);
  process.exit(2);
}
const selected = names.length ? suites.filter((s) => names.includes(s.name)) : suites;
console.log(
  `Parley benchmarks on Node ${process.version}, NODE_ENV=${process.env.NODE_ENV ?? '(unset)'}, providers: ${ctx.providers.join(', ')}${ctx.quick ? ' (quick)' : ''}`,
);
const runStarted = performance.now();
const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);
const took: string[] = [];
ctx.templates = createDatabaseTemplates(ctx.pgAdminUrl);
try {
  for (const suite of selected) {
    console.log(`\n=== ${suite.name}: ${suite.description}`);
    const started = performance.now();
    await suite.run(ctx);
    took.push(`${suite.name} ${seconds(started)} s`);
    console.log(`(${suite.name} took ${seconds(started)} s)`);
  }
} finally {
  await ctx.templates.drop();
}
printTargets();
console.log(
  `\nTotal wall time ${seconds(runStarted)} s${ctx.quick ? ' (quick)' : ''}, ${ctx.providers.join(', ')}: ${took.join(', ')}`,
);
process.exit(0);
