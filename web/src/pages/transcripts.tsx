import { useEffect, useState } from 'preact/hooks';
import { gql, subscribe } from '../api';
import { useConsole } from '../context';
import { href, navigate } from '../router';
import { ConfirmButton, ErrorNote, Field, formatTime, inputValue, JsonBlock, Loading, Section, useAsync } from '../ui';

interface TranscriptRow {
  id: string;
  sessionID: string;
  userID: string | null;
  createdAt: string;
  endedAt: string | null;
  environmentID: string;
}

interface Definition {
  id: string;
  name: string;
  type: string;
}

interface FilterRow {
  id: string;
  op: string;
  value: string;
}

const ops = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'between', 'contains', 'in', 'nin', 'exists', 'not_exists'];
const pageSize = 20;

const searchQuery = `query TranscriptSearch($projectID: ID!, $criteria: TranscriptSearchCriteria, $first: Int!, $skip: Int!) {
  transcripts(projectID: $projectID, criteria: $criteria, first: $first, skip: $skip) {
    totalCount
    edges { node { id sessionID userID createdAt endedAt environmentID } }
  }
}`;

/** A filter row's value as the search wants it: a scalar, [low, high], a list, or nothing. */
function filterValue(row: FilterRow, type: string): unknown {
  if (row.op === 'exists' || row.op === 'not_exists') return undefined;
  const scalar = (text: string): unknown => {
    const t = text.trim();
    if (type === 'number') {
      const n = Number(t);
      if (!t || Number.isNaN(n)) throw new Error(`"${t}" is not a number.`);
      return n;
    }
    if (type === 'boolean') {
      if (t !== 'true' && t !== 'false') throw new Error('A boolean filter takes true or false.');
      return t === 'true';
    }
    return t;
  };
  if (row.op === 'between') {
    const parts = row.value.split(',');
    if (parts.length !== 2) throw new Error('"between" takes two values separated by a comma.');
    return parts.map(scalar);
  }
  if (row.op === 'in' || row.op === 'nin') return row.value.split(',').map(scalar);
  return scalar(row.value);
}

function dateInput(value: string, endOfDay: boolean): string | undefined {
  if (!value) return undefined;
  const d = new Date(`${value}T00:00:00`);
  if (endOfDay) d.setDate(d.getDate() + 1);
  return d.toISOString();
}

function SearchPage() {
  const { project } = useConsole();
  const definitions = useAsync(
    () =>
      gql<{ transcriptProperties: Definition[]; transcriptEvaluations: Definition[] }>(
        `query SearchDefinitions($projectID: ID!) {
          transcriptProperties(projectID: $projectID) { id name type }
          transcriptEvaluations(projectID: $projectID) { id name type }
        }`,
        { projectID: project.id },
      ),
    [project.id],
  );
  const [form, setForm] = useState({ from: '', to: '', userID: '', sessionID: '', ended: '', environment: '' });
  const [filters, setFilters] = useState<FilterRow[]>([]);
  const [criteria, setCriteria] = useState<Record<string, unknown>>({});
  const [page, setPage] = useState(0);
  const [formError, setFormError] = useState<unknown>(null);
  const results = useAsync(
    () =>
      gql<{ transcripts: { totalCount: number; edges: { node: TranscriptRow }[] } }>(searchQuery, {
        projectID: project.id,
        criteria,
        first: pageSize,
        skip: page * pageSize,
      }),
    [project.id, criteria, page],
  );
  const all = [
    ...(definitions.data?.transcriptProperties ?? []).map((d) => ({ ...d, kind: 'Property' })),
    ...(definitions.data?.transcriptEvaluations ?? []).map((d) => ({ ...d, kind: 'Evaluation' })),
  ];
  const envAlias = (id: string) => project.environments.find((e) => e.id === id)?.alias ?? id;
  const total = results.data?.transcripts.totalCount ?? 0;
  const pages = Math.max(1, Math.ceil(total / pageSize));

  const submit = (e: Event) => {
    e.preventDefault();
    setFormError(null);
    try {
      const c: Record<string, unknown> = {};
      if (form.from) c.startDate = dateInput(form.from, false);
      if (form.to) c.endDate = dateInput(form.to, true);
      if (form.userID.trim()) c.userID = form.userID.trim();
      if (form.sessionID.trim()) c.sessionID = form.sessionID.trim();
      if (form.ended) c.ended = form.ended === 'yes';
      if (form.environment) c.environmentID = form.environment;
      if (filters.length)
        c.filters = filters.map((f) => {
          const def = all.find((d) => d.id === f.id);
          if (!def) throw new Error('Choose a property or evaluation for every filter.');
          const value = filterValue(f, def.type);
          return value === undefined ? { id: f.id, op: f.op } : { id: f.id, op: f.op, value };
        });
      setPage(0);
      setCriteria(c);
    } catch (err) {
      setFormError(err);
    }
  };
  const set = (key: keyof typeof form) => (e: Event) =>
    setForm({ ...form, [key]: (e.currentTarget as HTMLInputElement).value });

  return (
    <div class="page">
      <h1>Transcripts</h1>
      <form class="card search" aria-label="Search transcripts" onSubmit={submit}>
        <div class="toolbar">
          <Field label="Created from">
            {(id) => <input id={id} type="date" value={form.from} onInput={set('from')} />}
          </Field>
          <Field label="Created until">
            {(id) => <input id={id} type="date" value={form.to} onInput={set('to')} />}
          </Field>
          <Field label="User ID">{(id) => <input id={id} value={form.userID} onInput={set('userID')} />}</Field>
          <Field label="Session ID">
            {(id) => <input id={id} value={form.sessionID} onInput={set('sessionID')} />}
          </Field>
          <Field label="Ended">
            {(id) => (
              <select id={id} value={form.ended} onChange={set('ended')}>
                <option value="">Any</option>
                <option value="yes">Ended</option>
                <option value="no">Open</option>
              </select>
            )}
          </Field>
          <Field label="Environment">
            {(id) => (
              <select id={id} value={form.environment} onChange={set('environment')}>
                <option value="">All</option>
                {project.environments.map((env) => (
                  <option key={env.id} value={env.id}>
                    {env.alias}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
        <fieldset>
          <legend>Property and evaluation filters (all must match)</legend>
          {filters.map((f, i) => (
            <div class="toolbar" key={i}>
              <Field label={`Filter ${i + 1} on`}>
                {(id) => (
                  <select
                    id={id}
                    value={f.id}
                    onChange={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, id: inputValue(e) } : x)))}
                  >
                    <option value="">Choose…</option>
                    {all.map((d) => (
                      <option key={d.id} value={d.id}>
                        {d.kind}: {d.name} ({d.type})
                      </option>
                    ))}
                  </select>
                )}
              </Field>
              <Field label={`Filter ${i + 1} operator`}>
                {(id) => (
                  <select
                    id={id}
                    value={f.op}
                    onChange={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, op: inputValue(e) } : x)))}
                  >
                    {ops.map((o) => (
                      <option key={o} value={o}>
                        {o}
                      </option>
                    ))}
                  </select>
                )}
              </Field>
              <Field label={`Filter ${i + 1} value`} hint="Lists and between: values separated by commas.">
                {(id) => (
                  <input
                    id={id}
                    value={f.value}
                    disabled={f.op === 'exists' || f.op === 'not_exists'}
                    onInput={(e) => setFilters(filters.map((x, j) => (j === i ? { ...x, value: inputValue(e) } : x)))}
                  />
                )}
              </Field>
              <button type="button" onClick={() => setFilters(filters.filter((_, j) => j !== i))}>
                Remove filter {i + 1}
              </button>
            </div>
          ))}
          <button
            type="button"
            disabled={all.length === 0 || filters.length >= 50}
            onClick={() => setFilters([...filters, { id: all[0]?.id ?? '', op: 'eq', value: '' }])}
          >
            Add filter
          </button>
        </fieldset>
        <ErrorNote error={formError} />
        <button class="primary" type="submit">
          Search
        </button>
      </form>

      <ErrorNote error={results.error} />
      {results.data ? (
        <Section title={`${total.toLocaleString()} ${total === 1 ? 'transcript' : 'transcripts'}`}>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">User</th>
                  <th scope="col" class="hide-narrow">
                    Session
                  </th>
                  <th scope="col" class="hide-narrow">
                    Environment
                  </th>
                  <th scope="col">Status</th>
                </tr>
              </thead>
              <tbody>
                {results.data.transcripts.edges.map(({ node }) => (
                  <tr key={node.id}>
                    <td>
                      <a href={href('transcripts', node.id)}>{formatTime(node.createdAt)}</a>
                    </td>
                    <td>{node.userID ?? '—'}</td>
                    <td class="mono hide-narrow">{node.sessionID}</td>
                    <td class="hide-narrow">{envAlias(node.environmentID)}</td>
                    <td>{node.endedAt ? 'ended' : 'open'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <nav class="pager" aria-label="Pages">
            <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>
              Previous page
            </button>
            <span>
              Page {page + 1} of {pages}
            </span>
            <button type="button" disabled={page + 1 >= pages} onClick={() => setPage(page + 1)}>
              Next page
            </button>
          </nav>
        </Section>
      ) : results.loading ? (
        <Loading />
      ) : null}
    </div>
  );
}

interface Log {
  id: string;
  type: string;
  createdAt: string;
  data: unknown;
}

interface Result {
  id: string;
  evaluationID: string;
  name: string;
  type: string;
  status: string;
  value: unknown;
  reason: string | null;
  error: string | null;
  model: string | null;
  cost: number | null;
  updatedAt: string;
}

interface PropertyValue {
  propertyID: string;
  name: string;
  type: string;
  value: string;
}

interface TranscriptDetail extends TranscriptRow {
  device: string | null;
  browser: string | null;
  os: string | null;
  feedback: { turnID: string; rating: 'positive' | 'negative' }[];
  logs: Log[];
  properties: PropertyValue[];
  evaluations: Result[];
}

const resultFields = 'id evaluationID name type status value reason error model cost updatedAt';
const detailQuery = `query TranscriptDetail($id: ID!, $unredacted: Boolean!, $projectID: ID!) {
  transcript(id: $id) {
    id sessionID userID createdAt endedAt environmentID device browser os
    feedback { turnID rating }
    logs(unredacted: $unredacted) { id type createdAt data }
    properties { propertyID name type value }
    evaluations { ${resultFields} }
  }
  transcriptProperties(projectID: $projectID) { id name type }
}`;

type Rec = Record<string, unknown>;
const asRec = (v: unknown): Rec => (v && typeof v === 'object' ? (v as Rec) : {});

/** What a log says in the conversation view; null for traces only "every trace" shows. */
function bubble(log: Log): { who: 'user' | 'agent'; text: string; buttons?: string[] } | null {
  const data = asRec(log.data);
  const payload = data.payload;
  if (log.type === 'action') {
    const type = String(data.type ?? '');
    if (type === 'launch') return { who: 'user', text: '(started the conversation)' };
    if (type === 'text') return { who: 'user', text: String(payload ?? '') };
    if (type === 'intent') return { who: 'user', text: String(asRec(asRec(payload).intent).name ?? 'intent') };
    const label = asRec(payload).label;
    return { who: 'user', text: typeof label === 'string' ? label : `(${type})` };
  }
  if (log.type !== 'trace') return null;
  const type = String(data.type ?? '');
  const p = asRec(payload);
  if (type === 'text' || type === 'speak') return { who: 'agent', text: String(p.message ?? '') };
  if (type === 'choice') {
    const buttons = Array.isArray(p.buttons) ? p.buttons.map((b) => String(asRec(b).name ?? '')) : [];
    return { who: 'agent', text: '', buttons };
  }
  return null;
}

function Conversation({ logs, everyTrace }: { logs: Log[]; everyTrace: boolean }) {
  return (
    <ol class="conversation" aria-label="Conversation">
      {logs.map((log) => {
        const b = bubble(log);
        if (b && (b.text || b.buttons?.length))
          return (
            <li key={log.id} class={`msg ${b.who}`}>
              <span class="who">{b.who === 'user' ? 'User' : 'Agent'}</span>
              {b.text ? <p>{b.text}</p> : null}
              {b.buttons?.length ? (
                <ul class="buttons" aria-label="Buttons offered">
                  {b.buttons.map((name) => (
                    <li key={name}>{name}</li>
                  ))}
                </ul>
              ) : null}
            </li>
          );
        if (!everyTrace) return null;
        const data = asRec(log.data);
        return (
          <li key={log.id} class="msg trace">
            <span class="who">
              {log.type}
              {data.type ? `: ${String(data.type)}` : ''} · {formatTime(log.createdAt)}
            </span>
            <JsonBlock value={log.data} label={`${log.type} ${String(data.type ?? '')}`} />
          </li>
        );
      })}
    </ol>
  );
}

function formatValue(value: unknown): string {
  if (value === null || value === undefined) return '—';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function TranscriptView({ id }: { id: string }) {
  const { project, can } = useConsole();
  const [unredacted, setUnredacted] = useState(false);
  const [everyTrace, setEveryTrace] = useState(false);
  const detail = useAsync(
    () =>
      gql<{ transcript: TranscriptDetail; transcriptProperties: Definition[] }>(detailQuery, {
        id,
        unredacted,
        projectID: project.id,
      }),
    [id, unredacted],
  );
  const [propID, setPropID] = useState('');
  const [propValue, setPropValue] = useState('');
  const [actionError, setActionError] = useState<unknown>(null);
  const [live, setLive] = useState(false);

  // Growing live: new logs and results as they are stored.
  useEffect(() => {
    // Results are read again with the transcript: the event's own `result` member fails on log
    // events (see docs/console.md), so the subscription asks only for what each kind carries.
    const stop = subscribe<{ transcriptEvents: { kind: string; evaluationID: string | null; logs: Log[] } }>(
      'subscription TranscriptLive($id: ID!) { transcriptEvents(transcriptID: $id) { kind evaluationID logs { id type createdAt data } } }',
      { id },
      {
        next: ({ transcriptEvents: ev }) => {
          setLive(true);
          if (ev.kind !== 'logs' || unredacted) {
            detail.reload();
            return;
          }
          detail.setData((prev) => {
            if (!prev) return prev;
            const t = prev.transcript;
            const known = new Set(t.logs.map((l) => l.id));
            return { ...prev, transcript: { ...t, logs: [...t.logs, ...ev.logs.filter((l) => !known.has(l.id))] } };
          });
        },
        error: () => setLive(false),
      },
    );
    return stop;
  }, [id, unredacted]);

  if (detail.error) return <ErrorNote error={detail.error} />;
  if (!detail.data) return <Loading />;
  const t = detail.data.transcript;
  const definitions = detail.data.transcriptProperties;
  const canWrite = can('transcripts:write');
  const act = async (fn: () => Promise<unknown>) => {
    setActionError(null);
    try {
      await fn();
      detail.reload();
    } catch (err) {
      setActionError(err);
    }
  };

  return (
    <div class="page">
      <p>
        <a href={href('transcripts')}>← All transcripts</a>
      </p>
      <div class="page-head">
        <h1>Transcript</h1>
        <span class="live" role="status">
          {live ? 'Live' : ''}
        </span>
      </div>
      <dl class="facts">
        <dt>User</dt>
        <dd>{t.userID ?? '—'}</dd>
        <dt>Session</dt>
        <dd class="mono">{t.sessionID}</dd>
        <dt>Created</dt>
        <dd>{formatTime(t.createdAt)}</dd>
        <dt>Status</dt>
        <dd>{t.endedAt ? `ended ${formatTime(t.endedAt)}` : 'open'}</dd>
        {t.device || t.browser || t.os ? (
          <>
            <dt>Client</dt>
            <dd>{[t.device, t.browser, t.os].filter(Boolean).join(' · ')}</dd>
          </>
        ) : null}
        {t.feedback.length ? (
          <>
            <dt>Feedback</dt>
            <dd>
              {t.feedback
                .map((f) => {
                  // The turn's number: its action log's place among the actions (the turn ID is that log's ID).
                  const turn = t.logs.filter((l) => l.type === 'action').findIndex((l) => l.id === f.turnID) + 1;
                  return `${f.rating === 'positive' ? 'Thumbs up' : 'Thumbs down'} on turn ${turn || '?'}`;
                })
                .join(', ')}
            </dd>
          </>
        ) : null}
      </dl>
      <ErrorNote error={actionError} />
      <div class="row">
        <label class="inline">
          <input type="checkbox" checked={everyTrace} onChange={() => setEveryTrace(!everyTrace)} /> Show every trace
        </label>
        <label class="inline">
          <input type="checkbox" checked={unredacted} onChange={() => setUnredacted(!unredacted)} /> Show unredacted
        </label>
        {canWrite ? (
          <>
            <ConfirmButton
              label="End transcript"
              title="End this transcript?"
              message="Ending queues the project's enabled evaluations on it."
              confirmLabel="End"
              disabled={Boolean(t.endedAt)}
              onConfirm={async () => {
                await gql(
                  'mutation EndTranscript($projectID: ID!, $id: ID!) { endTranscript(projectID: $projectID, transcriptID: $id) { endedAt } }',
                  { projectID: project.id, id: t.id },
                );
                detail.reload();
              }}
            />
            <ConfirmButton
              label="Delete transcript"
              title="Delete this transcript?"
              message="Its logs, property values and evaluation results are deleted for good."
              confirmLabel="Delete"
              danger
              onConfirm={async () => {
                await gql('mutation DeleteTranscript($id: ID!) { deleteTranscript(id: $id) }', { id: t.id });
                navigate('transcripts');
              }}
            />
          </>
        ) : null}
      </div>
      <div class="split">
        <Section title="Conversation">
          {t.logs.length ? <Conversation logs={t.logs} everyTrace={everyTrace} /> : <p class="muted">No logs yet.</p>}
        </Section>
        <div>
          <Section title="Properties">
            {t.properties.length ? (
              <ul class="plain">
                {t.properties.map((p) => (
                  <li key={p.propertyID} class="row">
                    <span>
                      <strong>{p.name}</strong>: {p.value} <span class="muted">({p.type})</span>
                    </span>
                    {canWrite ? (
                      <button
                        type="button"
                        aria-label={`Remove property ${p.name}`}
                        onClick={() =>
                          act(() =>
                            gql(
                              'mutation RemoveValue($p: ID!, $t: ID!) { deleteTranscriptPropertyValue(propertyID: $p, transcriptID: $t) }',
                              { p: p.propertyID, t: t.id },
                            ),
                          )
                        }
                      >
                        Remove
                      </button>
                    ) : null}
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">No properties set.</p>
            )}
            {canWrite && definitions.length ? (
              <form
                class="toolbar"
                aria-label="Set a property"
                onSubmit={(e) => {
                  e.preventDefault();
                  const pid = propID || definitions[0]!.id;
                  act(async () => {
                    await gql(
                      'mutation SetValue($input: SetTranscriptPropertyValueInput!) { setTranscriptPropertyValue(input: $input) { value } }',
                      { input: { propertyID: pid, transcriptID: t.id, value: propValue } },
                    );
                    setPropValue('');
                  });
                }}
              >
                <Field label="Property">
                  {(fid) => (
                    <select id={fid} value={propID || definitions[0]!.id} onChange={(e) => setPropID(inputValue(e))}>
                      {definitions.map((d) => (
                        <option key={d.id} value={d.id}>
                          {d.name} ({d.type})
                        </option>
                      ))}
                    </select>
                  )}
                </Field>
                <Field label="Value">
                  {(fid) => <input id={fid} required value={propValue} onInput={(e) => setPropValue(inputValue(e))} />}
                </Field>
                <button type="submit">Set property</button>
              </form>
            ) : null}
          </Section>
          <Section title="Evaluation results">
            {t.evaluations.length ? (
              <ul class="plain results">
                {t.evaluations.map((r) => (
                  <li key={r.evaluationID}>
                    <strong>{r.name}</strong>: {r.status === 'done' ? formatValue(r.value) : r.status}
                    {r.reason ? <p class="reason">{r.reason}</p> : null}
                    {r.error ? <p class="error">{r.error}</p> : null}
                    <small class="muted">
                      {r.model ?? ''} {r.cost !== null ? `· $${r.cost.toFixed(4)}` : ''} · {formatTime(r.updatedAt)}
                    </small>
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">No evaluation results.</p>
            )}
          </Section>
        </div>
      </div>
    </div>
  );
}

export function TranscriptsPage({ path }: { path: string[] }) {
  return path[0] ? <TranscriptView id={path[0]} key={path[0]} /> : <SearchPage />;
}
