import { randomUUID } from 'node:crypto';
import { createProject } from '../src/admin/service';
import { createDb, type Db } from '../src/db/client';
import type { Provider } from '../src/db/schema-source';
import { Prisma } from '../src/generated/sqlite/client';
import { chunkText } from '../src/kb/chunk';
import { compileMetadataFilter, matchesMetadataFilter, parseMetadataFilter } from '../src/kb/filter';
import { fullTextSql, metadataColumn, type RetrievedChunk, searchChunks, termTiers } from '../src/kb/search';
import { questionTerms } from '../src/kb/terms';
import { newId } from '../src/lib/ids';
import { createAppPubSub } from '../src/lib/pubsub';
import type { BenchContext, BenchServer, BenchSuite } from './lib';
import { fmt, printTable, startBenchServer, timeIt } from './lib';
import { reportTarget } from './targets';

/**
 * Issues 7 and 17: knowledge-base ingestion (chunks/s through the upload endpoint and the ingestion
 * job, beside chunking alone) and query latency p50/p95/p99 at 200k chunks, with and without a
 * selective metadata filter, on SQLite and PostgreSQL. Each filtered query is also timed as the
 * baseline the issue names: the same full-text search with the filter evaluated in JavaScript
 * after fetching the candidates (every full-text match, since fewer could miss the filter's
 * chunks). `--quick` uses 10k chunks. The REST endpoint's p95 is what the table reports
 * (bench/targets.ts).
 *
 * Chunks are synthetic text (about 120 words each) over a 5,000-word vocabulary with a Zipf-like
 * frequency, loaded with SQL so the full-text triggers index them as ingestion would; metadata:
 * `category` (one of 50), `year` (2000..2024), `tags` (two of 20), `source.lang`.
 */

const WORDS_PER_CHUNK = 120;
const VOCABULARY = 5000;
const QUERY_RUNS = 200;

/** A deterministic pseudo-random generator (mulberry32), so every run loads the same corpus. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const vocabulary = Array.from({ length: VOCABULARY }, (_, i) => `w${i.toString(36)}x`);

/** Zipf-like: word i is drawn with probability ∝ 1/(i+1). */
function wordSampler(rand: () => number): () => string {
  const cumulative: number[] = [];
  let sum = 0;
  for (let i = 0; i < VOCABULARY; i++) {
    sum += 1 / (i + 1);
    cumulative.push(sum);
  }
  return () => {
    const x = rand() * sum;
    let lo = 0;
    let hi = VOCABULARY - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cumulative[mid] as number) < x) lo = mid + 1;
      else hi = mid;
    }
    return vocabulary[lo] as string;
  };
}

function metadataOf(i: number, rand: () => number): Record<string, unknown> {
  return {
    category: `cat-${i % 50}`,
    year: 2000 + Math.floor(rand() * 25),
    tags: [`tag-${Math.floor(rand() * 20)}`, `tag-${Math.floor(rand() * 20)}`],
    source: { lang: rand() < 0.8 ? 'en' : 'de' },
  };
}

/**
 * Loads `count` chunks into one document with multi-row SQL inserts. The full-text index is kept
 * by the same triggers as in ingestion: FTS5's row triggers on SQLite, and on PostgreSQL the
 * statement trigger that indexes each INSERT's rows in one INSERT … SELECT (it replaced a row
 * trigger that the load used to switch off and make up for afterwards).
 */
export async function loadChunks(db: Db, projectId: string, count: number): Promise<void> {
  const documentId = newId();
  await db.prisma.kbDocument.create({
    data: { id: documentId, projectId, kind: 'table', type: 'table', name: 'bench', metadata: {}, status: 'SUCCESS' },
  });
  const rand = random(7);
  const word = wordSampler(rand);
  const batch = 2000;
  for (let from = 0; from < count; from += batch) {
    const rows = [];
    for (let i = from; i < Math.min(count, from + batch); i++) {
      const content = Array.from({ length: WORDS_PER_CHUNK }, word).join(' ');
      rows.push({ id: randomUUID(), position: i, content, metadata: metadataOf(i, rand) });
    }
    const json = JSON.stringify(rows);
    if (db.provider === 'sqlite') {
      await db.prisma.$executeRaw`
        INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata")
        SELECT json_extract(value, '$.id'), ${documentId}, ${projectId}, json_extract(value, '$.position'),
               json_extract(value, '$.content'), ${WORDS_PER_CHUNK}, json(json_extract(value, '$.metadata'))
        FROM json_each(${json})`;
    } else {
      await db.prisma.$executeRaw`
        INSERT INTO "KbChunk" ("id", "documentId", "projectId", "position", "content", "tokens", "metadata")
        SELECT r.id, ${documentId}, ${projectId}, r.position, r.content, ${WORDS_PER_CHUNK}, r.metadata
        FROM jsonb_to_recordset(${json}::jsonb) AS r(id text, position int, content text, metadata jsonb)`;
    }
  }
  await db.prisma.$executeRawUnsafe('ANALYZE');
}

/**
 * The baseline: every full-text match of the same term tiers (no filter in SQL), the filter
 * applied in JavaScript, top `limit`; like retrieval, the first tier that keeps a chunk answers.
 */
async function searchThenFilterInJs(
  db: Db,
  projectId: string,
  question: string,
  filter: unknown,
  limit: number,
): Promise<{ ids: string[]; candidates: number }> {
  const parsed = parseMetadataFilter(filter);
  let candidates = 0;
  for (const tier of await termTiers(db, questionTerms(question))) {
    const rows = await db.prisma.$queryRaw<{ id: string; metadata: unknown }[]>(
      fullTextSql(db.provider, { projectId, ...tier, filter: Prisma.sql`TRUE`, limit: 10_000_000 }),
    );
    candidates += rows.length;
    const kept: string[] = [];
    for (const row of rows) {
      const metadata = typeof row.metadata === 'string' ? JSON.parse(row.metadata) : row.metadata;
      if (matchesMetadataFilter(parsed, metadata)) kept.push(row.id);
      if (kept.length === limit) break;
    }
    if (kept.length) return { ids: kept, candidates };
  }
  return { ids: [], candidates };
}

interface QueryCase {
  name: string;
  question: string;
  filter: Record<string, unknown> | null;
}

/** Three-term questions over mid-frequency words (they match a few percent of chunks each). */
const cases: QueryCase[] = [
  { name: 'no filter', question: `${vocabulary[40]} ${vocabulary[90]} ${vocabulary[160]}`, filter: null },
  {
    name: 'selective filter (~0.3 % of chunks)',
    question: `${vocabulary[40]} ${vocabulary[90]} ${vocabulary[160]}`,
    filter: { category: 'cat-7', year: { $gte: 2020 }, 'source.lang': 'en' },
  },
  {
    name: 'array filter ($in tags)',
    question: `${vocabulary[55]} ${vocabulary[120]} ${vocabulary[300]}`,
    filter: { tags: { $in: ['tag-3'] }, year: { $lt: 2005 } },
  },
];

/**
 * The ingestion benchmark's documents: 40 paragraphs of 220 words each (about 80 chunks of at most
 * 500 tokens per document). The same seed every run; `npm run profile -- kb-ingest` uploads these too.
 */
export function ingestionTexts(documents: number, seed = 11): string[] {
  const word = wordSampler(random(seed));
  return Array.from({ length: documents }, () =>
    Array.from({ length: 40 }, () => `${Array.from({ length: 220 }, word).join(' ')}.`).join('\n\n'),
  );
}

/**
 * Rounds of the ingestion measure. Each round uploads its documents, then cuts the same documents
 * with the chunker in process, so both figures of a round see the same machine; the row reports
 * the round whose ratio is the median. One pass over 20 documents (the measure until the fifth
 * 25 November session) moved by 0.07x between two runs minutes apart.
 */
const INGESTION_ROUNDS = { quick: { rounds: 3, documents: 4 }, full: { rounds: 9, documents: 12 } };

async function ingestion(
  server: BenchServer,
  quick: boolean,
): Promise<{ rows: (string | number)[][]; rate: number; baseline: number }> {
  const { rounds, documents } = quick ? INGESTION_ROUNDS.quick : INGESTION_ROUNDS.full;
  const texts = ingestionTexts(documents);
  const upload = async (text: string, name: string, n: number): Promise<number> => {
    const form = new FormData();
    form.append('file', new Blob([text]), name);
    form.append('metadata', JSON.stringify({ n }));
    const res = await fetch(`${server.url}/v1/knowledge-base/docs/upload?wait=true&maxChunkSize=500`, {
      method: 'POST',
      headers: { authorization: server.project.apiKey },
      body: form,
    });
    const body = (await res.json()) as { data: { status: string; chunkCount: number }[] };
    const [document] = body.data;
    if (document?.status !== 'SUCCESS') throw new Error(`ingestion failed: ${JSON.stringify(body)}`);
    return document.chunkCount;
  };
  // The first upload after a start also builds the tokenizer and compiles the path (about a
  // second on a quiet machine): it is timed on its own row, and the rates are measured warm.
  const coldStarted = performance.now();
  await upload(ingestionTexts(1, 12)[0] as string, 'warm-up.txt', -1);
  const coldMs = performance.now() - coldStarted;
  const measured: { rate: number; baseline: number; chunks: number }[] = [];
  for (let round = 0; round < rounds; round++) {
    let chunks = 0;
    const started = performance.now();
    for (const [i, text] of texts.entries()) chunks += await upload(text, `doc-${round}-${i}.txt`, i);
    const seconds = (performance.now() - started) / 1000;
    const chunkStarted = performance.now();
    let chunked = 0;
    for (const text of texts) chunked += chunkText(text, { maxTokens: 500, overlapTokens: 50 }).length;
    const chunkSeconds = (performance.now() - chunkStarted) / 1000;
    measured.push({ rate: chunks / seconds, baseline: chunked / chunkSeconds, chunks });
  }
  const byRatio = [...measured].sort((a, b) => a.rate / a.baseline - b.rate / b.baseline);
  const median = byRatio[Math.floor(byRatio.length / 2)] as (typeof measured)[number];
  const ratios = measured.map((m) => fmt(m.rate / m.baseline, 2)).join(' ');
  return {
    rows: [
      [`${server.provider}: first upload after start (not in the rate), ms`, fmt(coldMs), 1, ''],
      [
        `${server.provider}: upload + ingestion job (REST, wait=true), median of ${rounds} rounds`,
        fmt(median.rate),
        documents,
        median.chunks,
      ],
      [`${server.provider}: chunking alone (baseline), same round`, fmt(median.baseline), documents, median.chunks],
      [`${server.provider}: each round's ratio, in order`, ratios, rounds * documents, ''],
    ],
    rate: median.rate,
    baseline: median.baseline,
  };
}

async function measure(ctx: BenchContext, provider: Provider): Promise<void> {
  const server = await startBenchServer(ctx, provider);
  const db = await createDb(server.database.url);
  try {
    const ingested = await ingestion(server, ctx.quick);
    printTable(`knowledge-base ingestion [${provider}]`, [
      ['path', 'chunks/s', 'documents', 'chunks'],
      ...ingested.rows,
    ]);
    reportTarget({ id: 'kb-ingestion', provider, value: ingested.rate, baseline: ingested.baseline });

    const count = ctx.quick ? 10_000 : 200_000;
    const loadStarted = performance.now();
    // Queries run on a project of their own, so the ingested documents above do not count.
    const queryProject = await createProject(
      { db, pubsub: createAppPubSub().pubsub },
      { name: 'kb-bench', actor: 'cli', key: {} },
    );
    const queryProjectId = queryProject.project.id;
    const apiKey = queryProject.created!.apiKey;
    await loadChunks(db, queryProjectId, count);
    console.log(
      `loaded ${count.toLocaleString('en-US')} chunks into ${provider} in ${fmt((performance.now() - loadStarted) / 1000)} s`,
    );

    const rows: (string | number)[][] = [['query', 'path', 'p50 ms', 'p95 ms', 'p99 ms', 'matches', 'ratio']];
    // --quick checks that the suite works and keeps the whole run under two minutes.
    const runs = ctx.quick ? 20 : QUERY_RUNS;
    for (const c of cases) {
      const body = JSON.stringify({
        question: c.question,
        synthesis: false,
        chunkLimit: 10,
        ...(c.filter ? { filters: c.filter } : {}),
      });
      const rest = await timeIt(
        async () => {
          const res = await fetch(`${server.url}/v1/knowledge-base/query`, {
            method: 'POST',
            headers: { authorization: apiKey, 'content-type': 'application/json' },
            body,
          });
          if (res.status !== 200) throw new Error(`query failed: ${res.status} ${await res.text()}`);
          await res.arrayBuffer();
        },
        runs,
        10,
      );
      // The same search in process (no HTTP, no GraphQL): the SQL the endpoint runs.
      const filter = c.filter
        ? compileMetadataFilter(parseMetadataFilter(c.filter), db.provider, metadataColumn)
        : null;
      let sqlResult: RetrievedChunk[] = [];
      const inSql = await timeIt(
        async () => {
          sqlResult = await searchChunks(db, { projectId: queryProjectId, question: c.question, limit: 10, filter });
        },
        runs,
        10,
      );
      rows.push([c.name, 'REST endpoint', rest.p50, rest.p95, rest.p99, sqlResult.length, '']);
      const target =
        c.name === 'no filter' ? 'kb-query-no-filter' : c.name.startsWith('selective') ? 'kb-query-selective' : null;
      if (target)
        reportTarget({ id: target, provider, value: rest.p95, note: `${fmt(count / 1000, 0)}k chunks, REST` });
      rows.push([c.name, 'filter in SQL (in process)', inSql.p50, inSql.p95, inSql.p99, sqlResult.length, '1.00']);
      if (c.filter) {
        let baseline = { ids: [] as string[], candidates: 0 };
        const inJs = await timeIt(
          async () => {
            baseline = await searchThenFilterInJs(db, queryProjectId, c.question, c.filter, 10);
          },
          Math.max(10, Math.floor(runs / 4)),
          3,
        );
        const same = baseline.ids.join() === sqlResult.map((r) => r.chunkId).join();
        rows.push([
          c.name,
          `baseline: fetch ${baseline.candidates.toLocaleString('en-US')} matches, filter in JS${same ? '' : ' (DIFFERENT RESULT)'}`,
          inJs.p50,
          inJs.p95,
          inJs.p99,
          baseline.ids.length,
          `${fmt(inJs.p50 / inSql.p50, 2)}x`,
        ]);
      }
    }
    printTable(`knowledge-base query at ${count.toLocaleString('en-US')} chunks [${provider}], chunkLimit 10`, rows);
  } finally {
    await db.close();
    await server.close();
  }
}

export const kbBench: BenchSuite = {
  name: 'kb',
  description:
    'knowledge base: ingestion chunks/s vs chunking alone; query p50/p95/p99 at 200k chunks with and without a selective filter vs filtering in JavaScript',
  async run(ctx) {
    for (const provider of ctx.providers) await measure(ctx, provider);
  },
};
