import { describe, expect, it } from 'vitest';
import { targetRows, targetSpecs } from '../../bench/targets';

const row = (rows: ReturnType<typeof targetRows>, measure: RegExp, provider = '') =>
  rows.find((r) => measure.test(r.measure) && r.provider === provider);

describe('the issue-17 target table of npm run bench', () => {
  it('prints every target, "not measured" where no suite reported it', () => {
    const rows = targetRows([]);
    expect(rows).toHaveLength(targetSpecs.length);
    expect(rows.every((r) => r.result === 'not measured')).toBe(true);
  });

  it('compares ratios to the baseline and absolute figures to the bound, per provider', () => {
    const rows = targetRows([
      { id: 'turns', provider: 'sqlite', value: 900, baseline: 3_600 },
      { id: 'turns', provider: 'postgresql', value: 640, baseline: 4_200 },
      { id: 'kb-query-selective', provider: 'sqlite', value: 30 },
      { id: 'kb-query-selective', provider: 'postgresql', value: 30 },
      { id: 'rest-vs-graphql', value: 1.2, baseline: 1 },
    ]);
    // 0.25x needed on SQLite, 0.15x on PostgreSQL.
    expect(row(rows, /^turns/, 'sqlite')).toMatchObject({ ratio: '0.25x', result: 'pass' });
    expect(row(rows, /^turns/, 'postgresql')).toMatchObject({ ratio: '0.15x', result: 'pass', target: '>= 0.15x' });
    // 25 ms on SQLite, 50 ms on PostgreSQL.
    expect(row(rows, /selective/, 'sqlite')).toMatchObject({ result: 'MISS', target: '<= 25.0 ms' });
    expect(row(rows, /selective/, 'postgresql')).toMatchObject({ result: 'pass', target: '<= 50.0 ms' });
    // Lower is better for latency ratios.
    expect(row(rows, /REST route/)).toMatchObject({ ratio: '1.20x', result: 'MISS' });
    expect(row(rows, /usage ingestion/)).toMatchObject({ result: 'not measured' });
  });

  it('prints small figures with two decimals, so a sub-millisecond baseline keeps its digits', () => {
    const rows = targetRows([{ id: 'first-trace', provider: 'sqlite', value: 2.45, baseline: 0.98 }]);
    expect(row(rows, /first trace/, 'sqlite')).toMatchObject({
      figure: '2.45 ms',
      baseline: '0.98 ms',
      ratio: '2.50x',
      result: 'pass',
    });
    const rates = targetRows([{ id: 'usage-ingestion', provider: 'postgresql', value: 14_100.4 }]);
    expect(row(rates, /usage ingestion/, 'postgresql')).toMatchObject({ figure: '14,100 events/s', result: 'MISS' });
  });

  it('misses a ratio target reported without its baseline', () => {
    const rows = targetRows([{ id: 'kb-ingestion', provider: 'sqlite', value: 1_000 }]);
    expect(row(rows, /KB ingestion/, 'sqlite')).toMatchObject({
      ratio: '-',
      result: 'MISS',
    });
  });
});
