/**
 * Where Parley's REST answers knowingly differ from the original service's published OpenAPI
 * documents (../shared/reference/voiceflow-openapi/), each with the reason DECISIONS.md gives.
 * docs/rest.md lists them (scripts/print-rest-docs.ts), and the contract suite (test/contract/)
 * relaxes exactly these schema keywords for exactly these routes, and nothing else.
 */
export interface ContractDeviation {
  /** `METHOD /path/{param}` as the document writes it. */
  route: string;
  status: number;
  /** Where in the body: members separated by dots, `[]` for the items of an array. */
  at: string;
  /** The JSON Schema keyword of the document that Parley does not meet there. */
  keyword: string;
  reason: string;
}

const anyModel =
  "Parley's models are whatever the operator configures (DECISIONS.md §8: an OpenAI-compatible provider, hosted or local such as Ollama or vLLM), so an evaluation's `settings.model` is any model name, not one of the original's hosted models";

const moreFileTypes =
  'Parley parses more file types than the original (DECISIONS.md §7: .txt, .md, .html, .pdf, .docx, .csv, .json, and tables), so a source type may also be markdown, html, csv, json or table';

export const contractDeviations: ContractDeviation[] = [
  ...(
    [
      ['POST /v1/knowledge-base/docs/upload', 'data.[].data.type'],
      ['PUT /v1/knowledge-base/docs/{documentID}/upload', 'data.[].data.type'],
      ['GET /v1/knowledge-base/docs', 'data.[].data.type'],
      ['GET /v1/knowledge-base/docs/{documentID}', 'data.[].data.type'],
      ['PATCH /v1/knowledge-base/docs/{documentID}', 'data.data.type'],
      ['PATCH /v1/knowledge-base/docs/{documentID}/chunk/{chunkID}', 'data.data.type'],
    ] as const
  ).map(([route, at]): ContractDeviation => ({ route, status: 200, at, keyword: 'enum', reason: moreFileTypes })),
  {
    route: 'POST /knowledge-base/query',
    status: 200,
    at: 'chunks.[].source.type',
    keyword: 'enum',
    reason: moreFileTypes,
  },
  {
    route: 'POST /v1/transcript-evaluation',
    status: 201,
    at: 'evaluation.settings.model',
    keyword: 'enum',
    reason: anyModel,
  },
  {
    route: 'GET /v1/transcript-evaluation/{evaluationID}',
    status: 200,
    at: 'evaluation.settings.model',
    keyword: 'enum',
    reason: anyModel,
  },
  {
    route: 'GET /v1/transcript-evaluation/project/{projectID}',
    status: 200,
    at: 'evaluations.[].settings.model',
    keyword: 'enum',
    reason: anyModel,
  },
];
