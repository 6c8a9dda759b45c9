/** The error body of DECISIONS.md §3 as a JSON Schema, for the tests that check responses with ajv. */
export const errorBodyJsonSchema = {
  type: 'object',
  required: ['statusCode', 'statusText', 'errorCode', 'message'],
  additionalProperties: false,
  properties: {
    statusCode: { type: 'integer' },
    statusText: { type: 'string' },
    errorCode: { type: 'string' },
    message: { type: 'string', minLength: 1 },
    details: {
      type: 'array',
      items: {
        type: 'object',
        required: ['path', 'message'],
        properties: { path: { type: 'string' }, message: { type: 'string' } },
      },
    },
    requestID: { type: 'string' },
  },
} as const;
