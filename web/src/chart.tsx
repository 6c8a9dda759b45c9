import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface Series {
  label: string;
  values: number[];
}

const palette = ['#3b4cca', '#d9480f', '#2b8a3e', '#ae3ec9', '#1098ad', '#e67700'];

const hour = 3_600;
const day = 24 * hour;
/** uPlot's time tick steps from an hour up, in seconds. */
const timeSteps = [
  hour,
  2 * hour,
  3 * hour,
  6 * hour,
  12 * hour,
  day,
  2 * day,
  7 * day,
  14 * day,
  30 * day,
  91 * day,
  182 * day,
  365 * day,
];

/**
 * A time chart (uPlot on a canvas). Screen readers get the summary as the figure's name, and the
 * numbers in the table under it.
 */
export function TimeChart(props: {
  title: string;
  times: number[];
  series: Series[];
  unit?: string;
  /** False where a sum of buckets means nothing (distinct users). */
  showTotal?: boolean;
  /** The bucket's length in seconds: no tick finer than a bucket (daily points get no "8am" ticks). */
  bucketSeconds?: number;
}) {
  const bucketSeconds = props.bucketSeconds;
  const host = useRef<HTMLDivElement>(null);
  // The first series is the metric; others (successes) are parts of it.
  const total = props.series[0]?.values.reduce((a, b) => a + b, 0) ?? 0;
  const points = props.times.length;
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const width = Math.max(240, el.clientWidth);
    const plot = new uPlot(
      {
        width,
        height: 180,
        legend: { show: props.series.length > 1 },
        cursor: { drag: { x: false, y: false } },
        scales: {
          // One point alone: a day either side, instead of uPlot's guess of years.
          x: { time: true, ...(points < 2 ? { range: (_u, min, max) => [min - 86_400, max + 86_400] } : {}) },
        },
        // Room for the widest tick label (e.g. 1,000,000 tokens), which uPlot does not measure.
        axes: [
          {
            stroke: '#555',
            ...(bucketSeconds ? { incrs: timeSteps.filter((step) => step >= bucketSeconds) } : {}),
          },
          {
            stroke: '#555',
            // Tick labels can be longer than the largest value ("67.5" for a max of 68): room for four characters at least.
            size: 24 + 8 * Math.max(4, Math.max(...props.series.flatMap((x) => x.values), 1).toLocaleString().length),
          },
        ],
        series: [
          {},
          ...props.series.map((s, i) => ({
            label: s.label,
            stroke: palette[i % palette.length],
            width: 2,
            fill: props.series.length === 1 ? 'rgba(59,76,202,0.12)' : undefined,
            points: { show: points <= 60 },
          })),
        ],
      },
      [props.times, ...props.series.map((s) => s.values)],
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(240, el.clientWidth), height: 180 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.times, props.series, bucketSeconds]);
  return (
    <figure class="chart" aria-label={`${props.title} chart: ${points} points, total ${total}`}>
      <figcaption>
        <span>{props.title}</span> {props.showTotal === false ? null : <strong>{total.toLocaleString()}</strong>}
        {props.unit ? <span class="muted"> {props.unit}</span> : null}
      </figcaption>
      <div ref={host} class="chart-canvas" aria-hidden="true" />
    </figure>
  );
}

/** Horizontal bars for a breakdown (by type, model, intent…), as a list screen readers read. */
export function Bars(props: { title: string; items: { name: string; value: number; note?: string }[] }) {
  const max = Math.max(1, ...props.items.map((i) => i.value));
  return (
    <figure class="bars">
      <figcaption>{props.title}</figcaption>
      {props.items.length === 0 ? <p class="muted">Nothing in this range.</p> : null}
      <ul aria-label={props.title}>
        {props.items.map((item) => (
          <li key={item.name}>
            <span class="bar-name">{item.name || '(none)'}</span>
            <meter min={0} max={max} value={item.value} aria-label={`${item.name}: ${item.value}`} />
            <span class="bar-value">
              {item.value.toLocaleString()}
              {item.note ? <span class="muted"> {item.note}</span> : null}
            </span>
          </li>
        ))}
      </ul>
    </figure>
  );
}
