import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const require = createRequire(import.meta.url);

/** A test file that starts `parley` processes or a browser: each start costs seconds of CPU. */
const startsProcesses = /bin\/parley\.js|startServeProcess|chromium|spawn\(/;

/**
 * Vitest runs the files it has no timings for first, larger files first. A fresh checkout (CI) has
 * no timings, and the files that start processes are not the largest: the slowest of them
 * (test/cli/cli.test.ts) started last and ran alone at the end. Among files without timings, those
 * that start processes go first; with timings (a second local run), vitest's own order (longest
 * first) stands.
 */
class ProcessesFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const timed = (f: TestSpecification) =>
      this.ctx.cache.getFileTestResults(`${f.project.name}:${relative(this.ctx.config.root, f.moduleId)}`);
    const weight = (f: TestSpecification) => {
      if (timed(f)) return 1;
      try {
        return startsProcesses.test(readFileSync(f.moduleId, 'utf8')) ? 0 : 1;
      } catch {
        return 1;
      }
    };
    const weights = new Map(sorted.map((f) => [f, weight(f)]));
    // Array.prototype.sort is stable: within each group the base order stays.
    return [...sorted].sort((a, b) => weights.get(a)! - weights.get(b)!);
  }
}

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (main) and ESM (module). Node, and so every dependency, loads the CJS
    // build; Vite would pick the ESM one for our sources, and two graphql instances cannot share
    // a schema. Make the tests load the one Node loads, as the server does at run time.
    alias: { graphql: require.resolve('graphql') },
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Each of the three forks runs its share of the files one after another in one module graph,
    // instead of a fresh process per file: loading the application (Prisma, the Pothos schema,
    // graphql, the OpenTelemetry API) for every file was 486 s of the suite's import time, summed
    // over 99 files, on a 2-core machine where vitest took 680-729 s in all. A file must therefore
    // leave nothing process-wide behind for the next file in its fork (docs/architecture.md,
    // "Tests"): OpenTelemetry registrations (test/helpers/spans.ts clears them after the file),
    // per-file state in a shared helper module (the contract harness keys it by the running file),
    // spies and stubs (restored below, and vitest restores every mock after each file), servers
    // and timers (closed in afterAll).
    isolate: false,
    restoreMocks: true,
    unstubEnvs: true,
    unstubGlobals: true,
    // Most files wait on databases, child processes and sockets rather than the CPU: three forks
    // on a 2-core machine finish the suite in about half the time of vitest's default (cores - 1).
    // Each file has its own databases and ports, so files never share stored state.
    maxWorkers: 3,
    sequence: { sequencer: ProcessesFirstSequencer },
    reporters: ['default'],
  },
});
