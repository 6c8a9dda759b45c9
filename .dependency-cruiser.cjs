/**
 * The layer rules of docs/architecture.md ("Layers"), checked by dependency-cruiser on every
 * `npm test` (`npm run deps:check`). A rule that fails names the import that breaks it; fix the
 * import (move the code to its layer, or pass the dependency in from src/app.ts), not the rule.
 *
 * Type-only imports count (`tsPreCompilationDeps`): a cycle through types is still a cycle, and a
 * domain module that imports a GraphQL type still depends on the GraphQL layer.
 */

/** Plain TypeScript below the interfaces: no GraphQL, REST, HTTP edge, Express or Pothos. */
const domain = '^src/(admin|analytics|auth|db|evaluations|jobs|kb|lib|llm|runtime|transcripts)/';

/** The interface layers and the composition root, which only src/app.ts, server.ts and cli tie together. */
const interfaces = '^src/(graphql|rest|http)/';
const root = '^src/(app|server|services)[.]ts$';

/** npm packages of the interface layers. */
const interfacePackages = [
  'express',
  'graphql',
  'graphql-yoga',
  'graphql-sse',
  '@graphql-yoga/plugin-[^/]+',
  '@pothos/[^/]+',
  '@escape[.]tech/graphql-armor',
  'cors',
  'helmet',
  'busboy',
].map((name) => `(^|/)node_modules/${name}/`);

/** The database: the Prisma client wrapper, the generated clients and Prisma's packages. */
const database = ['^src/db/', '^src/generated/', '(^|/)node_modules/@prisma/', '(^|/)node_modules/[.]prisma/'];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only imports included: each module sits in one layer.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-not-interfaces',
      severity: 'error',
      comment:
        'Domain folders take what they need as arguments; they never import GraphQL, REST, the HTTP edge ' +
        'or the composition root.',
      from: { path: domain },
      to: { path: [interfaces, root, '^src/cli/'] },
    },
    {
      name: 'domain-not-interface-packages',
      severity: 'error',
      comment: 'Domain folders import no Express, GraphQL, Yoga or Pothos package.',
      from: { path: domain },
      to: { path: interfacePackages },
    },
    {
      name: 'graphql-not-rest',
      severity: 'error',
      comment:
        'GraphQL knows nothing of REST or the HTTP edge; what it needs of the route table (rate-limit field ' +
        'groups) src/app.ts hands to createParleyYoga. The Context is typed against GraphQLServices, not the ' +
        'services container.',
      from: { path: '^src/graphql/' },
      to: { path: ['^src/(rest|http)/', root, '^src/cli/'] },
    },
    {
      name: 'rest-not-database',
      severity: 'error',
      comment: 'REST routes run GraphQL operations; they never touch the database or Prisma.',
      from: { path: '^src/rest/' },
      to: { path: database },
    },
    {
      name: 'rest-not-root',
      severity: 'error',
      comment: 'The REST adapter gets the Yoga instance and the routes from src/app.ts.',
      from: { path: '^src/rest/' },
      to: { path: ['^src/http/', root, '^src/cli/'] },
    },
    {
      name: 'ops-not-interfaces',
      severity: 'error',
      comment:
        'src/ops holds instance-wide state (metrics registry, limiter core, tracer, shutdown signal): the ' +
        'interfaces import it, never the other way round. Yoga plugins live in src/graphql/plugins, ' +
        'Express middleware in src/http.',
      from: { path: '^src/ops/' },
      to: {
        path: [
          interfaces,
          root,
          '^src/cli/',
          ...['express', 'graphql-yoga', '@graphql-yoga/plugin-[^/]+', '@pothos/[^/]+', 'cors', 'helmet'].map(
            (name) => `(^|/)node_modules/${name}/`,
          ),
        ],
      },
    },
    {
      name: 'http-not-graphql',
      severity: 'error',
      comment: 'The HTTP edge (middleware) works on requests and responses; it does not reach into GraphQL.',
      from: { path: '^src/http/' },
      to: { path: ['^src/graphql/', root, '^src/cli/'] },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import the checker cannot resolve would escape every rule above.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Generated clients are targets of the rules, not code to check.
    doNotFollow: { path: ['node_modules', '^src/generated/'] },
    enhancedResolveOptions: {
      extensions: ['.ts', '.d.ts', '.js', '.json'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    moduleSystems: ['es6', 'cjs'],
  },
};
