import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, printSchema, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { schema } from '../../src/graphql/schema';
import { routes } from '../../src/rest/routes';

describe('the GraphQL schema', () => {
  it('matches the committed schema.graphql (run `npm run schema:print` after changing it)', () => {
    const committed = readFileSync(join(projectRoot, 'schema.graphql'), 'utf8');
    expect(committed).toBe(`${printSchema(schema)}\n`);
  });

  it('resolves subscription events with the field resolver alone; arguments and scopes are checked on subscribe', () => {
    const fields = Object.values(schema.getSubscriptionType()!.getFields());
    expect(fields.map((f) => f.name)).toContain('interact');
    for (const field of fields) {
      const config = field.extensions.pothosConfig as { resolve: unknown; subscribe: unknown };
      // Per event: the resolver itself, without the argument mappers (validation) around it.
      expect(field.resolve, field.name).toBe(config.resolve);
      // Once, on subscribe: still wrapped by the plugins (validation, scope-auth).
      expect(field.subscribe, field.name).not.toBe(config.subscribe);
    }
  });

  it('accepts the operation of every REST route', () => {
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) {
      const errors = validate(schema, parse(route.operation));
      expect(
        errors.map((e) => e.message),
        `${route.method} ${route.path}`,
      ).toEqual([]);
    }
  });

  it('has one route per method and path', () => {
    const keys = routes.map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
