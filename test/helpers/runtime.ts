import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TurnRecord, TurnRecorder } from '../../src/runtime/turn-record';
import type { TestApp } from './app';
import { readSse, type SseReaderOptions, type SseReading } from './sse';

/** Helpers for runtime tests: publishing, turns over REST, a recording TurnRecorder, a local API. */

export interface Turn {
  status: number;
  body: unknown;
}

/** Publishes `program` through the GraphQL mutation (as the operator); returns the payload or throws. */
export async function publish(app: TestApp, projectID: string, program: unknown, environment = 'development') {
  const res = await app.gql(
    `mutation($input: PublishAgentInput!) {
      publishAgent(input: $input) { created agent { id name } version { id number } environment { alias } warnings { path message } }
    }`,
    { input: { projectID, program, environment } },
  );
  if (res.body.errors) throw new Error(`publish failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data.publishAgent as {
    created: boolean;
    agent: { id: string; name: string };
    version: { id: string; number: number };
    environment: { alias: string };
    warnings: { path: string; message: string }[];
  };
}

/** The non-stream endpoint: the traces of one turn. */
export async function interact(
  app: TestApp,
  key: string,
  projectID: string,
  userID: string,
  body: Record<string, unknown>,
  query: Record<string, string> = {},
) {
  return app.http<Record<string, unknown>[]>(
    'POST',
    `/v2/project/${projectID}/user/${encodeURIComponent(userID)}/interact`,
    {
      key,
      body,
      query,
    },
  );
}

/** POSTs to a stream endpoint and reads the whole stream. */
export async function stream(
  app: TestApp,
  path: string,
  opts: { key: string; body: unknown; query?: Record<string, string>; signal?: AbortSignal } & SseReaderOptions,
): Promise<{ response: Response; reading: SseReading }> {
  const url = new URL(path, app.url);
  for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: opts.key, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(opts.body),
    signal: opts.signal,
  });
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    throw new Error(`not a stream: ${response.status} ${await response.text()}`);
  }
  const reading = await readSse(response, opts);
  return { response, reading };
}

export const v2StreamPath = (projectID: string, userID: string) =>
  `/v2/project/${projectID}/user/${encodeURIComponent(userID)}/interact/stream`;

/** A TurnRecorder that keeps every record, for assertions. */
export function recordingRecorder(): TurnRecorder & {
  records: TurnRecord[];
  waitFor(pred: (r: TurnRecord) => boolean, ms?: number): Promise<TurnRecord>;
} {
  const records: TurnRecord[] = [];
  return {
    records,
    async record(turn) {
      records.push(structuredClone(turn));
    },
    async waitFor(pred, ms = 15_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = records.find(pred);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no matching turn record in ${ms} ms; have ${records.length}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

export interface LocalApi {
  url: string;
  /** Every request received, with when its answer was sent. */
  requests: {
    method: string;
    url: string;
    headers: IncomingMessage['headers'];
    body: string;
    answeredAt: number | null;
  }[];
  close(): Promise<void>;
}

/** A local HTTP server answering with `handler`'s result (status, JSON body, optional delay). */
export async function startLocalApi(
  handler: (req: { method: string; url: string; body: string }) => { status: number; body: unknown; delayMs?: number },
): Promise<LocalApi> {
  const requests: LocalApi['requests'] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const entry = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        answeredAt: null as number | null,
      };
      requests.push(entry);
      const answer = handler({ method: entry.method, url: entry.url, body });
      setTimeout(() => {
        entry.answeredAt = performance.now();
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer.body));
      }, answer.delayMs ?? 0);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
