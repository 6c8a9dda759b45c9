import { createClient, NetworkError } from 'graphql-sse';
import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

interface Answer {
  status: number;
  contentType: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: each assertion reads the members it needs.
  body: any;
}

async function post(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), body: JSON.parse(text) };
}

interface Refusal {
  status: number;
  contentType: string | null;
  /** Null when the client had already let go of the body (single connection mode aborts it). */
  text: string | null;
}

/**
 * Subscribes with the graphql-sse client and returns how the subscription ended: a refusal (the
 * client's NetworkError with its response), a result, or completion.
 */
function subscribeOnce(
  url: string,
  singleConnection: boolean,
  key: string,
  query: string,
  variables: Record<string, unknown>,
): Promise<{ refused?: Refusal; error?: unknown; next?: unknown }> {
  const client = createClient({ url, singleConnection, headers: { authorization: key }, retryAttempts: 0 });
  return new Promise<{ refused?: Refusal; error?: unknown; next?: unknown }>((resolve) => {
    client.subscribe(
      { query, variables },
      {
        next: (value) => resolve({ next: value }),
        error: (error) => {
          if (!(error instanceof NetworkError) || !error.response) {
            resolve({ error });
            return;
          }
          const response = error.response as Response;
          const refused = { status: response.status, contentType: response.headers.get('content-type') };
          response.text().then(
            (text) => resolve({ refused: { ...refused, text } }),
            () => resolve({ refused: { ...refused, text: null } }),
          );
        },
        complete: () => resolve({}),
      },
    );
  }).finally(() => client.dispose());
}

/** graphql-sse's single connection mode by hand: reserve a stream, then send the operation with its token. */
async function singleConnectionOperation(
  base: string,
  key: string,
  query: string,
  variables: Record<string, unknown>,
): Promise<{ status: number; text: string }> {
  const token = await (await fetch(`${base}/graphql/stream`, { method: 'PUT' })).text();
  const res = await fetch(`${base}/graphql/stream`, {
    method: 'POST',
    headers: { 'x-graphql-event-stream-token': token, 'content-type': 'application/json', authorization: key },
    body: JSON.stringify({ query, variables, extensions: { operationId: '1' } }),
  });
  return { status: res.status, text: await res.text() };
}

describeEachDatabase('GraphQL error responses over HTTP', (provider) => {
  const t = useTestApp(provider);
  const viewer = JSON.stringify({ query: '{ viewer { kind } }' });

  it('answers errors as JSON, in the media type the Accept header asks for', async () => {
    const p = await t.app.createProject();
    const cases: [string | undefined, string][] = [
      [undefined, 'application/json'],
      ['*/*', 'application/json'],
      ['application/json', 'application/json'],
      ['application/graphql-response+json', 'application/graphql-response+json'],
      ['application/graphql-response+json, application/json;q=0.9', 'application/json'],
    ];
    for (const [accept, mediaType] of cases) {
      const headers: Record<string, string> = accept ? { accept } : {};
      const noKey = await post(`${t.app.url}/graphql`, viewer, headers);
      expect(noKey.status, String(accept)).toBe(401);
      expect(noKey.contentType, String(accept)).toBe(`${mediaType}; charset=utf-8`);
      expect(noKey.body.errors[0]).toMatchObject({
        message: expect.stringMatching(/Missing Authorization/),
        extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } },
      });
      const unknownField = await post(`${t.app.url}/graphql`, JSON.stringify({ query: '{ nope }' }), {
        ...headers,
        authorization: p.apiKey,
      });
      expect(unknownField.contentType, String(accept)).toBe(`${mediaType}; charset=utf-8`);
      expect(unknownField.body.errors[0].message).toMatch(/Cannot query field "nope"/);
      // GraphQL over HTTP: application/json may answer a document error with 200; the newer media type with 4xx.
      expect(unknownField.status).toBe(mediaType === 'application/json' ? 200 : 400);
    }
  });

  it('names malformed JSON without echoing the parser', async () => {
    const p = await t.app.createProject();
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      const res = await post(`${t.app.url}/graphql`, '{"query": "{ viewer', { accept, authorization: p.apiKey });
      expect(res.status).toBe(400);
      expect(res.contentType).toBe(`${accept}; charset=utf-8`);
      expect(res.body).toEqual({
        errors: [
          {
            message: 'The request body is not valid JSON.',
            extensions: { code: 'MALFORMED_JSON', http: { status: 400 } },
          },
        ],
      });
    }
  });

  it('says why a subscription is refused, in both graphql-sse connection modes', async () => {
    const p = await t.app.createProject();
    const subscription = 'subscription($id: ID!) { transcriptEvents(transcriptID: $id) { kind } }';
    const missing = { id: 'ffffffffffffffffffffffff' };
    for (const singleConnection of [false, true]) {
      const url = `${t.app.url}${singleConnection ? '/graphql/stream' : '/graphql'}`;
      const mode = singleConnection ? 'single connection' : 'distinct connections';
      const cases: [string, number, string, RegExp][] = [
        ['not-a-key', 401, 'UNAUTHENTICATED', /Malformed API key/],
        [`ak.${'0'.repeat(24)}.${'x'.repeat(43)}`, 401, 'UNAUTHENTICATED', /Unknown API key/],
        [p.apiKey, 404, 'NOT_FOUND', /Transcript "ffffffffffffffffffffffff" not found/],
      ];
      for (const [key, status, code, message] of cases) {
        const outcome = await subscribeOnce(url, singleConnection, key, subscription, missing);
        expect(outcome.refused, `${mode} ${status}: ${JSON.stringify(outcome)}`).toBeDefined();
        const refused = outcome.refused!;
        expect(refused.status, mode).toBe(status);
        expect(refused.contentType, mode).toMatch(/^application\/json/);
        // The single connection client aborts the body it refused; read it as that client's request sends it.
        const text = refused.text ?? (await singleConnectionOperation(t.app.url, key, subscription, missing)).text;
        const [first] = (JSON.parse(text) as { errors: { message: string; extensions: { code: string } }[] }).errors;
        expect(first?.message, mode).toMatch(message);
        expect(first?.extensions.code, mode).toBe(code);
      }
      // A document that does not validate is a 400 naming the field, not "Unable to detect operation AST".
      const invalid = await subscribeOnce(url, singleConnection, p.apiKey, 'subscription { nope }', {});
      expect(JSON.stringify(invalid), mode).not.toMatch(/operation AST/);
      if (invalid.refused) {
        expect(invalid.refused.status, mode).toBe(400);
        const text =
          invalid.refused.text ??
          (await singleConnectionOperation(t.app.url, p.apiKey, 'subscription { nope }', {})).text;
        expect(text, mode).toMatch(/Cannot query field \\"nope\\"/);
      } else {
        // Distinct connections may carry a validation error as the stream's one result (GraphQL over SSE).
        expect(JSON.stringify(invalid.next ?? invalid.error), mode).toMatch(/Cannot query field \\"nope/);
      }
    }
  });
});
