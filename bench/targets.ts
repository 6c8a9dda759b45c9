/**
 * The table of issue 17: every measure with its figure, its baseline from the same run, the ratio
 * and the target, marked pass or miss. Suites report figures with `reportTarget`; `npm run bench`
 * prints the table after the suites it ran, and a row no suite reported reads "not measured".
 */
import type { Provider } from '../src/db/schema-source';
import { fmt } from './lib';

export type TargetId =
  | 'turns'
  | 'first-trace'
  | 'graphql-trivial'
  | 'rest-vs-graphql'
  | 'usage-ingestion'
  | 'transcript-search'
  | 'kb-query-selective'
  | 'kb-query-no-filter'
  | 'kb-ingestion';

interface TargetSpec {
  id: TargetId;
  measure: string;
  /**
   * What must hold. `ratio`: figure ÷ baseline compared with `bound`; `absolute`: the figure itself.
   * `atLeast`: higher is better (rates); otherwise lower is better (latencies).
   */
  kind: 'ratio' | 'absolute';
  atLeast: boolean;
  bound: Partial<Record<Provider, number>> & { default: number };
  unit: string;
  /** Who reports it: the suite (npm run bench -- <suite>). */
  suite: string;
}

export const targetSpecs: TargetSpec[] = [
  {
    id: 'turns',
    measure: 'turns/s, five-step flow, v2 stream (baseline: bare SSE)',
    kind: 'ratio',
    atLeast: true,
    bound: { default: 0.25, postgresql: 0.15 },
    unit: 'turns/s',
    suite: 'runtime',
  },
  {
    id: 'first-trace',
    measure: 'time to first trace, p50 (baseline: bare)',
    kind: 'ratio',
    atLeast: false,
    bound: { default: 3 },
    unit: 'ms',
    suite: 'runtime',
  },
  {
    id: 'graphql-trivial',
    measure: 'GraphQL trivial authenticated query (baseline: bare Express)',
    kind: 'ratio',
    atLeast: true,
    bound: { default: 0.5 },
    unit: 'req/s',
    suite: 'http',
  },
  {
    id: 'rest-vs-graphql',
    measure: 'REST route vs the same operation on /graphql, latency',
    kind: 'ratio',
    atLeast: false,
    bound: { default: 1.15 },
    unit: 'ms',
    suite: 'http',
  },
  {
    id: 'usage-ingestion',
    measure: 'usage ingestion, batches of 1,000',
    kind: 'absolute',
    atLeast: true,
    bound: { default: 50_000 },
    unit: 'events/s',
    suite: 'usage',
  },
  {
    id: 'transcript-search',
    measure: 'transcript search, newest 25, REST p50 (baseline: REST floor + SQL)',
    kind: 'ratio',
    atLeast: false,
    bound: { default: 2 },
    unit: 'ms',
    suite: 'transcripts',
  },
  {
    id: 'kb-query-selective',
    measure: 'KB query, selective filter, p95',
    kind: 'absolute',
    atLeast: false,
    bound: { default: 25, postgresql: 50 },
    unit: 'ms',
    suite: 'kb',
  },
  {
    id: 'kb-query-no-filter',
    measure: 'KB query, no filter, p95',
    kind: 'absolute',
    atLeast: false,
    bound: { default: 50 },
    unit: 'ms',
    suite: 'kb',
  },
  {
    id: 'kb-ingestion',
    measure: 'KB ingestion, upload + job (baseline: chunking alone)',
    kind: 'ratio',
    atLeast: true,
    bound: { default: 0.5 },
    unit: 'chunks/s',
    suite: 'kb',
  },
];

export interface TargetReport {
  id: TargetId;
  provider?: Provider;
  value: number;
  /** Required for `ratio` targets: the baseline measured in the same run. */
  baseline?: number;
  /** Where the figure was measured, e.g. "200k chunks". */
  note?: string;
}

const reports: TargetReport[] = [];

/** Records a figure of the table (printed by `printTargets`). */
export function reportTarget(report: TargetReport): void {
  if (!targetSpecs.some((s) => s.id === report.id)) throw new Error(`unknown target ${report.id}`);
  reports.push(report);
}

export interface TargetRow {
  measure: string;
  provider: string;
  figure: string;
  baseline: string;
  ratio: string;
  target: string;
  result: 'pass' | 'MISS' | 'not measured';
}

/** One row per (target, provider) reported, and a "not measured" row for each target no suite of the run reported. */
export function targetRows(reported: readonly TargetReport[] = reports): TargetRow[] {
  const rows: TargetRow[] = [];
  for (const spec of targetSpecs) {
    const mine = reported.filter((r) => r.id === spec.id);
    if (mine.length === 0) {
      rows.push({
        measure: spec.measure,
        provider: '',
        figure: '-',
        baseline: '-',
        ratio: '-',
        target: describeBound(spec, undefined),
        result: 'not measured',
      });
      continue;
    }
    for (const r of mine) {
      const bound = (r.provider && spec.bound[r.provider]) ?? spec.bound.default;
      const ratio = r.baseline ? r.value / r.baseline : Number.NaN;
      const compared = spec.kind === 'ratio' ? ratio : r.value;
      const pass = Number.isFinite(compared) && (spec.atLeast ? compared >= bound : compared <= bound);
      rows.push({
        measure: r.note ? `${spec.measure} (${r.note})` : spec.measure,
        provider: r.provider ?? '',
        figure: `${figure(r.value)} ${spec.unit}`,
        baseline: r.baseline === undefined ? '-' : `${figure(r.baseline)} ${spec.unit}`,
        ratio: Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : '-',
        target: describeBound(spec, r.provider),
        result: pass ? 'pass' : 'MISS',
      });
    }
  }
  return rows;
}

/** Two decimals below 10 (a sub-millisecond baseline such as 0.98 ms stays readable), else as `fmt`. */
function figure(value: number): string {
  return fmt(value, Math.abs(value) < 10 ? 2 : 1);
}

function describeBound(spec: TargetSpec, provider: Provider | undefined): string {
  const bound = (provider && spec.bound[provider]) ?? spec.bound.default;
  const op = spec.atLeast ? '>=' : '<=';
  return spec.kind === 'ratio' ? `${op} ${bound}x` : `${op} ${fmt(bound)} ${spec.unit}`;
}

/** Prints the table for this run. */
export function printTargets(print: (line: string) => void = console.log): void {
  const header = ['measure', 'provider', 'figure', 'baseline', 'ratio', 'target', 'result'];
  const cells = [
    header,
    ...targetRows().map((r) => [r.measure, r.provider, r.figure, r.baseline, r.ratio, r.target, r.result]),
  ];
  const widths = header.map((_, i) => Math.max(...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c.map((v, i) => (i === 0 || i === 1 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  print('\nIssue 17 targets (each figure beside its baseline from this run)');
  print(line(header));
  print(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const c of cells.slice(1)) print(line(c));
}
