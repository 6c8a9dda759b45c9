import { useEffect, useMemo, useState } from 'preact/hooks';
import { gql, subscribe } from '../api';
import { Bars, type Series, TimeChart } from '../chart';
import { useConsole } from '../context';
import { ErrorNote, Field, inputValue, Loading, Section, useAsync } from '../ui';

type Granularity = 'hour' | 'day' | 'week';

const presets = [
  { id: '24h', label: 'Last 24 hours', hours: 24 },
  { id: '7d', label: 'Last 7 days', hours: 24 * 7 },
  { id: '30d', label: 'Last 30 days', hours: 24 * 30 },
  { id: '90d', label: 'Last 90 days', hours: 24 * 90 },
] as const;

/** Every metric with a time series, its title and its unit. */
const metrics = [
  { name: 'interactions', field: 'interactions', title: 'Interactions', unit: '' },
  { name: 'unique_users', field: 'uniqueUsers', title: 'Unique users', unit: '' },
  { name: 'transcripts', field: 'transcripts', title: 'Transcripts', unit: '' },
  { name: 'credit_usage', field: 'creditUsage', title: 'Tokens', unit: 'tokens' },
  { name: 'function_usage', field: 'functionUsage', title: 'Function calls', unit: '' },
  { name: 'api_calls', field: 'apiCalls', title: 'API calls', unit: '' },
  { name: 'integrations', field: 'integrations', title: 'Integration calls', unit: '' },
  { name: 'kb_documents', field: 'kbDocuments', title: 'Knowledge-base retrievals', unit: '' },
  { name: 'agent_usage', field: 'agentUsage', title: 'Agent turns', unit: '' },
] as const;

const callMetrics = new Set(['function_usage', 'api_calls', 'integrations', 'agent_usage']);

interface Point {
  start: string;
  count: number;
  successCount: number;
}

interface CallTotal {
  count: number;
  successCount: number;
}

interface Totals {
  interactions: number;
  uniqueUsers: number;
  transcripts: number;
  creditUsage: number;
  intents: number;
  kbDocuments: number;
  functionUsage: CallTotal;
  apiCalls: CallTotal;
  integrations: CallTotal;
  agentUsage: CallTotal;
}

const seriesQuery = `query OverviewSeries($filter: UsageRangeInput!, $granularity: UsageGranularity!, $timeZone: String!) {
  ${metrics
    .map(
      (m) =>
        `${m.field}: usageTimeSeries(filter: $filter, name: ${m.name}, granularity: $granularity, timeZone: $timeZone) { points { start count successCount } }`,
    )
    .join('\n  ')}
}`;

const totalsQuery = `query OverviewTotals($filter: UsageRangeInput!) {
  usageTotals(filter: $filter) {
    interactions uniqueUsers transcripts creditUsage intents kbDocuments
    functionUsage { count successCount } apiCalls { count successCount }
    integrations { count successCount } agentUsage { count successCount }
  }
}`;

/** The breakdown metrics: the usage query's name, its union member and the item fields wanted. */
const breakdownMetrics = {
  interactions: ['interactions', 'InteractionsUsage', 'type count'],
  credit: ['credit_usage', 'CreditUsage', 'model type count'],
  functions: ['function_usage', 'FunctionUsage', 'name functionID count successCount'],
  apis: ['api_calls', 'ApiCallsUsage', 'name apiToolID count successCount'],
  integrations: ['integrations', 'IntegrationsUsage', 'integrationToolName count successCount'],
  agents: ['agent_usage', 'AgentUsage', 'name agentID count successCount'],
  documents: ['kb_documents', 'KbDocumentsUsage', 'documentID count'],
} as const;

/** Pages through one metric's hourly rows (500 a page), at most `maxPages`; says whether rows were left. */
async function allRows(
  key: keyof typeof breakdownMetrics,
  filter: Record<string, unknown>,
  maxPages = 20,
): Promise<{ items: Record<string, unknown>[]; truncated: boolean }> {
  const [name, type, fields] = breakdownMetrics[key];
  const query = `query OverviewBreakdown($filter: UsageFilterInput!) { usage(name: ${name}, filter: $filter) { ... on ${type} { cursor items { ${fields} } } } }`;
  const items: Record<string, unknown>[] = [];
  let cursor: number | null = null;
  for (let page = 0; page < maxPages; page++) {
    const data: { usage: { cursor: number | null; items: Record<string, unknown>[] } } = await gql(query, {
      filter: { ...filter, limit: 500, ...(cursor === null ? {} : { cursor }) },
    });
    items.push(...data.usage.items);
    cursor = data.usage.cursor;
    if (cursor === null) return { items, truncated: false };
  }
  return { items, truncated: true };
}

async function loadBreakdowns(filter: Record<string, unknown>) {
  const keys = Object.keys(breakdownMetrics) as (keyof typeof breakdownMetrics)[];
  const [intents, ...rows] = await Promise.all([
    gql<{ usage: { intents: { name: string; count: number }[] } }>(
      'query OverviewIntents($filter: UsageFilterInput!) { usage(name: top_intents, filter: $filter) { ... on TopIntentsUsage { intents { name count } } } }',
      { filter: { ...filter, limit: 10 } },
    ),
    ...keys.map((k) => allRows(k, filter)),
  ]);
  const byKey = Object.fromEntries(keys.map((k, i) => [k, rows[i]!])) as Record<
    keyof typeof breakdownMetrics,
    { items: Record<string, unknown>[]; truncated: boolean }
  >;
  return { intents: intents.usage.intents, rows: byKey, truncated: rows.some((r) => r.truncated) };
}

interface BreakdownItem {
  name: string;
  count: number;
  successCount?: number;
}

function sumBy(items: BreakdownItem[]): { name: string; value: number; note?: string }[] {
  const map = new Map<string, { count: number; success: number; hasSuccess: boolean }>();
  for (const item of items) {
    const entry = map.get(item.name) ?? { count: 0, success: 0, hasSuccess: false };
    entry.count += item.count;
    if (item.successCount !== undefined) {
      entry.success += item.successCount;
      entry.hasSuccess = true;
    }
    map.set(item.name, entry);
  }
  return [...map.entries()]
    .map(([name, e]) => ({
      name,
      value: e.count,
      note: e.hasSuccess && e.count ? `${Math.round((e.success / e.count) * 100)}% success` : undefined,
    }))
    .sort((a, b) => b.value - a.value)
    .slice(0, 12);
}

function rangeOf(presetHours: number): { startTime: string; endTime: string } {
  const hour = 3_600_000;
  const end = Math.ceil((Date.now() + 1) / hour) * hour;
  return { startTime: new Date(end - presetHours * hour).toISOString(), endTime: new Date(end).toISOString() };
}

function rate(total: CallTotal): string {
  return total.count ? `${Math.round((total.successCount / total.count) * 100)}% success` : 'no calls';
}

export function OverviewPage() {
  const { project } = useConsole();
  const [preset, setPreset] = useState<string>('30d');
  const [environment, setEnvironment] = useState('');
  const [granularity, setGranularity] = useState<Granularity>('day');
  const [timeZone, setTimeZone] = useState(() => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC');
  const [liveTick, setLiveTick] = useState(0);
  const [liveAt, setLiveAt] = useState<string | null>(null);
  const [liveError, setLiveError] = useState<unknown>(null);
  const zones = useMemo(() => {
    const list = (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.('timeZone');
    return list?.length ? ['UTC', ...list.filter((z) => z !== 'UTC')] : ['UTC'];
  }, []);
  const hours = presets.find((p) => p.id === preset)?.hours ?? 720;
  const hourAllowed = hours <= 24 * 60;
  const effectiveGranularity: Granularity = granularity === 'hour' && !hourAllowed ? 'day' : granularity;

  const base = useMemo(() => {
    const range = rangeOf(hours);
    return {
      projectID: project.id,
      ...range,
      ...(environment ? { projectEnvironmentIDOrAlias: [environment] } : {}),
    };
  }, [project.id, hours, environment, liveTick]);

  const series = useAsync(
    () =>
      gql<Record<string, { points: Point[] }>>(seriesQuery, {
        filter: base,
        granularity: effectiveGranularity,
        timeZone,
      }),
    [base, effectiveGranularity, timeZone],
  );
  const totals = useAsync(() => gql<{ usageTotals: Totals }>(totalsQuery, { filter: base }), [base]);
  const breakdown = useAsync(() => loadBreakdowns(base), [base]);

  // Live: every counter update of this project refreshes the numbers of the range.
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const stop = subscribe<{ usageCounters: { counters: { name: string }[] } }>(
      `subscription OverviewLive($projectID: ID!) { usageCounters(projectID: $projectID) { projectID counters { name environmentID period count } } }`,
      { projectID: project.id },
      {
        next: () => {
          setLiveAt(new Date().toLocaleTimeString());
          // Several updates in one burst make one refresh.
          if (timer) return;
          timer = setTimeout(() => {
            timer = null;
            setLiveTick((t) => t + 1);
          }, 300);
        },
        error: setLiveError,
      },
    );
    return () => {
      stop();
      if (timer) clearTimeout(timer);
    };
  }, [project.id]);

  const charts = useMemo(() => {
    if (!series.data) return [];
    return metrics.map((m) => {
      const points = series.data?.[m.field]?.points ?? [];
      const times = points.map((p) => Date.parse(p.start) / 1000);
      const lines: Series[] = [{ label: m.title, values: points.map((p) => p.count) }];
      if (callMetrics.has(m.name)) lines.push({ label: 'Succeeded', values: points.map((p) => p.successCount) });
      return { ...m, times, lines };
    });
  }, [series.data]);

  const t = totals.data?.usageTotals;
  const b = breakdown.data;
  const items = (key: keyof typeof breakdownMetrics) => b?.rows[key].items ?? [];

  return (
    <div class="page">
      <div class="page-head">
        <h1>Overview</h1>
        <p class="live" role="status" aria-live="polite">
          {liveError ? 'Live updates unavailable' : liveAt ? `Live · updated ${liveAt}` : 'Live'}
        </p>
      </div>
      <form class="toolbar" aria-label="Range" onSubmit={(e) => e.preventDefault()}>
        <Field label="Range">
          {(id) => (
            <select id={id} value={preset} onChange={(e) => setPreset(inputValue(e))}>
              {presets.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Environment">
          {(id) => (
            <select id={id} value={environment} onChange={(e) => setEnvironment(inputValue(e))}>
              <option value="">All environments</option>
              {project.environments.map((env) => (
                <option key={env.id} value={env.id}>
                  {env.alias}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Buckets">
          {(id) => (
            <select id={id} value={effectiveGranularity} onChange={(e) => setGranularity(inputValue(e) as Granularity)}>
              <option value="hour" disabled={!hourAllowed}>
                Hour
              </option>
              <option value="day">Day</option>
              <option value="week">Week</option>
            </select>
          )}
        </Field>
        <Field label="Time zone">
          {(id) => (
            <select id={id} value={timeZone} onChange={(e) => setTimeZone(inputValue(e))}>
              {zones.map((z) => (
                <option key={z} value={z}>
                  {z}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>

      <ErrorNote error={totals.error} />
      {t ? (
        <ul class="counters" aria-label="Totals">
          <li>
            <span>Interactions</span>
            <strong data-testid="total-interactions">{t.interactions.toLocaleString()}</strong>
          </li>
          <li>
            <span>Unique users</span>
            <strong>{t.uniqueUsers.toLocaleString()}</strong>
          </li>
          <li>
            <span>Transcripts</span>
            <strong>{t.transcripts.toLocaleString()}</strong>
          </li>
          <li>
            <span>Tokens</span>
            <strong>{t.creditUsage.toLocaleString()}</strong>
          </li>
          <li>
            <span>Intent matches</span>
            <strong>{t.intents.toLocaleString()}</strong>
          </li>
          <li>
            <span>Function calls</span>
            <strong>{t.functionUsage.count.toLocaleString()}</strong>
            <small>{rate(t.functionUsage)}</small>
          </li>
          <li>
            <span>API calls</span>
            <strong>{t.apiCalls.count.toLocaleString()}</strong>
            <small>{rate(t.apiCalls)}</small>
          </li>
          <li>
            <span>Integration calls</span>
            <strong>{t.integrations.count.toLocaleString()}</strong>
            <small>{rate(t.integrations)}</small>
          </li>
          <li>
            <span>Agent turns</span>
            <strong>{t.agentUsage.count.toLocaleString()}</strong>
            <small>{rate(t.agentUsage)}</small>
          </li>
          <li>
            <span>KB retrievals</span>
            <strong>{t.kbDocuments.toLocaleString()}</strong>
          </li>
        </ul>
      ) : (
        <Loading />
      )}

      <ErrorNote error={series.error} />
      <div class="grid">
        {charts.map((c) => (
          <TimeChart
            key={c.name}
            title={c.title}
            times={c.times}
            series={c.lines}
            unit={c.unit}
            showTotal={c.name !== 'unique_users'}
            bucketSeconds={{ hour: 3_600, day: 86_400, week: 7 * 86_400 }[effectiveGranularity]}
          />
        ))}
      </div>

      <ErrorNote error={breakdown.error} />
      {b ? (
        <Section title="Breakdowns">
          <div class="grid">
            <Bars title="Top intents" items={b.intents.map((i) => ({ name: i.name, value: i.count }))} />
            <Bars
              title="Interactions by type"
              items={sumBy(items('interactions').map((i) => ({ name: String(i.type), count: Number(i.count) })))}
            />
            <Bars
              title="Tokens by model"
              items={sumBy(items('credit').map((i) => ({ name: `${i.model} · ${i.type}`, count: Number(i.count) })))}
            />
            <Bars
              title="Function calls"
              items={sumBy(
                items('functions').map((i) => ({
                  name: String(i.name || i.functionID),
                  count: Number(i.count),
                  successCount: Number(i.successCount),
                })),
              )}
            />
            <Bars
              title="API calls"
              items={sumBy(
                items('apis').map((i) => ({
                  name: String(i.name || i.apiToolID),
                  count: Number(i.count),
                  successCount: Number(i.successCount),
                })),
              )}
            />
            <Bars
              title="Integration calls"
              items={sumBy(
                items('integrations').map((i) => ({
                  name: String(i.integrationToolName),
                  count: Number(i.count),
                  successCount: Number(i.successCount),
                })),
              )}
            />
            <Bars
              title="Agent turns"
              items={sumBy(
                items('agents').map((i) => ({
                  name: String(i.name || i.agentID),
                  count: Number(i.count),
                  successCount: Number(i.successCount),
                })),
              )}
            />
            <Bars
              title="Knowledge-base documents retrieved"
              items={sumBy(items('documents').map((i) => ({ name: String(i.documentID), count: Number(i.count) })))}
            />
          </div>
          {b.truncated ? (
            <p class="muted">Breakdowns sum the first 10,000 hourly rows of each metric in this range.</p>
          ) : null}
        </Section>
      ) : null}
    </div>
  );
}
