import { type Client, createClient } from 'graphql-sse';

/** Who is signed in: an API key, or the operator's admin token with the project it picked. */
export interface Session {
  kind: 'key' | 'operator';
  token: string;
}

const storageKey = 'parley.console.session';

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(storageKey);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Session;
    return parsed && typeof parsed.token === 'string' ? parsed : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session | null): void {
  if (session) sessionStorage.setItem(storageKey, JSON.stringify(session));
  else sessionStorage.removeItem(storageKey);
}

/** A GraphQL error as the console shows it: Parley's message and code, never a stack. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly path: string | null = null,
    readonly details: unknown = null,
  ) {
    super(message);
  }
}

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: { code?: string; details?: unknown } }[];
}

let currentToken = '';

export function setToken(token: string): void {
  currentToken = token;
  sseClient?.dispose();
  sseClient = null;
}

function toError<T>(body: GraphQLResponse<T>, status: number): ApiError {
  const first = body.errors?.[0];
  if (!first) return new ApiError(`The server answered ${status}.`, 'HTTP_ERROR');
  return new ApiError(
    first.message,
    first.extensions?.code ?? 'ERROR',
    first.path?.join('.') ?? null,
    first.extensions?.details ?? null,
  );
}

async function send<T>(init: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch('/graphql', init);
  } catch {
    throw new ApiError('Parley is not reachable. Check that the server runs.', 'NETWORK');
  }
  let body: GraphQLResponse<T>;
  try {
    body = (await res.json()) as GraphQLResponse<T>;
  } catch {
    throw new ApiError(`The server answered ${res.status} without a GraphQL body.`, 'HTTP_ERROR');
  }
  if (body.errors?.length || !body.data) throw toError(body, res.status);
  return body.data;
}

/** Runs a query or mutation against /graphql with the session's Authorization. */
export function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  return send<T>({
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: currentToken },
    body: JSON.stringify({ query, variables }),
  });
}

/** A mutation with one file, as a GraphQL multipart request (the `file` variable). */
export function gqlUpload<T>(query: string, variables: Record<string, unknown>, file: File): Promise<T> {
  const form = new FormData();
  form.append('operations', JSON.stringify({ query, variables: { ...variables, file: null } }));
  form.append('map', JSON.stringify({ 0: ['variables.file'] }));
  form.append('0', file, file.name);
  return send<T>({
    method: 'POST',
    headers: { accept: 'application/json', authorization: currentToken },
    body: form,
  });
}

let sseClient: Client | null = null;

function client(): Client {
  if (!sseClient) {
    const token = currentToken;
    sseClient = createClient({
      url: '/graphql',
      singleConnection: false,
      headers: () => ({ authorization: token }),
      retryAttempts: 3,
    });
  }
  return sseClient;
}

export interface SubscriptionSink<T> {
  next(data: T): void;
  error?(err: ApiError): void;
  complete?(): void;
}

/** Subscribes over graphql-sse; returns the function that ends the subscription. */
export function subscribe<T>(query: string, variables: Record<string, unknown>, sink: SubscriptionSink<T>): () => void {
  return client().subscribe<T>(
    { query, variables },
    {
      next: (result) => {
        if (result.errors?.length) {
          const first = result.errors[0]!;
          const ext = (first as { extensions?: { code?: string } }).extensions;
          sink.error?.(new ApiError(first.message, ext?.code ?? 'ERROR'));
          return;
        }
        if (result.data) sink.next(result.data as T);
      },
      error: (err) => {
        if (err instanceof Error) sink.error?.(new ApiError(err.message, 'STREAM'));
        else if (Array.isArray(err)) sink.error?.(new ApiError(String(err[0]?.message ?? 'Stream error'), 'STREAM'));
        else sink.error?.(new ApiError('The live stream closed.', 'STREAM'));
      },
      complete: () => sink.complete?.(),
    },
  );
}

export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}
