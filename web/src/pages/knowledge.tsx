import { useEffect, useState } from 'preact/hooks';
import { gql, gqlUpload, subscribe } from '../api';
import { useConsole } from '../context';
import { href, navigate } from '../router';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  formatTime,
  inputValue,
  JsonBlock,
  Loading,
  parseJsonObject,
  Section,
  useAsync,
} from '../ui';

interface Doc {
  documentID: string;
  status: { type: string; data: string | null };
  chunkCount: number;
  revision: number;
  updatedAt: string;
  metadata: Record<string, unknown>;
  data: { name: string; type: string; url: string | null; rowsCount: number | null };
}

const docFields =
  'documentID status { type data } chunkCount revision updatedAt metadata data { name type url rowsCount }';
const pageSize = 10;

function statusLabel(doc: Doc): string {
  if (doc.status.type === 'SUCCESS') return 'indexed';
  if (doc.status.type === 'PENDING') return 'indexing…';
  return 'failed';
}

function Upload({ onUploaded }: { onUploaded: (doc: Doc) => void }) {
  const { project } = useConsole();
  const [kind, setKind] = useState<'file' | 'url' | 'table'>('file');
  const [file, setFile] = useState<File | null>(null);
  const [url, setUrl] = useState('');
  const [metadata, setMetadata] = useState('');
  const [chunkSize, setChunkSize] = useState('1000');
  const [table, setTable] = useState({ name: '', searchable: '', metadataFields: '', items: '' });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="stack"
      aria-label="Upload"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setBusy(true);
        try {
          const meta = parseJsonObject(metadata, 'Metadata');
          let doc: Doc;
          if (kind === 'file') {
            if (!file) throw new Error('Choose a file.');
            const data = await gqlUpload<{ uploadKnowledgeBaseFile: Doc }>(
              `mutation UploadFile($file: File!, $projectID: ID, $metadata: JSONObject, $maxChunkSize: Int) {
                uploadKnowledgeBaseFile(file: $file, projectID: $projectID, metadata: $metadata, maxChunkSize: $maxChunkSize) { ${docFields} }
              }`,
              { projectID: project.id, metadata: meta, maxChunkSize: Number(chunkSize) },
              file,
            );
            doc = data.uploadKnowledgeBaseFile;
          } else if (kind === 'url') {
            const data = await gql<{ uploadKnowledgeBaseUrl: Doc }>(
              `mutation UploadUrl($url: String!, $projectID: ID, $metadata: JSONObject, $maxChunkSize: Int) {
                uploadKnowledgeBaseUrl(url: $url, projectID: $projectID, metadata: $metadata, maxChunkSize: $maxChunkSize) { ${docFields} }
              }`,
              { url, projectID: project.id, metadata: meta, maxChunkSize: Number(chunkSize) },
            );
            doc = data.uploadKnowledgeBaseUrl;
          } else {
            let items: unknown;
            try {
              items = JSON.parse(table.items);
            } catch (err) {
              throw new Error(`Rows are not valid JSON: ${(err as Error).message}`);
            }
            if (!Array.isArray(items)) throw new Error('Rows must be a JSON array of objects.');
            const list = (s: string) =>
              s
                .split(',')
                .map((x) => x.trim())
                .filter(Boolean);
            const data = await gql<{ uploadKnowledgeBaseTable: Doc }>(
              `mutation UploadTable($input: KnowledgeBaseTableInput!, $projectID: ID) {
                uploadKnowledgeBaseTable(input: $input, projectID: $projectID) { ${docFields} }
              }`,
              {
                projectID: project.id,
                input: {
                  name: table.name,
                  items,
                  metadata: meta,
                  schema: { searchableFields: list(table.searchable), metadataFields: list(table.metadataFields) },
                },
              },
            );
            doc = data.uploadKnowledgeBaseTable;
          }
          onUploaded(doc);
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <fieldset>
        <legend>Source</legend>
        {(['file', 'url', 'table'] as const).map((k) => (
          <label class="inline" key={k}>
            <input type="radio" name="kb-kind" checked={kind === k} onChange={() => setKind(k)} />{' '}
            {k === 'file' ? 'A file' : k === 'url' ? 'A web page' : 'A table'}
          </label>
        ))}
      </fieldset>
      {kind === 'file' ? (
        <Field label="File" hint=".txt, .md, .html, .pdf, .docx, .csv, .json">
          {(id) => (
            <input
              id={id}
              type="file"
              accept=".txt,.md,.html,.htm,.pdf,.docx,.csv,.json"
              onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)}
            />
          )}
        </Field>
      ) : null}
      {kind === 'url' ? (
        <Field label="URL">
          {(id) => <input id={id} type="url" required value={url} onInput={(e) => setUrl(inputValue(e))} />}
        </Field>
      ) : null}
      {kind === 'table' ? (
        <>
          <div class="toolbar">
            <Field label="Table name">
              {(id) => (
                <input
                  id={id}
                  required
                  value={table.name}
                  onInput={(e) => setTable({ ...table, name: inputValue(e) })}
                />
              )}
            </Field>
            <Field label="Searchable fields" hint="Comma-separated">
              {(id) => (
                <input
                  id={id}
                  required
                  value={table.searchable}
                  onInput={(e) => setTable({ ...table, searchable: inputValue(e) })}
                />
              )}
            </Field>
            <Field label="Metadata fields" hint="Comma-separated">
              {(id) => (
                <input
                  id={id}
                  value={table.metadataFields}
                  onInput={(e) => setTable({ ...table, metadataFields: inputValue(e) })}
                />
              )}
            </Field>
          </div>
          <Field label="Rows (JSON array)">
            {(id) => (
              <textarea
                id={id}
                rows={4}
                required
                value={table.items}
                onInput={(e) => setTable({ ...table, items: inputValue(e) })}
              />
            )}
          </Field>
        </>
      ) : null}
      <div class="toolbar">
        <Field label="Metadata (JSON object)">
          {(id) => (
            <textarea
              id={id}
              rows={2}
              value={metadata}
              placeholder='{"team": "support"}'
              onInput={(e) => setMetadata(inputValue(e))}
            />
          )}
        </Field>
        {kind !== 'table' ? (
          <Field label="Max chunk size (tokens)">
            {(id) => (
              <input id={id} type="number" min={1} value={chunkSize} onInput={(e) => setChunkSize(inputValue(e))} />
            )}
          </Field>
        ) : null}
      </div>
      <ErrorNote error={error} />
      <button class="primary" type="submit" disabled={busy}>
        Upload
      </button>
    </form>
  );
}

interface QueryChunk {
  chunkID: string;
  documentID: string;
  content: string;
  score: number;
  metadata: Record<string, unknown>;
  source: { name: string; type: string };
}

function QueryPlayground() {
  const { project, can } = useConsole();
  const [question, setQuestion] = useState('');
  const [filters, setFilters] = useState('');
  const [chunkLimit, setChunkLimit] = useState('3');
  const [synthesis, setSynthesis] = useState(true);
  const [chunks, setChunks] = useState<QueryChunk[] | null>(null);
  const [answer, setAnswer] = useState('');
  const [tokens, setTokens] = useState<{
    queryTokens: number;
    answerTokens: number;
    totalTokens: number;
    model: string | null;
  } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [running, setRunning] = useState(false);
  if (!can('kb:read')) return null;
  return (
    <Section title="Query playground">
      <form
        class="stack"
        aria-label="Query the knowledge base"
        onSubmit={(e) => {
          e.preventDefault();
          setError(null);
          setChunks(null);
          setAnswer('');
          setTokens(null);
          let parsed: unknown;
          try {
            parsed = filters.trim() ? JSON.parse(filters) : undefined;
          } catch (err) {
            setError(new Error(`The filter is not valid JSON: ${(err as Error).message}`));
            return;
          }
          setRunning(true);
          subscribe<{
            knowledgeBaseAnswer: {
              type: string;
              text: string | null;
              chunks: QueryChunk[] | null;
              result: {
                queryTokens: number;
                answerTokens: number;
                totalTokens: number;
                model: string | null;
                output: string | null;
              } | null;
            };
          }>(
            `subscription KbAnswer($input: KnowledgeBaseQueryInput!) {
              knowledgeBaseAnswer(input: $input) {
                type text
                chunks { chunkID documentID content score metadata source { name type } }
                result { queryTokens answerTokens totalTokens model output }
              }
            }`,
            {
              input: {
                projectID: project.id,
                question,
                filters: parsed,
                chunkLimit: Number(chunkLimit),
                synthesis,
              },
            },
            {
              next: ({ knowledgeBaseAnswer: ev }) => {
                if (ev.type === 'CHUNKS') setChunks(ev.chunks ?? []);
                if (ev.type === 'DELTA') setAnswer((a) => a + (ev.text ?? ''));
                if (ev.type === 'END' && ev.result) {
                  setTokens(ev.result);
                  if (ev.result.output) setAnswer(ev.result.output);
                }
              },
              error: (err) => {
                setError(err);
                setRunning(false);
              },
              complete: () => setRunning(false),
            },
          );
        }}
      >
        <Field label="Question">
          {(id) => <input id={id} required value={question} onInput={(e) => setQuestion(inputValue(e))} />}
        </Field>
        <Field label="Filter (JSON)" hint='For example {"team": {"$eq": "support"}} (docs/knowledge-base-filters.md)'>
          {(id) => <textarea id={id} rows={3} value={filters} onInput={(e) => setFilters(inputValue(e))} />}
        </Field>
        <div class="toolbar">
          <Field label="Chunks">
            {(id) => (
              <input
                id={id}
                type="number"
                min={1}
                max={10}
                value={chunkLimit}
                onInput={(e) => setChunkLimit(inputValue(e))}
              />
            )}
          </Field>
          <label class="inline">
            <input type="checkbox" checked={synthesis} onChange={() => setSynthesis(!synthesis)} /> Synthesize an answer
          </label>
        </div>
        <ErrorNote error={error} />
        <button class="primary" type="submit" disabled={running}>
          Ask
        </button>
      </form>
      {chunks ? (
        <section aria-label="Matched chunks">
          <h3>Matched chunks ({chunks.length})</h3>
          <ol class="plain chunks">
            {chunks.map((c) => (
              <li key={c.chunkID} class="item">
                <div class="row spread">
                  <a href={href('knowledge', c.documentID)}>{c.source.name}</a>
                  <span class="badge">score {c.score.toFixed(3)}</span>
                </div>
                <p class="chunk-text">{c.content}</p>
                <JsonBlock value={c.metadata} label="Chunk metadata" />
              </li>
            ))}
          </ol>
        </section>
      ) : null}
      {answer || tokens ? (
        <section aria-label="Answer">
          <h3>Answer</h3>
          <p class="answer">{answer || '(no answer)'}</p>
          {tokens ? (
            <p class="muted">
              {tokens.model ?? 'no model'} · {tokens.queryTokens} prompt + {tokens.answerTokens} answer ={' '}
              {tokens.totalTokens} tokens
            </p>
          ) : null}
        </section>
      ) : null}
    </Section>
  );
}

function DocumentList() {
  const { project, can } = useConsole();
  const [page, setPage] = useState(1);
  const [status, setStatus] = useState('');
  const docs = useAsync(
    () =>
      gql<{ knowledgeBaseDocuments: { total: number; documents: Doc[] } }>(
        `query KbDocuments($projectID: ID, $page: Int!, $limit: Int!, $status: KnowledgeBaseDocumentStatusType) {
          knowledgeBaseDocuments(projectID: $projectID, page: $page, limit: $limit, status: $status) { total documents { ${docFields} } }
        }`,
        { projectID: project.id, page, limit: pageSize, status: status || undefined },
      ),
    [project.id, page, status],
  );
  const pending = docs.data?.knowledgeBaseDocuments.documents.some((d) => d.status.type === 'PENDING');
  // Watch indexing: while a listed document is pending, look again every second.
  useEffect(() => {
    if (!pending) return;
    const timer = setTimeout(docs.reload, 1000);
    return () => clearTimeout(timer);
  }, [docs.data]);
  const total = docs.data?.knowledgeBaseDocuments.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / pageSize));
  return (
    <>
      {can('kb:write') ? (
        <Section title="Add a document">
          <Upload
            onUploaded={() => {
              setPage(1);
              docs.reload();
            }}
          />
        </Section>
      ) : null}
      <Section
        title={`Documents (${total})`}
        actions={
          <Field label="Status">
            {(id) => (
              <select id={id} value={status} onChange={(e) => setStatus(inputValue(e))}>
                <option value="">Any</option>
                <option value="SUCCESS">Indexed</option>
                <option value="PENDING">Indexing</option>
                <option value="ERROR">Failed</option>
              </select>
            )}
          </Field>
        }
      >
        <ErrorNote error={docs.error} />
        {docs.data ? (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Type</th>
                  <th scope="col">Status</th>
                  <th scope="col">Chunks</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {docs.data.knowledgeBaseDocuments.documents.map((d) => (
                  <tr key={d.documentID}>
                    <td>
                      <a href={href('knowledge', d.documentID)}>{d.data.name}</a>
                    </td>
                    <td>{d.data.type}</td>
                    <td>
                      <span class={`status ${d.status.type.toLowerCase()}`} title={d.status.data ?? undefined}>
                        {statusLabel(d)}
                      </span>
                    </td>
                    <td>{d.chunkCount}</td>
                    <td>{formatTime(d.updatedAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <Loading />
        )}
        <nav class="pager" aria-label="Document pages">
          <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
            Previous page
          </button>
          <span>
            Page {page} of {pages}
          </span>
          <button type="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
            Next page
          </button>
        </nav>
      </Section>
      <QueryPlayground />
    </>
  );
}

function DocumentView({ id }: { id: string }) {
  const { can } = useConsole();
  const doc = useAsync(
    () =>
      gql<{
        knowledgeBaseDocument: Doc & {
          chunks: {
            chunkID: string;
            position: number;
            tokens: number;
            content: string;
            metadata: Record<string, unknown>;
          }[];
        };
      }>(
        `query KbDocument($id: ID!) { knowledgeBaseDocument(documentID: $id) { ${docFields} chunks { chunkID position tokens content metadata } } }`,
        { id },
      ),
    [id],
  );
  const [metadata, setMetadata] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const d = doc.data?.knowledgeBaseDocument;
  useEffect(() => {
    if (d?.status.type !== 'PENDING') return;
    const timer = setTimeout(doc.reload, 1000);
    return () => clearTimeout(timer);
  }, [doc.data]);
  if (doc.error) return <ErrorNote error={doc.error} />;
  if (!d) return <Loading />;
  return (
    <div class="page">
      <p>
        <a href={href('knowledge')}>← All documents</a>
      </p>
      <h1>{d.data.name}</h1>
      <dl class="facts">
        <dt>Type</dt>
        <dd>{d.data.type}</dd>
        <dt>Status</dt>
        <dd>
          {statusLabel(d)}
          {d.status.data ? ` — ${d.status.data}` : ''}
        </dd>
        <dt>Chunks</dt>
        <dd>{d.chunkCount}</dd>
        <dt>Revision</dt>
        <dd>{d.revision}</dd>
        {d.data.url ? (
          <>
            <dt>URL</dt>
            <dd class="mono">{d.data.url}</dd>
          </>
        ) : null}
      </dl>
      <Section title="Metadata">
        {can('kb:write') ? (
          <form
            class="stack"
            aria-label="Edit metadata"
            onSubmit={async (e) => {
              e.preventDefault();
              setError(null);
              try {
                const meta = parseJsonObject(metadata ?? JSON.stringify(d.metadata), 'Metadata') ?? {};
                await gql(
                  'mutation KbMetadata($id: ID!, $metadata: JSONObject!) { updateKnowledgeBaseDocumentMetadata(documentID: $id, metadata: $metadata) { documentID } }',
                  { id: d.documentID, metadata: meta },
                );
                setMetadata(null);
                doc.reload();
              } catch (err) {
                setError(err);
              }
            }}
          >
            <Field label="Document metadata (JSON)">
              {(fid) => (
                <textarea
                  id={fid}
                  rows={4}
                  value={metadata ?? JSON.stringify(d.metadata, null, 2)}
                  onInput={(e) => setMetadata(inputValue(e))}
                />
              )}
            </Field>
            <ErrorNote error={error} />
            <div class="row">
              <button type="submit">Save metadata</button>
              <ConfirmButton
                label="Delete document"
                title="Delete this document?"
                message="The document, its chunks and their index entries are deleted."
                confirmLabel="Delete"
                danger
                onConfirm={async () => {
                  await gql('mutation KbDelete($id: ID!) { deleteKnowledgeBaseDocument(documentID: $id) }', {
                    id: d.documentID,
                  });
                  navigate('knowledge');
                }}
              />
            </div>
          </form>
        ) : (
          <JsonBlock value={d.metadata} label="Document metadata" />
        )}
      </Section>
      <Section title="Chunks">
        <ol class="plain chunks">
          {doc.data!.knowledgeBaseDocument.chunks.map((c) => (
            <li key={c.chunkID} class="item">
              <div class="row spread">
                <strong>Chunk {c.position + 1}</strong>
                <span class="muted">{c.tokens} tokens</span>
              </div>
              <p class="chunk-text">{c.content}</p>
              <JsonBlock value={c.metadata} label={`Chunk ${c.position + 1} metadata`} />
            </li>
          ))}
        </ol>
      </Section>
    </div>
  );
}

export function KnowledgePage({ path }: { path: string[] }) {
  if (path[0]) return <DocumentView id={path[0]} key={path[0]} />;
  return (
    <div class="page">
      <h1>Knowledge base</h1>
      <DocumentList />
    </div>
  );
}
