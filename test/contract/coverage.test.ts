import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { routes } from '../../src/rest/routes';
import { documents } from './harness';
import { exercisedElsewhere, notYetImplemented } from './pending';

/**
 * Every (method, path) of every copied OpenAPI document is either driven by a contract test (the
 * route is named in a test/contract/*.test.ts file, whose last test proves at run time that it was
 * checked), or by the test named in `exercisedElsewhere`, or listed in `notYetImplemented` with a
 * reason — and a route listed as not yet implemented that Parley now serves fails, so the list
 * shrinks as routes land.
 */

const contractDir = new URL('./', import.meta.url);
const contractSources = readdirSync(contractDir)
  .filter((f) => f.endsWith('.test.ts') && f !== 'coverage.test.ts')
  .map((f) => readFileSync(new URL(f, contractDir), 'utf8'));
const repoRoot = new URL('../../', import.meta.url);

/** `METHOD /path/{param}` of the REST table. */
const served = new Set(routes.map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`));

const documented = [...new Set(Object.values(documents).flatMap((d) => Object.keys(d.routes)))].sort();

describe('contract coverage', () => {
  it('copies every document (and names its source)', () => {
    expect(Object.keys(documents).length).toBeGreaterThanOrEqual(10);
    for (const [name, d] of Object.entries(documents)) expect(d.source, name).toContain(name);
  });

  it.each(documented)('%s is driven by a contract test, proven elsewhere or listed as not yet implemented', (route) => {
    const pending = notYetImplemented[route];
    const elsewhere = exercisedElsewhere[route];
    if (pending) {
      expect(pending.length).toBeGreaterThan(20);
      expect(
        served.has(route),
        `${route} is served now: drive it in a contract test and remove it from notYetImplemented`,
      ).toBe(false);
      return;
    }
    expect(served.has(route), `${route} is documented but not in the REST table`).toBe(true);
    if (elsewhere) {
      expect(readFileSync(new URL(elsewhere, repoRoot), 'utf8')).toContain(`'${route}'`);
      return;
    }
    expect(
      contractSources.some((s) => s.includes(`'${route}'`)),
      `no contract test names '${route}'`,
    ).toBe(true);
  });

  it('lists no route twice and none that is not documented', () => {
    for (const route of [...Object.keys(notYetImplemented), ...Object.keys(exercisedElsewhere)]) {
      expect(documented).toContain(route);
    }
    for (const route of Object.keys(notYetImplemented)) expect(exercisedElsewhere[route]).toBeUndefined();
  });
});
