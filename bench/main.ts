/**
 * The entry of `npm run bench`: the suites measure the server as a production deployment runs it,
 * with `NODE_ENV=production` in the process (the Dockerfile sets it), so graphql's and Express's
 * development-only checks are off in the servers and in the bare baselines alike. It is set here,
 * before any module that reads it at load (graphql's `instanceOf`) is imported; a NODE_ENV given
 * on the command line wins.
 */
process.env.NODE_ENV ??= 'production';
await import('./run');
