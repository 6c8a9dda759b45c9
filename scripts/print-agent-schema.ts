/**
 * Writes docs/agent-program.schema.json, the JSON Schema of agent programs, from the zod schema
 * the runtime validates programs with (built-in step types). A test fails when it is stale.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../src/db/schema-source';
import { programJsonSchema } from '../src/runtime/program/schema';
import { createDefaultStepRegistry } from '../src/runtime/steps';

const target = join(projectRoot, 'docs/agent-program.schema.json');
writeFileSync(target, `${JSON.stringify(programJsonSchema(createDefaultStepRegistry()), null, 2)}\n`);
// Formatted as the linter wants it, so `biome check` stays clean; the test compares the JSON itself.
execFileSync(join(projectRoot, 'node_modules/.bin/biome'), ['format', '--write', target], { stdio: 'ignore' });
console.error(`wrote ${target}`);
