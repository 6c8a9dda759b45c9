import { useMemo, useState } from 'preact/hooks';
import { gql } from '../api';
import { TimeChart } from '../chart';
import { useConsole } from '../context';
import { ErrorNote, Field, inputValue, Loading, Section, useAsync } from '../ui';

interface Evaluation {
  id: string;
  name: string;
  type: string;
  description: string | null;
  enabled: boolean;
  prompt: string;
  truePrompt: string | null;
  falsePrompt: string | null;
  minimumValue: number | null;
  maximumValue: number | null;
  minimumPrompt: string | null;
  maximumPrompt: string | null;
  averageCost: number | null;
}

const fields =
  'id name type description enabled prompt truePrompt falsePrompt minimumValue maximumValue minimumPrompt maximumPrompt averageCost';

type Draft = Record<string, string>;

function EvaluationForm(props: { initial?: Evaluation; onDone: () => void; onCancel?: () => void }) {
  const { project } = useConsole();
  const init = props.initial;
  const [draft, setDraft] = useState<Draft>({
    name: init?.name ?? '',
    type: init?.type ?? 'boolean',
    description: init?.description ?? '',
    prompt: init?.prompt ?? '',
    truePrompt: init?.truePrompt ?? '',
    falsePrompt: init?.falsePrompt ?? '',
    minimumValue: init?.minimumValue?.toString() ?? '1',
    maximumValue: init?.maximumValue?.toString() ?? '5',
    minimumPrompt: init?.minimumPrompt ?? '',
    maximumPrompt: init?.maximumPrompt ?? '',
  });
  const [error, setError] = useState<unknown>(null);
  const set = (k: string) => (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value });
  const opt = (k: string) => (draft[k]?.trim() ? draft[k] : undefined);
  return (
    <form
      class="stack"
      aria-label={init ? `Edit ${init.name}` : 'New evaluation'}
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        try {
          const common = {
            name: draft.name,
            description: opt('description'),
            prompt: draft.prompt,
            truePrompt: draft.type === 'boolean' ? opt('truePrompt') : undefined,
            falsePrompt: draft.type === 'boolean' ? opt('falsePrompt') : undefined,
            minimumPrompt: draft.type === 'number' ? opt('minimumPrompt') : undefined,
            maximumPrompt: draft.type === 'number' ? opt('maximumPrompt') : undefined,
          };
          if (init) {
            await gql(
              `mutation UpdateEvaluation($id: ID!, $input: UpdateTranscriptEvaluationInput!) { updateTranscriptEvaluation(id: $id, input: $input) { id } }`,
              {
                id: init.id,
                input: common,
              },
            );
          } else {
            await gql(
              `mutation CreateEvaluation($input: CreateTranscriptEvaluationInput!) { createTranscriptEvaluation(input: $input) { id } }`,
              {
                input: {
                  ...common,
                  projectID: project.id,
                  type: draft.type,
                  minimumValue: draft.type === 'number' ? Number(draft.minimumValue) : undefined,
                  maximumValue: draft.type === 'number' ? Number(draft.maximumValue) : undefined,
                },
              },
            );
          }
          props.onDone();
        } catch (err) {
          setError(err);
        }
      }}
    >
      <div class="toolbar">
        <Field label="Name">{(id) => <input id={id} required value={draft.name} onInput={set('name')} />}</Field>
        <Field label="Type">
          {(id) => (
            <select id={id} value={draft.type} disabled={Boolean(init)} onChange={set('type')}>
              <option value="boolean">Yes / no</option>
              <option value="number">Number</option>
              <option value="string">Text</option>
            </select>
          )}
        </Field>
      </div>
      <Field label="Description">
        {(id) => <input id={id} value={draft.description} onInput={set('description')} />}
      </Field>
      <Field label="Prompt">
        {(id) => <textarea id={id} required rows={3} value={draft.prompt} onInput={set('prompt')} />}
      </Field>
      {draft.type === 'boolean' ? (
        <div class="toolbar">
          <Field label="When true">
            {(id) => <input id={id} value={draft.truePrompt} onInput={set('truePrompt')} />}
          </Field>
          <Field label="When false">
            {(id) => <input id={id} value={draft.falsePrompt} onInput={set('falsePrompt')} />}
          </Field>
        </div>
      ) : null}
      {draft.type === 'number' ? (
        <div class="toolbar">
          <Field label="Minimum">
            {(id) => (
              <input
                id={id}
                type="number"
                disabled={Boolean(init)}
                value={draft.minimumValue}
                onInput={set('minimumValue')}
              />
            )}
          </Field>
          <Field label="Minimum means">
            {(id) => <input id={id} value={draft.minimumPrompt} onInput={set('minimumPrompt')} />}
          </Field>
          <Field label="Maximum">
            {(id) => (
              <input
                id={id}
                type="number"
                disabled={Boolean(init)}
                value={draft.maximumValue}
                onInput={set('maximumValue')}
              />
            )}
          </Field>
          <Field label="Maximum means">
            {(id) => <input id={id} value={draft.maximumPrompt} onInput={set('maximumPrompt')} />}
          </Field>
        </div>
      ) : null}
      <ErrorNote error={error} />
      <div class="row">
        <button class="primary" type="submit">
          {init ? 'Save evaluation' : 'Create evaluation'}
        </button>
        {props.onCancel ? (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        ) : null}
      </div>
    </form>
  );
}

interface ResultsOverTimeData {
  total: number;
  points: { start: string; count: number; trueCount: number; average: number | null }[];
  values: { value: unknown; count: number }[];
}

const resultRanges = [
  { id: '7d', label: 'Last 7 days', days: 7 },
  { id: '30d', label: 'Last 30 days', days: 30 },
  { id: '90d', label: 'Last 90 days', days: 90 },
] as const;

/**
 * Results of one evaluation over a range, aggregated by the server over every transcript of the
 * range: per day or week of the conversations (in the browser's time zone), the share of "true" or
 * the average, how many were judged, and how often each value came out.
 */
function ResultsOverTime({ evaluation }: { evaluation: Evaluation }) {
  const [range, setRange] = useState<string>('30d');
  const [granularity, setGranularity] = useState<'day' | 'week'>('day');
  const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const days = resultRanges.find((r) => r.id === range)?.days ?? 30;
  const data = useAsync(() => {
    const end = Math.ceil((Date.now() + 1) / 3_600_000) * 3_600_000;
    return gql<{ transcriptEvaluationResultsOverTime: ResultsOverTimeData }>(
      `query EvaluationResultsOverTime($e: ID!, $s: String!, $t: String!, $g: UsageGranularity, $z: String) {
        transcriptEvaluationResultsOverTime(evaluationID: $e, startTime: $s, endTime: $t, granularity: $g, timeZone: $z) {
          total points { start count trueCount average } values { value count }
        }
      }`,
      {
        e: evaluation.id,
        s: new Date(end - days * 86_400_000).toISOString(),
        t: new Date(end).toISOString(),
        g: granularity,
        z: timeZone,
      },
    );
  }, [evaluation.id, days, granularity, timeZone]);
  const series = data.data?.transcriptEvaluationResultsOverTime;
  const per = granularity === 'day' ? 'per day' : 'per week';
  const bucketSeconds = granularity === 'day' ? 86_400 : 7 * 86_400;
  const charts = useMemo(() => {
    if (!series) return null;
    const judged = series.points.filter((p) => p.count > 0 && p.average !== null);
    return {
      times: series.points.map((p) => Date.parse(p.start) / 1000),
      counts: [{ label: 'Results', values: series.points.map((p) => p.count) }],
      averageTimes: judged.map((p) => Date.parse(p.start) / 1000),
      averages: [
        {
          label: evaluation.name,
          values: judged.map((p) =>
            evaluation.type === 'boolean' ? Math.round(p.average! * 100) : Math.round(p.average! * 100) / 100,
          ),
        },
      ],
    };
  }, [series, evaluation.name, evaluation.type]);
  return (
    <div>
      <form class="toolbar" aria-label={`Results of ${evaluation.name}: range`} onSubmit={(e) => e.preventDefault()}>
        <Field label="Range">
          {(id) => (
            <select id={id} value={range} onChange={(e) => setRange(inputValue(e))}>
              {resultRanges.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Buckets">
          {(id) => (
            <select id={id} value={granularity} onChange={(e) => setGranularity(inputValue(e) as 'day' | 'week')}>
              <option value="day">Day</option>
              <option value="week">Week</option>
            </select>
          )}
        </Field>
      </form>
      {data.error ? <ErrorNote error={data.error} /> : null}
      {!series || !charts ? (
        data.error ? null : (
          <Loading />
        )
      ) : (
        <>
          <p class="muted">
            {series.total.toLocaleString()} results of the conversations of this range (times in {timeZone}).
          </p>
          {evaluation.type !== 'string' && charts.averageTimes.length ? (
            <TimeChart
              title={
                evaluation.type === 'boolean'
                  ? `${evaluation.name}: % true ${per}`
                  : `${evaluation.name}: average ${per}`
              }
              times={charts.averageTimes}
              series={charts.averages}
              // A sum of percentages or averages means nothing.
              showTotal={false}
              bucketSeconds={bucketSeconds}
            />
          ) : null}
          <TimeChart
            title={`${evaluation.name}: results ${per}`}
            times={charts.times}
            series={charts.counts}
            bucketSeconds={bucketSeconds}
          />
          <ul class="plain" aria-label={`${evaluation.name} results by value`}>
            {series.values.map((v) => (
              <li key={String(v.value)}>
                {typeof v.value === 'string' ? v.value : String(v.value)}: {v.count.toLocaleString()}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

export function EvaluationsPage() {
  const { project, can } = useConsole();
  const list = useAsync(
    () =>
      gql<{ transcriptEvaluations: Evaluation[] }>(
        `query Evaluations($projectID: ID!) { transcriptEvaluations(projectID: $projectID) { ${fields} } }`,
        { projectID: project.id },
      ),
    [project.id],
  );
  const [editing, setEditing] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [runForm, setRunForm] = useState({ evaluationID: '', transcriptID: '' });
  const [runResult, setRunResult] = useState<Record<string, unknown> | null>(null);
  const [batch, setBatch] = useState({ from: '', to: '', ended: 'yes', ids: [] as string[] });
  const [estimate, setEstimate] = useState<{ totalCost: number; transcriptCount: number } | null>(null);
  const [queued, setQueued] = useState<string | null>(null);
  const admin = can('admin');
  const write = can('transcripts:write');
  const evaluations = list.data?.transcriptEvaluations ?? [];

  const batchCriteria = () => {
    const c: Record<string, unknown> = {};
    if (batch.from) c.startDate = new Date(`${batch.from}T00:00:00`).toISOString();
    if (batch.to) {
      const d = new Date(`${batch.to}T00:00:00`);
      d.setDate(d.getDate() + 1);
      c.endDate = d.toISOString();
    }
    if (batch.ended) c.ended = batch.ended === 'yes';
    return c;
  };

  return (
    <div class="page">
      <div class="page-head">
        <h1>Evaluations</h1>
        {admin && !creating ? (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New evaluation
          </button>
        ) : null}
      </div>
      {creating ? (
        <Section title="New evaluation">
          <EvaluationForm
            onDone={() => {
              setCreating(false);
              list.reload();
            }}
            onCancel={() => setCreating(false)}
          />
        </Section>
      ) : null}
      <ErrorNote error={list.error || error} />
      {list.data ? (
        <Section title="Definitions">
          {evaluations.length === 0 ? <p class="muted">No evaluations yet.</p> : null}
          <ul class="plain cards">
            {evaluations.map((ev) => (
              <li key={ev.id} class="item">
                {editing === ev.id ? (
                  <EvaluationForm
                    initial={ev}
                    onDone={() => {
                      setEditing(null);
                      list.reload();
                    }}
                    onCancel={() => setEditing(null)}
                  />
                ) : (
                  <>
                    <div class="row spread">
                      <h3>{ev.name}</h3>
                      <span class="badge">{ev.type}</span>
                    </div>
                    {ev.description ? <p>{ev.description}</p> : null}
                    <p class="muted">{ev.prompt}</p>
                    <p class="muted">
                      Average cost: {ev.averageCost === null ? 'no runs yet' : `$${ev.averageCost.toFixed(4)}`}
                    </p>
                    <div class="row">
                      <label class="inline">
                        <input
                          type="checkbox"
                          checked={ev.enabled}
                          disabled={!admin}
                          onChange={async () => {
                            setError(null);
                            try {
                              await gql(
                                'mutation EnableEvaluation($id: ID!, $enabled: Boolean!) { updateTranscriptEvaluation(id: $id, input: {enabled: $enabled}) { id } }',
                                { id: ev.id, enabled: !ev.enabled },
                              );
                              list.reload();
                            } catch (err) {
                              setError(err);
                            }
                          }}
                        />{' '}
                        Enabled for {ev.name}
                      </label>
                      {admin ? (
                        <button type="button" onClick={() => setEditing(ev.id)}>
                          Edit {ev.name}
                        </button>
                      ) : null}
                      <button
                        type="button"
                        aria-expanded={selected === ev.id}
                        onClick={() => setSelected(selected === ev.id ? null : ev.id)}
                      >
                        Results of {ev.name}
                      </button>
                    </div>
                    {selected === ev.id ? <ResultsOverTime evaluation={ev} /> : null}
                  </>
                )}
              </li>
            ))}
          </ul>
        </Section>
      ) : (
        <Loading />
      )}

      {write && evaluations.length ? (
        <Section title="Run on a transcript">
          <form
            class="toolbar"
            aria-label="Run an evaluation"
            onSubmit={async (e) => {
              e.preventDefault();
              setError(null);
              setRunResult(null);
              try {
                const data = await gql<{ runTranscriptEvaluation: Record<string, unknown> }>(
                  'mutation RunEvaluation($e: ID!, $p: ID!, $t: ID!) { runTranscriptEvaluation(evaluationID: $e, projectID: $p, transcriptID: $t) { name status value reason error cost } }',
                  { e: runForm.evaluationID || evaluations[0]!.id, p: project.id, t: runForm.transcriptID.trim() },
                );
                setRunResult(data.runTranscriptEvaluation);
              } catch (err) {
                setError(err);
              }
            }}
          >
            <Field label="Evaluation">
              {(id) => (
                <select
                  id={id}
                  value={runForm.evaluationID || evaluations[0]?.id}
                  onChange={(e) => setRunForm({ ...runForm, evaluationID: inputValue(e) })}
                >
                  {evaluations.map((ev) => (
                    <option key={ev.id} value={ev.id}>
                      {ev.name}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field label="Transcript ID">
              {(id) => (
                <input
                  id={id}
                  required
                  value={runForm.transcriptID}
                  onInput={(e) => setRunForm({ ...runForm, transcriptID: inputValue(e) })}
                />
              )}
            </Field>
            <button type="submit">Run evaluation</button>
          </form>
          {runResult ? (
            <p role="status">
              <strong>{String(runResult.name)}</strong>:{' '}
              {runResult.status === 'done' ? JSON.stringify(runResult.value) : String(runResult.status)}
              {runResult.reason ? ` — ${String(runResult.reason)}` : ''}
              {runResult.error ? ` — ${String(runResult.error)}` : ''}
            </p>
          ) : null}
        </Section>
      ) : null}

      {write && evaluations.length ? (
        <Section title="Batch">
          <form
            class="stack"
            aria-label="Batch evaluation"
            onSubmit={async (e) => {
              e.preventDefault();
              setError(null);
              setQueued(null);
              const ids = batch.ids.length ? batch.ids : evaluations.filter((x) => x.enabled).map((x) => x.id);
              try {
                const data = await gql<{
                  transcriptEvaluationEstimate: { totalCost: number; transcriptCount: number };
                }>(
                  'query Estimate($input: EstimateTranscriptEvaluationsInput!) { transcriptEvaluationEstimate(input: $input) { totalCost transcriptCount } }',
                  { input: { projectID: project.id, evaluationIDs: ids, criteria: batchCriteria() } },
                );
                setEstimate(data.transcriptEvaluationEstimate);
              } catch (err) {
                setError(err);
              }
            }}
          >
            <div class="toolbar">
              <Field label="Batch from">
                {(id) => (
                  <input
                    id={id}
                    type="date"
                    value={batch.from}
                    onInput={(e) => setBatch({ ...batch, from: inputValue(e) })}
                  />
                )}
              </Field>
              <Field label="Batch until">
                {(id) => (
                  <input
                    id={id}
                    type="date"
                    value={batch.to}
                    onInput={(e) => setBatch({ ...batch, to: inputValue(e) })}
                  />
                )}
              </Field>
              <Field label="Batch transcripts">
                {(id) => (
                  <select id={id} value={batch.ended} onChange={(e) => setBatch({ ...batch, ended: inputValue(e) })}>
                    <option value="yes">Ended</option>
                    <option value="no">Open</option>
                    <option value="">Any</option>
                  </select>
                )}
              </Field>
            </div>
            <fieldset>
              <legend>Evaluations to run (none checked: the enabled ones)</legend>
              {evaluations.map((ev) => (
                <label class="inline" key={ev.id}>
                  <input
                    type="checkbox"
                    checked={batch.ids.includes(ev.id)}
                    onChange={() =>
                      setBatch({
                        ...batch,
                        ids: batch.ids.includes(ev.id) ? batch.ids.filter((x) => x !== ev.id) : [...batch.ids, ev.id],
                      })
                    }
                  />{' '}
                  {ev.name}
                </label>
              ))}
            </fieldset>
            <button type="submit">Estimate cost</button>
          </form>
          {estimate ? (
            <div class="row" role="status">
              <span>
                {estimate.transcriptCount} transcripts, estimated ${estimate.totalCost.toFixed(4)}
              </span>
              <button
                type="button"
                class="primary"
                disabled={estimate.transcriptCount === 0}
                onClick={async () => {
                  setError(null);
                  try {
                    const ids = batch.ids.length ? batch.ids : evaluations.filter((x) => x.enabled).map((x) => x.id);
                    const found = await gql<{ transcripts: { edges: { node: { id: string } }[] } }>(
                      'query BatchTranscripts($p: ID!, $c: TranscriptSearchCriteria) { transcripts(projectID: $p, criteria: $c, first: 100) { edges { node { id } } } }',
                      { p: project.id, c: batchCriteria() },
                    );
                    const data = await gql<{
                      queueTranscriptEvaluations: {
                        evaluationCount: number;
                        transcriptCount: number;
                        warning: string | null;
                      };
                    }>(
                      'mutation QueueBatch($input: QueueTranscriptEvaluationsInput!) { queueTranscriptEvaluations(input: $input) { evaluationCount transcriptCount warning } }',
                      {
                        input: {
                          projectID: project.id,
                          evaluationIDs: ids.slice(0, 10),
                          transcriptIDs: found.transcripts.edges.map((e) => e.node.id),
                        },
                      },
                    );
                    const q = data.queueTranscriptEvaluations;
                    setQueued(
                      `Queued ${q.evaluationCount} evaluations on ${q.transcriptCount} transcripts.${q.warning ? ` ${q.warning}` : ''}`,
                    );
                  } catch (err) {
                    setError(err);
                  }
                }}
              >
                Queue batch (newest 100)
              </button>
            </div>
          ) : null}
          {queued ? <p role="status">{queued}</p> : null}
          <p class="muted">Results arrive on the transcripts as the runs finish.</p>
        </Section>
      ) : null}
    </div>
  );
}
