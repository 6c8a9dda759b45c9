import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { hourOf, usageQueryNames } from '../../src/analytics/usage-metrics';
import type { Db } from '../../src/db/client';
import { projectRoot } from '../../src/db/schema-source';
import { type DemoProject, seedDemo } from '../../src/demo/seed';
import { AppError } from '../../src/lib/errors';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { usageRest } from '../helpers/usage';

/**
 * `parley demo`: a project with a published agent, documents and days of conversations, evaluation
 * results and usage, seen through the real HTTP interface; the same seed gives the same data.
 */

const run = promisify(execFile);
const now = new Date('2026-11-20T15:30:00Z');
const days = 3;

/** Everything the demo wrote for a project, with IDs replaced by what they name, for comparing two runs. */
async function snapshot(db: Db, projectId: string, until: Date) {
  const p = db.prisma;
  const envs = new Map((await p.environment.findMany({ where: { projectId } })).map((e) => [e.id, e.alias]));
  const props = new Map((await p.transcriptProperty.findMany({ where: { projectId } })).map((e) => [e.id, e.name]));
  const evals = new Map((await p.evaluation.findMany({ where: { projectId } })).map((e) => [e.id, e.name]));
  const docs = await p.kbDocument.findMany({
    where: { projectId },
    orderBy: { name: 'asc' },
    select: { id: true, name: true, type: true, status: true, chunkCount: true, metadata: true },
  });
  const docNames = new Map(docs.map((d) => [d.id, d.name]));
  const agents = new Map((await p.agent.findMany({ where: { projectId } })).map((a) => [a.id, a.name]));
  const transcripts = await p.transcript.findMany({
    where: { projectId, createdAt: { lte: until } },
    orderBy: [{ createdAt: 'asc' }, { userId: 'asc' }],
    include: {
      logs: {
        orderBy: { seq: 'asc' },
        select: { seq: true, type: true, traceType: true, data: true, createdAt: true },
      },
      propertyValues: { select: { propertyId: true, value: true, numberValue: true } },
      evaluationResults: {
        select: {
          evaluationId: true,
          status: true,
          valueBoolean: true,
          valueNumber: true,
          valueString: true,
          reason: true,
          cost: true,
          inputTokens: true,
          outputTokens: true,
        },
      },
    },
  });
  const rollups = await p.usageRollup.findMany({
    where: { projectId, hour: { lte: hourOf(until) } },
    orderBy: [
      { metric: 'asc' },
      { hour: 'asc' },
      { environmentId: 'asc' },
      { type: 'asc' },
      { model: 'asc' },
      { subjectId: 'asc' },
      { name: 'asc' },
    ],
  });
  const subject = (metric: string, id: string) =>
    metric === 'kb_documents' ? docNames.get(id) : metric === 'agent_usage' ? agents.get(id) : id;
  return {
    documents: docs.map(({ id: _id, ...d }) => d),
    transcripts: transcripts.map((t) => ({
      environment: envs.get(t.environmentId),
      userId: t.userId,
      createdAt: t.createdAt,
      endedAt: t.endedAt,
      logCount: t.logCount,
      logs: t.logs,
      properties: t.propertyValues
        .map((v) => ({ name: props.get(v.propertyId), value: v.value, numberValue: v.numberValue }))
        .sort((a, b) => String(a.name).localeCompare(String(b.name))),
      evaluations: t.evaluationResults
        .map(({ evaluationId, ...r }) => ({ name: evals.get(evaluationId), ...r }))
        .sort((a, b) => String(a.name).localeCompare(String(b.name))),
    })),
    usage: rollups
      .map((r) => ({
        metric: r.metric,
        hour: r.hour,
        environment: envs.get(r.environmentId),
        type: r.type,
        model: r.model,
        subject: subject(r.metric, r.subjectId),
        name: r.name,
        count: Number(r.count),
        successCount: Number(r.successCount),
      }))
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
  };
}

describeEachDatabase('parley demo', (provider) => {
  const t = useTestApp(provider);
  let demo: DemoProject;

  beforeAll(async () => {
    const { summary, ...project } = await seedDemo(t.app.services, { seed: 42, days, now });
    demo = project;
    expect(summary.transcripts).toBeGreaterThan(50);
    expect(summary.documents).toBe(3);
  }, 180_000);

  it('answers like project create: a key that works, both environments', async () => {
    expect(Object.keys(demo).sort()).toEqual(['apiKey', 'environments', 'projectID', 'workspaceID']);
    expect(demo.environments.map((e) => e.alias).sort()).toEqual(['development', 'production']);
    const whoami = await t.app.http('GET', '/v1/whoami', { key: demo.apiKey });
    expect(whoami.status).toBe(200);
    expect(JSON.stringify(whoami.body)).toContain(demo.projectID);
  });

  it('has a published agent in both environments that answers a conversation', async () => {
    const res = await t.app.http('POST', `/v2/project/${demo.projectID}/user/visitor/interact`, {
      key: demo.apiKey,
      body: { action: { type: 'launch' } },
    });
    expect(res.status).toBe(200);
    expect(res.body.map((tr: { type: string }) => tr.type)).toContain('choice');
    const agents = await t.app.gql(
      `query($id: ID!) { agents(projectID: $id) { name versions { number deployments { environment { alias } } } } }`,
      { id: demo.projectID },
    ); // as the operator: listing agents takes the admin scope
    expect(agents.body.errors).toBeUndefined();
    expect(agents.body.data.agents).toEqual([
      {
        name: 'Support bot',
        versions: [
          {
            number: 1,
            deployments: expect.arrayContaining([
              { environment: { alias: 'development' } },
              { environment: { alias: 'production' } },
            ]),
          },
        ],
      },
    ]);
  });

  it('fills every metric of the usage query over the whole period', async () => {
    const filter = {
      projectID: demo.projectID,
      startTime: new Date(now.getTime() - days * 86_400_000).toISOString(),
      endTime: now.toISOString(),
      limit: 500,
    };
    /** Every item of a query, page by page (at most 500 per page). */
    const allItems = async (name: string) => {
      const items: Record<string, unknown>[] & { count?: number } = [];
      let cursor: number | undefined;
      do {
        const res = await usageRest(t.app, demo.apiKey, { name, filter: { ...filter, cursor } });
        expect(res.status, `${name}: ${res.text}`).toBe(200);
        items.push(...res.body.result.items);
        cursor = res.body.result.cursor ?? undefined;
      } while (cursor !== undefined);
      return items;
    };
    for (const name of usageQueryNames) {
      if (name === 'top_intents') {
        const res = await usageRest(t.app, demo.apiKey, { name, filter });
        expect(res.status, res.text).toBe(200);
        const intents = res.body.result.intents.map((i: { name: string }) => i.name);
        expect(intents).toEqual(expect.arrayContaining(['track_order', 'report_problem', 'talk_to_human']));
        continue;
      }
      const items = await allItems(name);
      expect(items.length, name).toBeGreaterThan(0);
      const periods = new Set(items.map((i) => String(i.period).slice(0, 10)));
      expect(periods.size, `${name} spans the days`).toBeGreaterThanOrEqual(days);
    }
    const sum = async (name: string, key: string) => {
      const by = new Map<string, { count: number; success: number }>();
      for (const item of await allItems(name)) {
        const k = String(item[key]);
        const entry = by.get(k) ?? { count: 0, success: 0 };
        entry.count += Number(item.count);
        entry.success += Number(item.successCount ?? 0);
        by.set(k, entry);
      }
      return by;
    };
    expect([...(await sum('interactions', 'type')).keys()].sort()).toEqual(['button', 'launch', 'text']);
    expect([...(await sum('credit_usage', 'model')).keys()].sort()).toEqual(['gpt-4o-mini', 'text-embedding-3-small']);
    const api = (await sum('api_calls', 'name')).get('Order API');
    expect(api && api.success > 0 && api.success < api.count).toBe(true);
    expect((await sum('function_usage', 'name')).get('Ticket triage')?.count).toBeGreaterThan(0);
    expect([...(await sum('integrations', 'integrationToolName')).keys()]).toContain('zendesk');
    expect((await sum('kb_documents', 'documentID')).size).toBe(3);
    expect((await sum('agent_usage', 'name')).get('Support bot')?.count).toBeGreaterThan(0);
  });

  it('shows the transcripts in search, with properties, evaluation results and redacted e-mail addresses', async () => {
    const search = (body: unknown, take = 100) =>
      t.app.http('POST', `/v1/transcript/project/${demo.projectID}`, {
        key: demo.apiKey,
        body,
        query: { take: String(take) },
      });
    const all = await search({});
    expect(all.status).toBe(200);
    expect(all.body.transcripts).toHaveLength(100);

    const props = await t.app.http('GET', `/v1/transcript-property/project/${demo.projectID}`, { key: demo.apiKey });
    const priority = props.body.properties.find((p: { name: string }) => p.name === 'ticket_priority');
    expect(priority).toBeTruthy();
    const urgent = await search({ ended: true, filters: [{ id: priority.id, op: 'eq', value: 'high' }] });
    expect(urgent.status).toBe(200);
    expect(urgent.body.transcripts.length).toBeGreaterThan(0);
    for (const tr of urgent.body.transcripts) {
      expect(tr.endedAt).not.toBeNull();
      expect(tr.properties.find((p: { name: string }) => p.name === 'ticket_priority').value).toBe('high');
    }

    const evaluations = await t.app.http('GET', `/v1/transcript-evaluation/project/${demo.projectID}`, {
      key: demo.apiKey,
    });
    const resolved = evaluations.body.evaluations.find((e: { name: string }) => e.name === 'Resolved');
    const unresolved = await search({ filters: [{ id: resolved.id, op: 'eq', value: false }] });
    expect(unresolved.status).toBe(200);
    expect(unresolved.body.transcripts.length).toBeGreaterThan(0);
    for (const tr of unresolved.body.transcripts) {
      const result = tr.evaluations.find((e: { name: string }) => e.name === 'Resolved');
      expect(result.value).toBe(false);
      expect(result.reason).toMatch(/\w/);
    }

    // A problem report: the e-mail address the customer typed is stored redacted.
    const transcript = await t.app.http('GET', `/v1/transcript/${urgent.body.transcripts[0].id}`, { key: demo.apiKey });
    expect(transcript.status).toBe(200);
    const logs = JSON.stringify(transcript.body.transcript.logs);
    expect(logs).toContain('[email]');
    expect(logs).not.toMatch(/@example\.com/);
    expect(logs).toContain('live-agent-handoff');
  });

  it('has indexed knowledge-base documents that answer a question', async () => {
    const docs = await t.app.http('GET', '/v1/knowledge-base/docs', { key: demo.apiKey });
    expect(docs.status).toBe(200);
    expect(docs.body.total).toBe(3);
    for (const d of docs.body.data) {
      expect(d.status).toBe('SUCCESS');
      expect(d.chunkCount).toBeGreaterThan(0);
    }
    const answer = await t.app.http('POST', '/v1/knowledge-base/query', {
      key: demo.apiKey,
      body: { question: 'How long do refunds take?', filters: { tags: { $in: ['refunds'] } } },
    });
    expect(answer.status).toBe(200);
    expect(answer.body.output).toMatch(/two weeks|business days/);
    // Nothing is left queued: the documents were ingested by the seeder itself.
    const queued = await t.app.services.db.prisma.job.count({ where: { projectId: demo.projectID, status: 'queued' } });
    expect(queued).toBe(0);
  });

  // The snapshots stop at `now`: a conversation of the test above (at the real time) is not demo data.
  it('makes the same data from the same seed, and other data from another', { timeout: 180_000 }, async () => {
    const again = await seedDemo(t.app.services, { seed: 42, days, now, name: 'again' });
    const other = await seedDemo(t.app.services, { seed: 43, days, now, name: 'other' });
    const first = await snapshot(t.app.services.db, demo.projectID, now);
    expect(first.transcripts.length).toBeGreaterThan(50);
    expect(await snapshot(t.app.services.db, again.projectID, now)).toEqual(first);
    const different = await snapshot(t.app.services.db, other.projectID, now);
    expect(different.transcripts).not.toEqual(first.transcripts);
  });

  it('refuses options out of range and writes nothing', async () => {
    const before = await t.app.services.db.prisma.project.count();
    await expect(seedDemo(t.app.services, { days: 0 })).rejects.toBeInstanceOf(AppError);
    await expect(seedDemo(t.app.services, { days: 91 })).rejects.toThrow(/days must be/);
    await expect(seedDemo(t.app.services, { seed: -1 })).rejects.toThrow(/seed must be/);
    await expect(seedDemo(t.app.services, { now: new Date('nope') })).rejects.toThrow(/now must be/);
    expect(await t.app.services.db.prisma.project.count()).toBe(before);
  });

  describe('the command', () => {
    const cli = (args: string[]) =>
      run(process.execPath, [join(projectRoot, 'bin/parley.js'), ...args], {
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: t.app.database.url, LOG_LEVEL: 'warn' },
        timeout: 120_000,
      });

    it('prints the JSON of project create, and says what it made on stderr', { timeout: 180_000 }, async () => {
      const { stdout, stderr } = await cli(['demo', '--seed', '3', '--days', '1', '--name', 'From the CLI']);
      const out = JSON.parse(stdout.trim());
      expect(Object.keys(out).sort()).toEqual(['apiKey', 'environments', 'projectID', 'workspaceID']);
      expect(stderr).toMatch(/\d+ transcripts/);
      const project = await t.app.http('GET', '/v1/whoami', { key: out.apiKey });
      expect(project.status).toBe(200);
      const count = await t.app.services.db.prisma.transcript.count({ where: { projectId: out.projectID } });
      expect(count).toBeGreaterThan(0);
    });

    it('refuses bad options with exit code 2 and a message', { timeout: 180_000 }, async () => {
      for (const args of [
        ['--days', 'abc'],
        ['--now', 'yesterday'],
      ]) {
        const failure = await cli(['demo', ...args]).then(
          () => null,
          (err: { code: number; stderr: string }) => err,
        );
        expect(failure, args.join(' ')).not.toBeNull();
        expect(failure?.code).toBe(2);
        expect(failure?.stderr).toMatch(/parley: /);
      }
    });
  });
});
