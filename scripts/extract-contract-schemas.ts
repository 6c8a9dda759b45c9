/**
 * Copies the response schemas of the original service's OpenAPI documents into the contract test
 * fixtures (test/fixtures/contract/<document>.json), so the contract suite (test/contract/) runs
 * without ../shared. One entry per (method, path template, status), with every `$ref` inlined.
 *
 *   npx tsx scripts/extract-contract-schemas.ts [<folder of the documents>]   (default ../shared/reference/voiceflow-openapi)
 *   npx tsx scripts/extract-contract-schemas.ts --check                        fails when a fixture is stale
 *
 * Corrections to a document (where it contradicts itself or its own examples) are listed below with
 * their reason and recorded in the fixture beside the schema they change; nothing else is edited.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { projectRoot } from '../src/db/schema-source';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface ContractResponse {
  description: string;
  /** The media type of the documented body, or null when the status has no body. */
  contentType: string | null;
  /** The documented body schema with its `$ref`s inlined, or null when none is documented. */
  schema: Json | null;
}

export interface ContractFixture {
  source: string;
  corrections: string[];
  /** `METHOD /path/{param}` → status → response. */
  routes: Record<string, Record<string, ContractResponse>>;
}

interface Correction {
  document: string;
  route: string;
  status: string;
  reason: string;
  apply(schema: JsonObject): void;
}

/** Walks a schema and calls `visit` on every object in it. */
function walk(node: Json, visit: (object: JsonObject) => void): void {
  if (Array.isArray(node)) for (const item of node) walk(item, visit);
  else if (node && typeof node === 'object') {
    visit(node);
    for (const value of Object.values(node)) walk(value, visit);
  }
}

const corrections: Correction[] = [
  {
    document: 'analytics-api.json',
    route: 'POST /v1/query/usage',
    status: '200',
    reason:
      'result.items: oneOf -> anyOf. Four of the seven alternatives are the same {count} object (interactions, sessions, unique_users), so with oneOf no count result can ever validate; the items are the union the document means.',
    apply(schema) {
      walk(schema, (o) => {
        if (o.type === 'array' && o.items && typeof o.items === 'object' && !Array.isArray(o.items)) {
          const items = o.items as JsonObject;
          if (Array.isArray(items.oneOf) && items.oneOf.length === 7) {
            items.anyOf = items.oneOf;
            delete items.oneOf;
          }
        }
      });
    },
  },
  {
    document: 'analytics-api-usage-v2.json',
    route: 'POST /v2/query/usage',
    status: '200',
    reason:
      'result: oneOf -> anyOf. The unique_users alternative ({items: [{period, projectID, environmentID, count}]}) is a subset of every other items alternative, so with oneOf no items result can ever validate; the result is the union the document means.',
    apply(schema) {
      const result = (schema.properties as JsonObject | undefined)?.result as JsonObject | undefined;
      if (result && Array.isArray(result.oneOf)) {
        result.anyOf = result.oneOf;
        delete result.oneOf;
      }
    },
  },
  ...[
    'knowledge-base-apis.json',
    'knowledge-base-management-apis-3.json',
    'knowledge-base-management-apis-4.json',
    'knowledge-base-management-apis-5.json',
  ].map(
    (document): Correction => ({
      document,
      route: 'GET /v1/knowledge-base/docs/{documentID}',
      status: '200',
      reason:
        "chunks[].chunkID: integer -> string. The same documents type a chunk ID as a string everywhere else (the query's chunks[].chunkID, the chunkID path parameter of PATCH .../chunk/{chunkID}), and a client sends the ID it read here back in that path; Parley's chunk IDs are UUIDs (DECISIONS.md section 1).",
      apply(schema) {
        const chunks = (schema.properties as JsonObject | undefined)?.chunks as JsonObject | undefined;
        const chunkID = ((chunks?.items as JsonObject | undefined)?.properties as JsonObject | undefined)?.chunkID as
          | JsonObject
          | undefined;
        if (chunkID?.type === 'integer') chunkID.type = 'string';
      },
    }),
  ),
];

/**
 * OpenAPI 3.0's dialect as JSON Schema (several documents use it, even under `openapi: 3.1.0`):
 * `nullable: true` admits null; boolean `exclusiveMinimum`/`exclusiveMaximum` qualify `minimum`/`maximum`.
 */
function toJsonSchema(node: Json): void {
  walk(node, (o) => {
    if (o.nullable === true) {
      if (typeof o.type === 'string') o.type = [o.type, 'null'];
      else if (Array.isArray(o.type) && !o.type.includes('null')) o.type = [...o.type, 'null'];
      if (Array.isArray(o.enum) && !o.enum.includes(null)) o.enum = [...o.enum, null];
    }
    if (o.nullable !== undefined) delete o.nullable;
    for (const [exclusive, bound] of [
      ['exclusiveMinimum', 'minimum'],
      ['exclusiveMaximum', 'maximum'],
    ] as const) {
      if (typeof o[exclusive] !== 'boolean') continue;
      if (o[exclusive] === true && typeof o[bound] === 'number') {
        o[exclusive] = o[bound];
        delete o[bound];
      } else delete o[exclusive];
    }
  });
}

function resolvePointer(document: JsonObject, ref: string): Json {
  if (!ref.startsWith('#/')) throw new Error(`external $ref ${ref} is not supported`);
  let node: Json = document;
  for (const raw of ref.slice(2).split('/')) {
    const segment = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (!node || typeof node !== 'object' || Array.isArray(node) || !(segment in node)) {
      throw new Error(`$ref ${ref} does not resolve`);
    }
    node = (node as JsonObject)[segment] as Json;
  }
  return node;
}

/** A copy of `node` with every `$ref` replaced by what it points to; a cycle is an error. */
function inline(document: JsonObject, node: Json, seen: string[] = []): Json {
  if (Array.isArray(node)) return node.map((item) => inline(document, item, seen));
  if (!node || typeof node !== 'object') return node;
  if (typeof node.$ref === 'string') {
    const ref = node.$ref;
    if (seen.includes(ref)) throw new Error(`recursive $ref ${[...seen, ref].join(' -> ')}`);
    const { $ref: _ref, ...siblings } = node;
    const target = inline(document, resolvePointer(document, ref), [...seen, ref]);
    return Object.keys(siblings).length ? { allOf: [target, inline(document, siblings, seen)] } : target;
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    // Examples document, they do not constrain; they only make the fixtures large.
    if (key === 'example' || key === 'examples') continue;
    out[key] = inline(document, value, seen);
  }
  return out;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

export function extract(name: string, document: JsonObject): ContractFixture {
  const routes: ContractFixture['routes'] = {};
  const applied: string[] = [];
  const paths = (document.paths ?? {}) as Record<string, JsonObject>;
  for (const [path, item] of Object.entries(paths)) {
    for (const method of METHODS) {
      const operation = item[method] as JsonObject | undefined;
      if (!operation?.responses) continue;
      const key = `${method.toUpperCase()} ${path}`;
      const statuses: Record<string, ContractResponse> = {};
      for (const [status, raw] of Object.entries(operation.responses as Record<string, Json>)) {
        const response = inline(document, raw) as JsonObject;
        const content = (response.content ?? {}) as Record<string, JsonObject>;
        const contentType = Object.keys(content).find((t) => t.includes('json')) ?? Object.keys(content)[0] ?? null;
        const schema = contentType ? ((content[contentType]?.schema ?? null) as Json) : null;
        if (schema !== null) toJsonSchema(schema);
        statuses[status] = { description: String(response.description ?? ''), contentType, schema };
      }
      for (const c of corrections) {
        if (c.document !== name || c.route !== key) continue;
        const target = statuses[c.status]?.schema;
        if (!target || typeof target !== 'object' || Array.isArray(target)) {
          throw new Error(`correction of ${name} ${key} ${c.status}: no schema to correct`);
        }
        const before = JSON.stringify(target);
        c.apply(target);
        if (JSON.stringify(target) === before)
          throw new Error(`correction of ${name} ${key} ${c.status} changed nothing`);
        applied.push(`${key} ${c.status}: ${c.reason}`);
      }
      routes[key] = statuses;
    }
  }
  return {
    source: `voiceflow-docs reference/${name} (the original service's OpenAPI document, copied from ../shared/reference/voiceflow-openapi/ by scripts/extract-contract-schemas.ts); examples stripped, $refs inlined, OpenAPI 3.0's nullable and boolean exclusiveMinimum/exclusiveMaximum written as JSON Schema.`,
    corrections: applied,
    routes,
  };
}

function main() {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const folder = resolve(
    args.find((a) => !a.startsWith('--')) ?? join(projectRoot, '../shared/reference/voiceflow-openapi'),
  );
  const outDir = join(projectRoot, 'test/fixtures/contract');
  if (!existsSync(folder)) {
    console.error(`no OpenAPI documents at ${folder}: pass the folder as the first argument`);
    process.exit(1);
  }
  mkdirSync(outDir, { recursive: true });
  let stale = 0;
  for (const file of readdirSync(folder)
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const document = JSON.parse(readFileSync(join(folder, file), 'utf8')) as JsonObject;
    const fixture = extract(file, document);
    const text = `${JSON.stringify(fixture, null, 2)}\n`;
    const out = join(outDir, basename(file));
    const count = Object.keys(fixture.routes).length;
    if (check) {
      const current = existsSync(out) ? readFileSync(out, 'utf8') : '';
      if (current !== text) {
        console.error(`${out} is stale`);
        stale++;
      }
    } else {
      writeFileSync(out, text);
      console.log(`${file}: ${count} route(s), ${fixture.corrections.length} correction(s)`);
    }
  }
  if (stale) process.exit(1);
}

main();
