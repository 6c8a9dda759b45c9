import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

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
    // Most files wait on databases, child processes and sockets rather than the CPU: three forks
    // on a 2-core machine finish the suite in about half the time of vitest's default (cores - 1).
    // Each file has its own databases and ports, so files never share state.
    maxWorkers: 3,
    reporters: ['default'],
  },
});
