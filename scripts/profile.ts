/**
 * npm run profile -- <turn|graphql|ingest|kb-query|kb-ingest|search> [--provider sqlite|postgresql] [--seconds N]
 *
 * Where the time of one kind of operation goes (docs/performance.md). Starts a Parley server in a
 * child process (scripts/profile-server.ts), warms it up, drives the scenario's load for N seconds
 * from this process with V8's CPU profiler on in the server, then prints:
 * - operations per second, and SQL statements, transactions, commits and Prisma operations per operation
 *   (counted at the driver adapter);
 * - the CPU profile's self time by area (our src/ folders, each npm package, Node internals, GC)
 *   and the top functions by self time.
 * - for kb-ingest (uploads with wait=true, one at a time, of the benchmark's documents): chunks/s
 *   beside chunking the same documents alone in this process, and the timeline of the median
 *   upload: every Prisma operation with its start and end from the moment the request was sent.
 * The .cpuprofile file is kept under tmp/profiles/ for Chrome DevTools or speedscope.
 */
import { fork } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { ingestionTexts } from '../bench/kb.bench';
import { batch, post, random } from '../bench/usage.bench';
import { chunkText } from '../src/kb/chunk';

const scenarios = ['turn', 'graphql', 'ingest', 'kb-query', 'kb-ingest', 'search'] as const;
type Scenario = (typeof scenarios)[number];

const args = process.argv.slice(2);
const scenario = args.find((a) => !a.startsWith('--')) as Scenario | undefined;
const option = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? (args[i + 1] as string) : fallback;
};
if (!scenario || !scenarios.includes(scenario)) {
  console.error(`usage: npm run profile -- <${scenarios.join('|')}> [--provider sqlite|postgresql] [--seconds N]`);
  process.exit(2);
}
const provider = option('provider', 'sqlite');
const seconds = Number(option('seconds', '10'));
const dir = join(process.cwd(), 'tmp/profiles');
mkdirSync(dir, { recursive: true });
const profilePath = join(dir, `${scenario}-${provider}-${Date.now()}.cpuprofile`);

interface Ready {
  url: string;
  projectID: string;
  apiKey: string;
}
type Counters = Record<'statements' | 'transactions' | 'commits' | 'prismaOperations' | 'cpuMicros', number>;
/** A Prisma operation as the server saw it; times in ms since the epoch (performance.timeOrigin based). */
interface TimedOperation {
  name: string;
  start: number;
  end: number;
  background: boolean;
}
/** One kb-ingest upload, as this process saw it. */
interface Upload {
  start: number;
  end: number;
  chunks: number;
  text: string;
}
const uploads: Upload[] = [];
const now = () => performance.timeOrigin + performance.now();

const child = fork(join(import.meta.dirname, 'profile-server.ts'), [provider, scenario, profilePath], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  // As a production deployment runs (the Dockerfile sets it): graphql's development-only checks off.
  // A NODE_ENV given on the command line wins.
  env: { ...process.env, NODE_ENV: process.env.NODE_ENV ?? 'production' },
});
// The server must not outlive this script (it would hold the terminal's output open).
process.on('exit', () => child.kill());
const nextMessage = <T>(key: string) =>
  new Promise<T>((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`profile server exited (${code}) before sending "${key}"`));
    const onMessage = (m: Record<string, unknown>) => {
      if (key in m) {
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(m as T);
      }
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });

const server = await nextMessage<Ready>('ready');
const auth = { authorization: server.apiKey, 'content-type': 'application/json' };

/** Drives the scenario for `durationSeconds`; answers the number of operations done. */
async function drive(durationSeconds: number, tag: string): Promise<number> {
  if (scenario === 'kb-ingest') {
    // The benchmark's documents, uploaded one at a time and waited for, as bench/kb.bench.ts does.
    const texts = ingestionTexts(20);
    const deadline = performance.now() + durationSeconds * 1000;
    let documents = 0;
    uploads.length = 0;
    while (performance.now() < deadline) {
      const text = texts[documents % texts.length] as string;
      const form = new FormData();
      form.append('file', new Blob([text]), `${tag}-${documents}.txt`);
      form.append('metadata', JSON.stringify({ n: documents }));
      const start = now();
      const res = await fetch(`${server.url}/v1/knowledge-base/docs/upload?wait=true&maxChunkSize=500`, {
        method: 'POST',
        headers: { authorization: server.apiKey },
        body: form,
      });
      const body = (await res.json()) as { data: { status: string; chunkCount: number }[] };
      const end = now();
      const [document] = body.data;
      if (document?.status !== 'SUCCESS') throw new Error(`ingestion failed: ${JSON.stringify(body)}`);
      uploads.push({ start, end, chunks: document.chunkCount, text });
      documents++;
    }
    return documents;
  }
  if (scenario === 'ingest') {
    const rnd = random(1);
    const deadline = performance.now() + durationSeconds * 1000;
    let events = 0;
    let from = Date.now() - 30 * 86_400_000;
    while (performance.now() < deadline) {
      await post(`${server.url}/v1/usage/events`, server.apiKey, {
        events: batch(server.projectID, from, 60_000, rnd),
      });
      from += 60_000;
      events += 1000;
    }
    return events;
  }
  let i = 0;
  const request =
    scenario === 'turn'
      ? {
          method: 'POST' as const,
          url: `${server.url}/v2/project/${server.projectID}/user/${tag}0/interact/stream`,
          body: JSON.stringify({ action: { type: 'launch' } }),
          setup: (req: { path?: string }) => ({
            ...req,
            path: `/v2/project/${server.projectID}/user/${tag}${i++}/interact/stream`,
          }),
        }
      : scenario === 'graphql'
        ? {
            method: 'POST' as const,
            url: `${server.url}/graphql`,
            body: JSON.stringify({ query: '{ viewer { kind projectID } }' }),
          }
        : scenario === 'search'
          ? {
              // The benchmark's "newest 25": the REST transcript search with no criteria.
              method: 'POST' as const,
              url: `${server.url}/v1/transcript/project/${server.projectID}`,
              body: undefined,
            }
          : {
              method: 'POST' as const,
              url: `${server.url}/v1/knowledge-base/query`,
              body: JSON.stringify({ question: 'policy refund shipping', synthesis: false, chunkLimit: 10 }),
            };
  const result = await autocannon({
    url: request.url,
    method: request.method,
    headers: auth,
    body: request.body,
    connections: scenario === 'kb-query' ? 2 : 10,
    duration: durationSeconds,
    // On a busy shared machine a request can take longer than autocannon's default 10 s.
    timeout: 60,
    ...('setup' in request ? { requests: [{ setupRequest: request.setup }] } : {}),
  });
  if (result.non2xx || result.errors) throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.total;
}

await drive(Math.min(3, seconds), 'warm');
child.send('reset');
await nextMessage('reset');
const started = performance.now();
const operations = await drive(seconds, 'user');
const elapsed = (performance.now() - started) / 1000;
child.send('stop');
const {
  counters,
  operations: prismaOps,
  timeline,
} = await nextMessage<{ counters: Counters; operations: [string, number][]; timeline: TimedOperation[] }>('counters');
await new Promise((resolve) => child.once('exit', resolve));

const unit =
  scenario === 'ingest' ? 'event' : scenario === 'turn' ? 'turn' : scenario === 'kb-ingest' ? 'document' : 'request';
console.log(
  `\n${scenario} [${provider}, NODE_ENV=${process.env.NODE_ENV ?? 'production'}]: ${operations} ${unit}s in ${elapsed.toFixed(1)} s = ${(operations / elapsed).toFixed(0)} ${unit}s/s`,
);
const per = (n: number) => (n / operations).toFixed(scenario === 'ingest' ? 4 : 2);
console.log(
  `per ${unit}: ${per(counters.statements)} SQL statements, ${per(counters.transactions)} transactions, ` +
    `${per(counters.commits)} commits, ${per(counters.prismaOperations)} Prisma operations`,
);
// CPU time (user + system, the whole server process, profiler included) per operation: unlike the
// rate, it barely moves when other work shares the machine, so A/B comparisons under load use it.
console.log(
  `server CPU per ${unit}: ${(counters.cpuMicros / operations / 1000).toFixed(scenario === 'ingest' ? 4 : 3)} ms (user + system, profiler on)`,
);
console.log('Prisma operations (and driver calls, driver.*) per operation, by model:');
for (const [name, n] of prismaOps.sort((a, b) => b[1] - a[1]).slice(0, 15))
  console.log(`  ${per(n).padStart(7)}  ${name}`);

if (scenario === 'kb-ingest' && uploads.length) {
  const chunks = uploads.reduce((sum, u) => sum + u.chunks, 0);
  const uploadSeconds = uploads.reduce((sum, u) => sum + (u.end - u.start), 0) / 1000;
  // Chunking alone, the benchmark's baseline: the same texts, in this process, warmed up once.
  for (const u of uploads.slice(0, 3)) chunkText(u.text, { maxTokens: 500, overlapTokens: 50 });
  const chunkStarted = performance.now();
  let chunked = 0;
  for (const u of uploads) chunked += chunkText(u.text, { maxTokens: 500, overlapTokens: 50 }).length;
  const chunkSeconds = (performance.now() - chunkStarted) / 1000;
  const rate = chunks / uploadSeconds;
  const baseline = chunked / chunkSeconds;
  console.log(
    `\nchunks/s: upload + job ${rate.toFixed(0)}, chunking alone ${baseline.toFixed(0)} (${(rate / baseline).toFixed(2)}x); ` +
      `${(chunks / uploads.length).toFixed(1)} chunks per document, per chunk: ${(counters.statements / chunks).toFixed(2)} SQL statements`,
  );
  // The median upload's timeline: what ran, when, from the moment its request was sent.
  const sorted = [...uploads].sort((a, b) => a.end - a.start - (b.end - b.start));
  const median = sorted[Math.floor(sorted.length / 2)] as Upload;
  const ms = (t: number) => (t - median.start).toFixed(1).padStart(7);
  console.log(
    `\nmedian upload: ${(median.end - median.start).toFixed(1)} ms (fastest ${((sorted[0] as Upload).end - (sorted[0] as Upload).start).toFixed(1)} ms); its Prisma operations (start, end in ms from the request; * = job runner):`,
  );
  for (const op of timeline.filter((o) => o.end >= median.start && o.start <= median.end))
    console.log(`  ${ms(op.start)} ${ms(op.end)}  ${op.background ? '*' : ' '} ${op.name}`);
  console.log(`  ${ms(median.end)} ${''.padStart(7)}    response received`);
}

// The CPU profile: self time per node, grouped by area.
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
const profile = JSON.parse(readFileSync(profilePath, 'utf8')) as {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
};
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
// Samples taken while the harness itself ran (stopping the profiler serialises the profile on the
// server's main thread) are left out: they are not the scenario's time.
const parentOf = new Map<number, number>();
for (const n of profile.nodes as (ProfileNode & { children?: number[] })[])
  for (const c of n.children ?? []) parentOf.set(c, n.id);
const harness = new Map<number, boolean>();
function inHarness(id: number): boolean {
  let known = harness.get(id);
  if (known === undefined) {
    const parent = parentOf.get(id);
    known =
      (byId.get(id)?.callFrame.url.includes('/scripts/profile-server.ts') ?? false) ||
      (parent !== undefined && inHarness(parent));
    harness.set(id, known);
  }
  return known;
}
const selfUs = new Map<number, number>();
profile.samples.forEach((id, k) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[k] ?? 0));
});

function areaOf(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 13).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const src = url.indexOf('/src/');
  if (src >= 0) return `src/${url.slice(src + 5).split('/')[0]}`;
  if (url.startsWith('node:')) return 'node internals';
  return url.includes('/bench/') || url.includes('/scripts/') ? 'bench harness' : url;
}
const areas = new Map<string, number>();
const functions = new Map<string, number>();
let busy = 0;
let idle = 0;
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  const { functionName, url, lineNumber } = node.callFrame;
  if (inHarness(id)) continue;
  if (functionName === '(idle)') {
    idle += us;
    continue;
  }
  busy += us;
  const area = areaOf(url, functionName);
  areas.set(area, (areas.get(area) ?? 0) + us);
  const key = `${functionName || '(anonymous)'}  ${area}${url ? `:${lineNumber + 1}` : ''}`;
  functions.set(key, (functions.get(key) ?? 0) + us);
}
const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
console.log(
  `\nserver main thread: ${(busy / 1e6).toFixed(2)} s sampled busy, ${(idle / 1e6).toFixed(2)} s idle (waiting on I/O or timers)` +
    ` (wall clock, so time descheduled on a busy machine counts too); self time by area:`,
);
for (const [area, us] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`  ${pct(us)}  ${area}`);
console.log('\ntop functions by self time:');
for (const [fn, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${pct(us)}  ${fn}`);
console.log(`\nprofile: ${profilePath}`);
