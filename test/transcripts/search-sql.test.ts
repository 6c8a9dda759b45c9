import type { GraphQLObjectType, GraphQLResolveInfo } from 'graphql';
import { expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema';
import { newId } from '../../src/lib/ids';
import { buildTranscriptWhere, loadFilterTargets, transcriptOrderBy } from '../../src/transcripts/search';
import {
  buildTranscriptWhereSql,
  countTranscripts,
  isPageRow,
  loadTranscriptPage,
  pageRelationsOf,
} from '../../src/transcripts/search-page';
import type { SearchCriteria, TranscriptFilter } from '../../src/transcripts/validation';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';

/**
 * The search's page is one SQL statement (src/transcripts/search-page.ts) whose WHERE is compiled
 * beside the Prisma `where` that the rest of Parley (evaluation batches) uses. Both must select the
 * same transcripts for every criterion, and the page's rows must be exactly what Prisma gives for
 * the same include: this test asks both, on both engines.
 */
describeEachDatabase('transcript search in SQL', (provider) => {
  const t = useTestApp(provider, { env: { JOBS_ENABLED: 'false' } });

  it('selects the same transcripts as the Prisma where, and the same rows as Prisma include', async () => {
    const p = await t.app.createProject();
    const { prisma } = t.app.services.db;
    const [production, development] = [
      p.environments.find((e) => e.alias === 'production')!,
      p.environments.find((e) => e.alias === 'development')!,
    ];
    const prop = async (name: string, type: string) =>
      prisma.transcriptProperty.create({ data: { id: newId(), projectId: p.projectID, name, type } });
    const topic = await prop('topic', 'string');
    const score = await prop('score', 'number');
    const vip = await prop('vip', 'boolean');
    const evaluation = async (name: string, type: string) =>
      prisma.evaluation.create({
        data: {
          id: newId(),
          projectId: p.projectID,
          name,
          type,
          prompt: '?',
          settings: {},
          minimumValue: 0,
          maximumValue: 10,
        },
      });
    const resolved = await evaluation('resolved', 'boolean');
    const rating = await evaluation('rating', 'number');
    const summary = await evaluation('summary', 'string');
    const topics = ['Billing', 'billing issue', 'refund 50%', 'under_score', 'Ünïcode'];
    const ids: string[] = [];
    const start = Date.UTC(2026, 0, 1);
    for (let i = 0; i < 24; i++) {
      const id = newId(start + i * 3_600_000);
      ids.push(id);
      const at = new Date(start + i * 3_600_000);
      await prisma.transcript.create({
        data: {
          id,
          projectId: p.projectID,
          environmentId: i % 3 === 0 ? production.id : development.id,
          sessionId: `s-${i}`,
          userId: i % 4 === 0 ? null : `u-${i % 5}`,
          createdAt: at,
          updatedAt: new Date(at.getTime() + (i % 7) * 60_000),
          endedAt: i % 2 === 0 ? new Date(at.getTime() + 600_000) : null,
          device: i % 5 === 0 ? 'mobile' : null,
          endsWhenIdle: i % 6 === 0,
          logCount: i,
        },
      });
      if (i % 5 !== 4) {
        await prisma.transcriptPropertyValue.create({
          data: {
            transcriptId: id,
            propertyId: topic.id,
            value: topics[i % topics.length]!,
            metadata: i % 2 ? { source: 'crm', n: i, nested: { ok: true } } : undefined,
          },
        });
      }
      if (i % 3 !== 2)
        await prisma.transcriptPropertyValue.create({
          data: { transcriptId: id, propertyId: score.id, value: String(i * 1.5), numberValue: i * 1.5 },
        });
      if (i % 4 === 1)
        await prisma.transcriptPropertyValue.create({
          data: { transcriptId: id, propertyId: vip.id, value: String(i % 8 === 1) },
        });
      const result = (evaluationId: string, status: string, value: Record<string, unknown>) =>
        prisma.evaluationResult.create({
          data: {
            id: newId(),
            evaluationId,
            transcriptId: id,
            status,
            runId: newId(),
            reason: 'r',
            cost: 0.25,
            ...value,
          },
        });
      if (i % 2 === 0) await result(resolved.id, i % 6 === 4 ? 'pending' : 'done', { valueBoolean: i % 4 === 0 });
      if (i % 3 === 0) await result(rating.id, 'done', { valueNumber: i % 10, inputTokens: 12, model: 'm' });
      if (i % 4 === 3)
        await result(summary.id, i % 8 === 7 ? 'failed' : 'done', { valueString: `Sum ${i}`, error: null });
    }

    const f = (id: string, op: TranscriptFilter['op'], value?: unknown): TranscriptFilter => ({ id, op, value });
    const criteriaList: SearchCriteria[] = [
      {},
      { userID: 'u-1' },
      { sessionID: 's-5' },
      { environmentID: 'production' },
      { environmentID: development.id },
      { environmentID: 'nowhere' },
      { ended: true },
      { ended: false },
      { startDate: new Date(start + 5 * 3_600_000), endDate: new Date(start + 15 * 3_600_000) },
      { updatedAfter: new Date(start + 3 * 3_600_000 + 120_000), updatedBefore: new Date(start + 20 * 3_600_000) },
      { filters: [f(topic.id, 'eq', 'Billing')] },
      { filters: [f(topic.id, 'neq', 'Billing')] },
      { filters: [f(topic.id, 'contains', 'BILL')] },
      { filters: [f(topic.id, 'contains', '%')] },
      { filters: [f(topic.id, 'contains', '_')] },
      { filters: [f(topic.id, 'gt', 'b')] },
      { filters: [f(topic.id, 'in', ['Billing', 'Ünïcode'])] },
      { filters: [f(topic.id, 'nin', ['Billing', 'Ünïcode'])] },
      { filters: [f(topic.id, 'between', ['B', 'c'])] },
      { filters: [f(topic.id, 'exists')] },
      { filters: [f(topic.id, 'not_exists')] },
      { filters: [f(score.id, 'gte', 9)] },
      { filters: [f(score.id, 'lt', '4.5')] },
      { filters: [f(score.id, 'between', [3, 21])] },
      { filters: [f(score.id, 'in', [0, 1.5, 33])] },
      { filters: [f(score.id, 'neq', 6)] },
      { filters: [f(vip.id, 'eq', true)] },
      { filters: [f(vip.id, 'nin', [false])] },
      { filters: [f(resolved.id, 'eq', true)] },
      { filters: [f(resolved.id, 'neq', 'false')] },
      { filters: [f(resolved.id, 'in', [true])] },
      { filters: [f(resolved.id, 'nin', [true])] },
      { filters: [f(resolved.id, 'exists')] },
      { filters: [f(rating.id, 'lte', 3)] },
      { filters: [f(rating.id, 'not_exists')] },
      { filters: [f(summary.id, 'contains', 'sum 1')] },
      { filters: [f(summary.id, 'exists')] },
      {
        ended: true,
        environmentID: 'development',
        startDate: new Date(start),
        filters: [f(score.id, 'gt', 1), f(resolved.id, 'exists'), f(topic.id, 'not_exists')],
      },
    ];
    const { provider: engine } = t.app.services.db;
    for (const criteria of criteriaList) {
      const label = JSON.stringify(criteria);
      const targets = await loadFilterTargets(prisma, p.projectID, criteria.filters ?? []);
      const prismaIds = (
        await prisma.transcript.findMany({
          where: buildTranscriptWhere(p.projectID, criteria, targets, engine),
          orderBy: transcriptOrderBy('DESC'),
          select: { id: true },
        })
      ).map((r) => r.id);
      const where = buildTranscriptWhereSql(p.projectID, criteria, targets, engine);
      const relations = { propertyValues: false, evaluationResults: false };
      const sqlIds = (
        await loadTranscriptPage(t.app.services.db, where, { order: 'DESC', skip: 0, take: 100, relations })
      ).map((r) => r.id);
      expect(sqlIds, label).toEqual(prismaIds);
      expect(await countTranscripts(t.app.services.db, where), label).toBe(prismaIds.length);
    }
    // Sanity: the list above is not a list of empty answers.
    const everything = buildTranscriptWhereSql(p.projectID, {}, new Map(), engine);
    expect(await countTranscripts(t.app.services.db, everything)).toBe(24);

    // The rows: what Prisma gives for the include of the search's selection, in both orders and with paging.
    const include = {
      propertyValues: {
        orderBy: [{ property: { createdAt: 'asc' as const } }, { propertyId: 'asc' as const }],
        include: { property: { select: { name: true, type: true } } },
      },
      evaluationResults: {
        orderBy: [{ evaluation: { createdAt: 'asc' as const } }, { evaluationId: 'asc' as const }],
        include: {
          evaluation: {
            select: { name: true, description: true, type: true, minimumValue: true, maximumValue: true },
          },
        },
      },
    };
    const relations = pageRelationsOf({ take: 10, skip: 3, include });
    expect(relations).toEqual({ propertyValues: true, evaluationResults: true, take: 10, skip: 3 });
    for (const order of ['DESC', 'ASC'] as const) {
      const expected = await prisma.transcript.findMany({
        where: { projectId: p.projectID },
        orderBy: transcriptOrderBy(order),
        take: 10,
        skip: 3,
        include,
      });
      const rows = await loadTranscriptPage(t.app.services.db, everything, {
        order,
        skip: 3,
        take: 10,
        relations: relations!,
      });
      expect(rows).toEqual(expected);
    }

    // Transcript.properties / .evaluations answer a page's row from the row itself. This context
    // holds no loader mapping, so plugin-prisma's relation wrapper would not answer the row (it
    // would load the relation again); a row Prisma loaded is still left to that wrapper.
    const fields = (schema.getType('Transcript') as GraphQLObjectType).getFields();
    const page = await loadTranscriptPage(t.app.services.db, everything, {
      order: 'DESC',
      skip: 0,
      take: 24,
      relations: relations!,
    });
    const row = page.find((r) => r.propertyValues?.length && r.evaluationResults?.length)!;
    expect(row).toBeDefined();
    const info = (fieldName: string) =>
      ({
        fieldName,
        parentType: schema.getType('Transcript'),
        path: { prev: undefined, key: fieldName, typename: 'Transcript' },
        fieldNodes: [],
      }) as unknown as GraphQLResolveInfo;
    expect(fields.properties!.resolve!(row, {}, {}, info('properties'))).toBe(row.propertyValues);
    expect(fields.evaluations!.resolve!(row, {}, {}, info('evaluations'))).toBe(row.evaluationResults);
    expect(page.every(isPageRow)).toBe(true);
    const prismaRows = await prisma.transcript.findMany({ where: { projectId: p.projectID }, include });
    expect(prismaRows.some(isPageRow)).toBe(false);
  });

  it('answers only the selections a page carries (anything else goes to Prisma)', () => {
    expect(pageRelationsOf({ take: 26, skip: 0 })).toEqual({
      propertyValues: false,
      evaluationResults: false,
      take: 26,
      skip: 0,
    });
    expect(pageRelationsOf({ take: 26, skip: 0, include: { propertyValues: true } })).toMatchObject({
      propertyValues: true,
    });
    // Feedback, a cursor, a backward page, a wider nested selection, another ordering.
    expect(pageRelationsOf({ take: 26, include: { feedback: true } })).toBeNull();
    expect(pageRelationsOf({ take: 26, skip: 1, cursor: { id: 'x' } })).toBeNull();
    expect(pageRelationsOf({ take: -26, skip: 0 })).toBeNull();
    expect(pageRelationsOf({ skip: 0 })).toBeNull();
    expect(
      pageRelationsOf({
        take: 5,
        include: { evaluationResults: { include: { evaluation: { select: { prompt: true } } } } },
      }),
    ).toBeNull();
    expect(pageRelationsOf({ take: 5, include: { propertyValues: { orderBy: [{ propertyId: 'desc' }] } } })).toBeNull();
    // The field's own ordering, in fresh objects, is a page's; the same members in another order are not.
    const valuesOrder = [{ property: { createdAt: 'asc' } }, { propertyId: 'asc' }];
    expect(pageRelationsOf({ take: 5, include: { propertyValues: { orderBy: valuesOrder } } })).toMatchObject({
      propertyValues: true,
    });
    expect(
      pageRelationsOf({ take: 5, include: { propertyValues: { orderBy: [...valuesOrder].reverse() } } }),
    ).toBeNull();
    expect(
      pageRelationsOf({ take: 5, include: { propertyValues: { orderBy: [{ property: { createdAt: 'desc' } }] } } }),
    ).toBeNull();
  });
});
