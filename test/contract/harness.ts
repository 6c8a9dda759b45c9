import { readdirSync, readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { expect } from 'vitest';
import { contractDeviations } from '../../src/rest/contract-deviations';
import type { HttpResponse } from '../helpers/app';
import { errorBodyJsonSchema } from '../helpers/error-body';
import { knownMismatches } from './pending';

/**
 * The contract harness (docs/rest.md "Contract tests"). The original service's OpenAPI documents are
 * copied into test/fixtures/contract/ by scripts/extract-contract-schemas.ts; for a response got through
 * real HTTP, `conforms(route, res, status)` finds every document that describes the route, refuses a
 * status none of them documents (unless `undocumentedStatuses` below allows it for that route, with the
 * reason), validates the body against each document's schema for that status with ajv, and validates
 * every error body against DECISIONS.md §3 too. Each checked (route, status) is recorded so a suite can
 * prove it drove every documented route (`uncovered`).
 */

export interface ContractResponse {
  description: string;
  contentType: string | null;
  schema: unknown;
}

export interface ContractFixture {
  source: string;
  corrections: string[];
  routes: Record<string, Record<string, ContractResponse>>;
}

const fixtureDir = new URL('../fixtures/contract/', import.meta.url);

/** Every copied document by file name. */
export const documents: Record<string, ContractFixture> = Object.fromEntries(
  readdirSync(fixtureDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => [f, JSON.parse(readFileSync(new URL(f, fixtureDir), 'utf8')) as ContractFixture]),
);

/** `METHOD /path/{param}` of every route of a document. */
export function routesOf(document: string): string[] {
  const fixture = documents[document];
  if (!fixture) throw new Error(`no contract fixture ${document}`);
  return Object.keys(fixture.routes);
}

const authReason =
  'every document declares the apiKey `authorization` scheme for this route but lists no 401; a missing, unknown or foreign key is 401 (DECISIONS.md §2), with the error body of DECISIONS.md §3';
const notFoundReason =
  'the document lists only success; an ID that does not exist, or belongs to a project the key does not reach, is 404 (DECISIONS.md §2) with the error body of DECISIONS.md §3';
const badRequestReason =
  'the document lists only success but declares a request schema; a body or path parameter that breaks it is 400 (DECISIONS.md §3) with the error body of DECISIONS.md §3';
const conflictReason = 'property and evaluation names are unique per project: a duplicate is 409 (DECISIONS.md §3)';

/**
 * Statuses Parley answers on a documented route that its document does not list, per route, with the
 * reason. A status neither documented nor listed here fails the check.
 */
export const undocumentedStatuses: Record<string, Record<number, string>> = {
  'POST /v1/transcript/project/{projectID}': { 400: badRequestReason, 401: authReason, 404: notFoundReason },
  'GET /v1/transcript/{transcriptID}': { 400: badRequestReason, 401: authReason, 404: notFoundReason },
  'DELETE /v1/transcript/{transcriptID}': { 401: authReason, 404: notFoundReason },
  'GET /v1/transcript-property/project/{projectID}': { 401: authReason, 404: notFoundReason },
  'GET /v1/transcript-property/{propertyID}': { 401: authReason, 404: notFoundReason },
  'PATCH /v1/transcript-property/{propertyID}': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
    409: `${conflictReason}; a type change that existing values would not parse under is 409 too`,
  },
  'DELETE /v1/transcript-property/{propertyID}': { 401: authReason, 404: notFoundReason },
  'POST /v1/transcript-property': { 400: badRequestReason, 401: authReason, 404: notFoundReason, 409: conflictReason },
  'POST /v1/transcript-property-value': { 400: badRequestReason, 401: authReason, 404: notFoundReason },
  'DELETE /v1/transcript-property-value/transcript/{transcriptID}/property/{propertyID}': {
    401: authReason,
    404: notFoundReason,
  },
  'GET /v1/transcript-property-value/transcript/{transcriptID}': { 401: authReason, 404: notFoundReason },
  'POST /v1/transcript-evaluation': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
    409: conflictReason,
  },
  'PATCH /v1/transcript-evaluation/{evaluationID}': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
    409: conflictReason,
  },
  'GET /v1/transcript-evaluation/{evaluationID}': { 401: authReason, 404: notFoundReason },
  'DELETE /v1/transcript-evaluation/{evaluationID}': { 401: authReason, 404: notFoundReason },
  'GET /v1/transcript-evaluation/project/{projectID}': { 401: authReason, 404: notFoundReason },
  'POST /v1/transcript-evaluation/queue': { 400: badRequestReason, 401: authReason, 404: notFoundReason },
  'POST /v1/transcript-evaluation/{evaluationID}/transcript/{transcriptID}': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
  },
  'POST /v1/transcript-evaluation/estimate': { 400: badRequestReason, 401: authReason, 404: notFoundReason },
  'POST /v1/query/usage': { 400: badRequestReason },
  'POST /v2/project/{projectID}/user/{userID}/interact/stream': {},
  'POST /v2/query/usage': { 400: badRequestReason },
  'POST /knowledge-base/query': {
    400: badRequestReason,
    401: authReason,
    422: 'an invalid metadata filter is 422 naming the problem (DECISIONS.md §7)',
  },
  'GET /v1/knowledge-base/docs': { 400: badRequestReason, 401: authReason },
  'GET /v1/knowledge-base/docs/{documentID}': { 401: authReason, 404: notFoundReason },
  'DELETE /v1/knowledge-base/docs/{documentID}': { 401: authReason, 404: notFoundReason },
  'PATCH /v1/knowledge-base/docs/{documentID}': { 401: authReason, 404: notFoundReason },
  'POST /v1/knowledge-base/docs/upload': {
    400: badRequestReason,
    401: authReason,
    413: 'a file over the configured limit is 413 (DECISIONS.md §3, §7)',
    415: 'a file type Parley cannot parse is 415 (DECISIONS.md §3, §7)',
  },
  'PUT /v1/knowledge-base/docs/{documentID}/upload': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
    415: 'a file type Parley cannot parse is 415 (DECISIONS.md §3, §7)',
  },
  'POST /v1/knowledge-base/docs/upload/url': { 400: badRequestReason, 401: authReason },
  'PUT /v1/knowledge-base/docs/{documentID}/upload/url': {
    400: `${badRequestReason}; a document that is not a URL document is 400 too (a file is replaced at /upload)`,
    401: authReason,
    404: notFoundReason,
  },
  'PATCH /v1/knowledge-base/docs/{documentID}/chunk/{chunkID}': {
    400: badRequestReason,
    401: authReason,
    404: `${notFoundReason}; so is a chunk ID that is not one of this document's chunks`,
  },
  'POST /v3alpha/knowledge-base/tags': {
    400: badRequestReason,
    401: authReason,
    409: 'tag labels are unique per project: a duplicate is 409 (DECISIONS.md §3)',
  },
  'GET /v3alpha/knowledge-base/tags': { 401: authReason },
  'GET /v3alpha/knowledge-base/tags/{tagID}': {
    400: 'a tagID that is not an ID is 400 naming the parameter (DECISIONS.md §3)',
    401: authReason,
    404: notFoundReason,
  },
  'PATCH /v3alpha/knowledge-base/tags/{tagID}': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
    409: 'tag labels are unique per project: relabelling to a label in use is 409 (DECISIONS.md §3)',
  },
  'DELETE /v3alpha/knowledge-base/tags/{tagID}': { 401: authReason, 404: notFoundReason },
  'POST /v3alpha/knowledge-base/docs/{documentID}/tags/attach': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
  },
  'POST /v3alpha/knowledge-base/docs/{documentID}/tags/detach': {
    400: badRequestReason,
    401: authReason,
    404: notFoundReason,
  },
  'POST /v1/knowledge-base/docs/upload/table': {
    401: 'the document lists 403 for a refused key; Parley answers 401 for a missing, unknown or foreign key, as on every route (DECISIONS.md §2)',
  },
};

const ajv = new Ajv({ strict: false, allErrors: true });
// The documents' formats: date-time as RFC 3339 (a real instant, with its zone); event-stream names the
// media type of a stream body, which is not JSON and is checked by the stream tests.
ajv.addFormat(
  'date-time',
  (value: string) =>
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) && !Number.isNaN(Date.parse(value)),
);
ajv.addFormat('event-stream', true);

type SchemaNode = Record<string, unknown>;

/** Deletes `keyword` at `segments` (members, `[]` for items) in every oneOf/anyOf/allOf branch; returns how often. */
function relax(schema: unknown, segments: string[], keyword: string): number {
  if (!schema || typeof schema !== 'object') return 0;
  const node = schema as SchemaNode;
  let count = 0;
  for (const combinator of ['oneOf', 'anyOf', 'allOf']) {
    const branches = node[combinator];
    if (Array.isArray(branches)) for (const branch of branches) count += relax(branch, segments, keyword);
  }
  const [head, ...rest] = segments;
  if (head === undefined) {
    if (keyword in node) {
      delete node[keyword];
      count++;
    }
    return count;
  }
  const next = head === '[]' ? node.items : (node.properties as SchemaNode | undefined)?.[head];
  return count + relax(next, rest, keyword);
}

/** The document's schema with the deviations of src/rest/contract-deviations.ts for this route and status. */
function withDeviations(route: string, status: number, schema: unknown): unknown {
  const copy = structuredClone(schema);
  for (const d of contractDeviations) {
    if (d.route !== route || d.status !== status) continue;
    if (relax(copy, d.at.split('.'), d.keyword) === 0) {
      throw new Error(`contract deviation ${d.route} ${d.status} ${d.at} ${d.keyword} matches nothing in the schema`);
    }
  }
  return copy;
}

/** DECISIONS.md §3. */
const errorBody = ajv.compile(errorBodyJsonSchema);

const validators = new Map<string, ValidateFunction>();
function validatorFor(document: string, route: string, status: string, schema: unknown): ValidateFunction {
  const key = `${document} ${route} ${status}`;
  let v = validators.get(key);
  if (!v) {
    v = ajv.compile(withDeviations(route, Number(status), schema) as object);
    validators.set(key, v);
  }
  return v;
}

/**
 * (document, route, status) triples checked, per test file. Test files share their worker's module
 * graph (vitest.config.ts, `isolate: false`), so this module is loaded once for several contract
 * files: keyed by the file that is running, each file's coverage check sees only its own checks.
 */
const exercisedByFile = new Map<string, Set<string>>();

/** The triples checked by the test file that is running. */
function exercisedHere(): Set<string> {
  const file = expect.getState().testPath;
  if (!file) throw new Error('the contract harness runs inside a vitest test file only');
  let set = exercisedByFile.get(file);
  if (!set) {
    set = new Set();
    exercisedByFile.set(file, set);
  }
  return set;
}

/** The documents that describe `route` (`METHOD /path/{param}`). */
export function documentsOf(route: string): string[] {
  return Object.keys(documents).filter((d) => documents[d]?.routes[route]);
}

/**
 * Checks a response got through real HTTP against the documents of its route: the status is `status`,
 * documented (or allowed by `undocumentedStatuses` for this route), and the body validates against each
 * document's schema for it; an error body also validates against DECISIONS.md §3. Returns the body.
 */
// biome-ignore lint/suspicious/noExplicitAny: the caller reads the body it just checked.
export function conforms(route: string, res: HttpResponse, status: number): any {
  expect(res.status, `${route}: ${res.text}`).toBe(status);
  const docs = documentsOf(route);
  expect(docs, `${route} is in no contract document`).not.toHaveLength(0);
  const mismatch = knownMismatches[`${route} ${status}`];
  const invalidIn: string[] = [];
  for (const document of docs) {
    const responses = documents[document]!.routes[route]!;
    const documentedResponse = responses[String(status)];
    if (!documentedResponse) {
      const reason = undocumentedStatuses[route]?.[status];
      expect(reason, `${document} does not document ${status} for ${route} and no exception allows it`).toBeTruthy();
    } else if (documentedResponse.schema !== null) {
      if (documentedResponse.contentType && status < 400) {
        const type = documentedResponse.contentType.includes('json') ? 'json' : documentedResponse.contentType;
        expect(res.headers.get('content-type') ?? '', `${document} ${route} ${status}: content type`).toContain(type);
      }
      const v = validatorFor(document, route, String(status), documentedResponse.schema);
      const valid = v(res.body);
      if (!valid) invalidIn.push(document);
      if (!mismatch)
        expect(valid, `${document} ${route} ${status}: ${JSON.stringify(v.errors)} in ${res.text}`).toBe(true);
    } else if (status < 400 && documentedResponse.contentType === null) {
      // A documented success with no content (the KB and tag deletes, attach, detach): an empty body.
      expect(res.text, `${document} ${route} ${status}: the document shows no content`).toBe('');
    } else if (status !== 204) {
      // A documented status without a body schema (401 of the usage queries): the JSON of DECISIONS.md.
      expect(res.headers.get('content-type') ?? '').toMatch(/json/);
    }
    if (status === 204) expect(res.text).toBe('');
    exercisedHere().add(`${document} ${route} ${status}`);
  }
  if (mismatch) {
    expect(
      invalidIn,
      `${route} ${status} validates now: remove it from knownMismatches (test/contract/pending.ts)`,
    ).not.toEqual([]);
  }
  if (status >= 400) {
    expect(errorBody(res.body), `${route} ${status}: ${JSON.stringify(errorBody.errors)}`).toBe(true);
    expect(res.body.statusCode).toBe(status);
  }
  return res.body;
}

/** The documented routes of `document` that no check of this file reached, minus `pending`. */
export function uncovered(document: string, pending: Record<string, string> = {}): string[] {
  const exercised = exercisedHere();
  return routesOf(document).filter(
    (route) => !pending[route] && ![...exercised].some((e) => e.startsWith(`${document} ${route} `)),
  );
}

/**
 * The documented statuses of `document` that no check of this file reached (error statuses included),
 * minus the routes in `pending` and the statuses in `unanswered` (`METHOD /path status`).
 */
export function uncoveredStatuses(
  document: string,
  pending: Record<string, string> = {},
  unanswered: Record<string, string> = {},
): string[] {
  const exercised = exercisedHere();
  const out: string[] = [];
  for (const [route, statuses] of Object.entries(documents[document]?.routes ?? {})) {
    if (pending[route]) continue;
    for (const status of Object.keys(statuses)) {
      if (unanswered[`${route} ${status}`]) continue;
      if (!exercised.has(`${document} ${route} ${status}`)) out.push(`${route} ${status}`);
    }
  }
  return out;
}
