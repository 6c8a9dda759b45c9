import Database from 'better-sqlite3';
import pg from 'pg';
import { sqliteFilePath } from '../src/db/schema-engine';
import type { Provider } from '../src/db/schema-source';
import { newId } from '../src/lib/ids';
import { compileTranscriptSearch, transcriptOrderBy } from '../src/transcripts/search';
import type { SearchCriteria } from '../src/transcripts/validation';
import type { BenchContext, BenchServer, BenchSuite, LatencySummary } from './lib';
import { fmt, printTable, startBenchServer, timeIt } from './lib';
import { reportTarget } from './targets';

/**
 * Issue 4: transcript search at 100k transcripts with 1M logs (10 each), 100k property values and
 * 25k evaluation results, on SQLite and PostgreSQL. Each scenario is timed through the real REST
 * endpoint (HTTP, auth, GraphQL, Prisma) and as the same query written by hand in SQL on the same
 * driver (the page of transcripts, then their property values and results), in the same run.
 * Two more figures place the difference: the same search through Prisma in process (no HTTP, no
 * GraphQL), and the REST floor (an authenticated trivial request, no database work).
 * `--quick` uses 5k transcripts and 50k logs.
 */

const LOGS_PER_TRANSCRIPT = 10;
/** Untimed runs before each measurement, so JIT and caches are warm for the first scenario too. */
const WARMUP = 20;

export interface Dataset {
  projectId: string;
  environmentId: string;
  scoreId: string;
  resolvedId: string;
  transcripts: number;
}

interface Scenario {
  name: string;
  query: Record<string, string>;
  body?: unknown;
  /** The page query in SQL: `where` after `t."projectId" = ?`, its parameters, and the offset. */
  where: string;
  params: unknown[];
  offset: number;
}

/** Offset paging far into the results: 5000 at full size, half the transcripts when smaller. */
const deepSkip = (d: Dataset) => Math.min(5000, Math.floor(d.transcripts / 2));

function scenarios(d: Dataset): Scenario[] {
  return [
    { name: 'newest 25', query: {}, where: '', params: [], offset: 0 },
    {
      name: `deep page (skip ${deepSkip(d)})`,
      query: { skip: String(deepSkip(d)) },
      where: '',
      params: [],
      offset: deepSkip(d),
    },
    {
      name: 'userID',
      query: {},
      body: { userID: 'user-7' },
      where: 'AND t."userId" = ?',
      params: ['user-7'],
      offset: 0,
    },
    {
      name: 'ended + number property between',
      query: {},
      body: { ended: true, filters: [{ id: d.scoreId, op: 'between', value: [10, 12] }] },
      where:
        'AND t."endedAt" IS NOT NULL AND EXISTS (SELECT 1 FROM "TranscriptPropertyValue" v WHERE v."transcriptId" = t."id" AND v."propertyId" = ? AND v."numberValue" >= ? AND v."numberValue" <= ?)',
      params: [d.scoreId, 10, 12],
      offset: 0,
    },
    {
      name: 'evaluation result eq true',
      query: {},
      body: { filters: [{ id: d.resolvedId, op: 'eq', value: true }] },
      where:
        'AND EXISTS (SELECT 1 FROM "EvaluationResult" r WHERE r."transcriptId" = t."id" AND r."evaluationId" = ? AND r."status" = \'done\' AND r."valueBoolean" = ?)',
      params: [d.resolvedId, true],
      offset: 0,
    },
  ];
}

/** Prisma keeps SQLite date-times as ISO text with a +00:00 offset. */
const sqliteDate = (d: Date) => d.toISOString().replace('Z', '+00:00');

interface Rows {
  transcripts: unknown[][];
  logs: unknown[][];
  values: unknown[][];
  results: unknown[][];
}

/** Rows for transcripts [from, to): created 10 s apart, every other one ended, 1000 distinct users. */
function generate(d: Dataset, from: number, to: number, start: number, asDate: (d: Date) => unknown): Rows {
  const rows: Rows = { transcripts: [], logs: [], values: [], results: [] };
  for (let i = from; i < to; i++) {
    const created = new Date(start + i * 10_000);
    const id = newId(created.getTime());
    const ended = i % 2 === 0 ? asDate(new Date(created.getTime() + 60_000)) : null;
    rows.transcripts.push([
      id,
      d.projectId,
      d.environmentId,
      `session-${i}`,
      `user-${i % 1000}`,
      LOGS_PER_TRANSCRIPT,
      asDate(created),
      asDate(created),
      ended,
    ]);
    for (let s = 0; s < LOGS_PER_TRANSCRIPT; s++) {
      const at = asDate(new Date(created.getTime() + s * 1000));
      const action = s % 2 === 0;
      const data = action
        ? { type: 'text', payload: `question ${s} about order ${i}` }
        : { type: 'text', payload: { message: `answer ${s} for [email]` }, time: created.getTime() + s * 1000 };
      rows.logs.push([
        newId(created.getTime()),
        id,
        s,
        action ? 'action' : 'trace',
        action ? null : 'text',
        JSON.stringify(data),
        at,
        at,
      ]);
    }
    rows.values.push([id, d.scoreId, String(i % 100), i % 100, asDate(created), asDate(created)]);
    if (i % 4 === 0) {
      rows.results.push([
        newId(created.getTime()),
        d.resolvedId,
        id,
        'done',
        newId(),
        i % 8 === 0,
        'because',
        0.001,
        asDate(created),
        asDate(created),
      ]);
    }
  }
  return rows;
}

const columns = {
  transcripts: [
    'id',
    'projectId',
    'environmentId',
    'sessionId',
    'userId',
    'logCount',
    'createdAt',
    'updatedAt',
    'endedAt',
  ],
  logs: ['id', 'transcriptId', 'seq', 'type', 'traceType', 'data', 'createdAt', 'updatedAt'],
  values: ['transcriptId', 'propertyId', 'value', 'numberValue', 'createdAt', 'updatedAt'],
  results: [
    'id',
    'evaluationId',
    'transcriptId',
    'status',
    'runId',
    'valueBoolean',
    'reason',
    'cost',
    'createdAt',
    'updatedAt',
  ],
};
const tables = {
  transcripts: 'Transcript',
  logs: 'TranscriptLog',
  values: 'TranscriptPropertyValue',
  results: 'EvaluationResult',
};
const pgTypes = {
  transcripts: ['text', 'text', 'text', 'text', 'text', 'int', 'timestamp(3)', 'timestamp(3)', 'timestamp(3)'],
  logs: ['text', 'text', 'int', 'text', 'text', 'jsonb', 'timestamp(3)', 'timestamp(3)'],
  values: ['text', 'text', 'text', 'float8', 'timestamp(3)', 'timestamp(3)'],
  results: ['text', 'text', 'text', 'text', 'text', 'bool', 'text', 'float8', 'timestamp(3)', 'timestamp(3)'],
};

/** A raw-SQL connection on the same driver the server uses, with `?` placeholders on both. */
export interface RawDriver {
  query(sql: string, params: unknown[]): Promise<Record<string, unknown>[]>;
  insert(kind: keyof Rows, rows: unknown[][]): Promise<void>;
  analyze(): Promise<void>;
  close(): Promise<void>;
}

export function sqliteDriver(url: string): RawDriver {
  const db = new Database(sqliteFilePath(url), { timeout: 10_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const inserts = Object.fromEntries(
    (Object.keys(tables) as (keyof Rows)[]).map((kind) => [
      kind,
      db.prepare(
        `INSERT INTO "${tables[kind]}" (${columns[kind].map((c) => `"${c}"`).join(', ')}) VALUES (${columns[kind].map(() => '?').join(', ')})`,
      ),
    ]),
  ) as Record<keyof Rows, Database.Statement>;
  const statements = new Map<string, Database.Statement>();
  const bind = (v: unknown) => (typeof v === 'boolean' ? (v ? 1 : 0) : v);
  return {
    async query(sql, params) {
      let stmt = statements.get(sql);
      if (!stmt) {
        stmt = db.prepare(sql);
        statements.set(sql, stmt);
      }
      return stmt.all(...params.map(bind)) as Record<string, unknown>[];
    },
    async insert(kind, rows) {
      db.transaction(() => {
        for (const row of rows) inserts[kind].run(...row.map(bind));
      })();
    },
    async analyze() {
      db.exec('ANALYZE');
    },
    async close() {
      db.close();
    },
  };
}

export function postgresDriver(url: string): RawDriver {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const numbered = (sql: string) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  };
  return {
    async query(sql, params) {
      return (await pool.query({ text: numbered(sql), values: params })).rows;
    },
    async insert(kind, rows) {
      const cols = columns[kind];
      const arrays = cols.map((_, c) => rows.map((r) => r[c]));
      const sql = `INSERT INTO "${tables[kind]}" (${cols.map((c) => `"${c}"`).join(', ')})
        SELECT * FROM unnest(${pgTypes[kind].map((type, i) => `$${i + 1}::${type}[]`).join(', ')})`;
      await pool.query(sql, arrays);
    },
    async analyze() {
      await pool.query('ANALYZE');
    },
    async close() {
      await pool.end();
    },
  };
}

export async function seed(server: BenchServer, driver: RawDriver, transcripts: number): Promise<Dataset> {
  const prisma = server.running.services.db.prisma;
  const projectId = server.project.projectID;
  const env = await prisma.environment.findFirstOrThrow({ where: { projectId, alias: 'development' } });
  const score = await prisma.transcriptProperty.create({
    data: { id: newId(), projectId, name: 'score', type: 'number' },
  });
  const resolved = await prisma.evaluation.create({
    data: {
      id: newId(),
      projectId,
      name: 'resolved',
      type: 'boolean',
      prompt: 'Resolved?',
      truePrompt: 'yes',
      falsePrompt: 'no',
      settings: {},
    },
  });
  const d: Dataset = { projectId, environmentId: env.id, scoreId: score.id, resolvedId: resolved.id, transcripts };
  const asDate = server.provider === 'sqlite' ? sqliteDate : (x: Date) => x;
  const start = Date.UTC(2025, 0, 1);
  const batch = 5000;
  for (let from = 0; from < transcripts; from += batch) {
    const rows = generate(d, from, Math.min(transcripts, from + batch), start, asDate);
    await driver.insert('transcripts', rows.transcripts);
    await driver.insert('logs', rows.logs);
    await driver.insert('values', rows.values);
    await driver.insert('results', rows.results);
  }
  await driver.analyze();
  return d;
}

/** The raw-SQL equivalent of one REST search: the page, then its property values and results. */
async function rawSearch(driver: RawDriver, d: Dataset, s: Scenario): Promise<number> {
  const page = await driver.query(
    `SELECT t."id", t."sessionId", t."projectId", t."environmentId", t."userId", t."createdAt", t."updatedAt",
            t."expiresAt", t."endedAt", t."recordingUrl"
     FROM "Transcript" t WHERE t."projectId" = ? ${s.where}
     ORDER BY t."createdAt" DESC, t."id" DESC LIMIT 25 OFFSET ${s.offset}`,
    [d.projectId, ...s.params],
  );
  const ids = page.map((r) => r.id as string);
  if (ids.length === 0) return 0;
  const marks = ids.map(() => '?').join(', ');
  await driver.query(
    `SELECT v."transcriptId", v."propertyId", v."value", v."metadata", v."createdAt", v."updatedAt", p."name", p."type"
     FROM "TranscriptPropertyValue" v JOIN "TranscriptProperty" p ON p."id" = v."propertyId"
     WHERE v."transcriptId" IN (${marks}) ORDER BY p."createdAt", v."propertyId"`,
    ids,
  );
  await driver.query(
    `SELECT r.*, e."name", e."description", e."type", e."minimumValue", e."maximumValue"
     FROM "EvaluationResult" r JOIN "Evaluation" e ON e."id" = r."evaluationId"
     WHERE r."transcriptId" IN (${marks}) ORDER BY e."createdAt", r."evaluationId"`,
    ids,
  );
  return ids.length;
}

async function runProvider(ctx: BenchContext, provider: Provider, rows: (string | number)[][]): Promise<void> {
  const transcripts = ctx.quick ? 5_000 : 100_000;
  const iterations = ctx.quick ? 20 : 100;
  const server = await startBenchServer(ctx, provider, { JOBS_ENABLED: 'false' });
  const driver = provider === 'sqlite' ? sqliteDriver(server.database.url) : postgresDriver(server.database.url);
  try {
    const seeded = performance.now();
    const d = await seed(server, driver, transcripts);
    console.log(
      `[${provider}] seeded ${transcripts.toLocaleString('en-US')} transcripts, ${(transcripts * LOGS_PER_TRANSCRIPT).toLocaleString('en-US')} logs in ${((performance.now() - seeded) / 1000).toFixed(1)} s`,
    );
    const agent = { authorization: server.project.apiKey, 'content-type': 'application/json' };
    // The fixed cost of any REST request (HTTP, auth, adapter, GraphQL), with no database work.
    const floor = await timeIt(
      async () => {
        const res = await fetch(`${server.url}/v1/whoami`, { headers: agent });
        if (res.status !== 200) throw new Error(`whoami: ${res.status}`);
        await res.arrayBuffer();
      },
      iterations,
      WARMUP,
    );
    rows.push([`REST floor: GET /v1/whoami [${provider}]`, '-', floor.p50, floor.p95, '-', '-', '-', '-']);
    for (const s of scenarios(d)) {
      const url = new URL(`${server.url}/v1/transcript/project/${d.projectId}`);
      for (const [k, v] of Object.entries(s.query)) url.searchParams.set(k, v);
      const body = s.body === undefined ? undefined : JSON.stringify(s.body);
      let restCount = -1;
      const rest: LatencySummary = await timeIt(
        async () => {
          const res = await fetch(url, { method: 'POST', headers: agent, body });
          if (res.status !== 200) throw new Error(`${s.name}: ${res.status} ${await res.text()}`);
          restCount = ((await res.json()) as { transcripts: unknown[] }).transcripts.length;
        },
        iterations,
        WARMUP,
      );
      // The same search through Prisma in process (what the resolver asks for), without HTTP or GraphQL.
      const db = server.running.services.db;
      let prismaCount = -1;
      const orm = await timeIt(
        async () => {
          const where = await compileTranscriptSearch(
            db.prisma,
            db.provider,
            d.projectId,
            (s.body ?? {}) as SearchCriteria,
          );
          const page = await db.prisma.transcript.findMany({
            where,
            orderBy: transcriptOrderBy('DESC'),
            skip: s.offset,
            take: 25,
            include: {
              propertyValues: { include: { property: { select: { name: true, type: true } } } },
              evaluationResults: { include: { evaluation: true } },
            },
          });
          prismaCount = page.length;
        },
        iterations,
        WARMUP,
      );
      if (prismaCount !== restCount)
        throw new Error(`${s.name}: REST returned ${restCount} transcripts, Prisma ${prismaCount}`);
      let rawCount = -1;
      const raw = await timeIt(
        async () => {
          rawCount = await rawSearch(driver, d, s);
        },
        iterations,
        WARMUP,
      );
      if (restCount !== rawCount) throw new Error(`${s.name}: REST returned ${restCount} transcripts, SQL ${rawCount}`);
      rows.push([
        `${s.name} [${provider}]`,
        String(restCount),
        rest.p50,
        rest.p95,
        orm.p50,
        raw.p50,
        raw.p95,
        `${fmt(rest.p50 / raw.p50, 1)}x`,
      ]);
      if (s.name === 'newest 25')
        reportTarget({
          id: 'transcript-search',
          provider,
          value: rest.p50,
          // The issue's baseline: the REST floor (a trivial authenticated request) plus the SQL alone.
          baseline: floor.p50 + raw.p50,
          note: `${fmt(transcripts / 1000, 0)}k transcripts, floor ${fmt(floor.p50, 2)} ms + SQL ${fmt(raw.p50, 2)} ms`,
        });
    }
  } finally {
    await driver.close();
    await server.close();
  }
}

export const transcriptsBench: BenchSuite = {
  name: 'transcripts',
  description: 'transcript search at 100k transcripts / 1M logs: REST endpoint vs the same query as raw SQL',
  async run(ctx) {
    const rows: (string | number)[][] = [
      ['search', 'rows', 'REST p50', 'REST p95', 'Prisma p50', 'SQL p50', 'SQL p95', 'REST/SQL p50'],
    ];
    for (const provider of ctx.providers) await runProvider(ctx, provider, rows);
    printTable(
      `Transcript search (take 25), ${ctx.quick ? '5k transcripts / 50k logs' : '100k transcripts / 1M logs'}; milliseconds`,
      rows,
    );
  },
};
