import { afterEach, beforeEach, expect, it, type MockInstance, vi } from 'vitest';
import { searchPlanning } from '../../src/graphql/schema/transcripts';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject, ingestTranscript } from './helpers';

// The planning of the search's Prisma query from its selection, counted (and still run).
let spy: MockInstance<typeof searchPlanning.queryFromInfo>;
beforeEach(() => {
  spy = vi.spyOn(searchPlanning, 'queryFromInfo');
});
afterEach(() => {
  spy.mockRestore();
});

/**
 * `Query.transcripts` plans the Prisma query of a document's selection once, not per request
 * (src/graphql/schema/transcripts.ts, `searchPlanOf`), when nothing beneath the field depends on
 * the request's variables; a selection with a variable or a directive beneath is planned per request.
 */
describeEachDatabase('transcript search plans', (provider) => {
  const t = useTestApp(provider, { env: { JOBS_ENABLED: 'false' } });

  it('plans a document once and answers each request, cursors and paging included', async () => {
    const p = await adminProject(t.app);
    const { prisma } = t.app.services.db;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await ingestTranscript(t.app, p, { userID: `user-${i}` }));
    const document = `query($p: ID!, $first: Int, $after: String) {
      transcripts(projectID: $p, first: $first, after: $after) {
        totalCount
        edges { cursor node { id userID properties { name value } evaluations { name } } }
        pageInfo { startCursor endCursor hasNextPage hasPreviousPage }
      }
    }`;
    const page = async (first: number, after?: string) => {
      const res = await t.app.gql(document, { p: p.projectID, first, after }, p.apiKey);
      expect(res.body.errors).toBeUndefined();
      return res.body.data.transcripts;
    };
    spy.mockClear();
    const first = await page(2);
    const again = await page(2);
    const three = await page(3);
    // One plan for the document, whatever the page size.
    expect(spy.mock.calls.length).toBe(1);
    expect(again).toEqual(first);
    const newest = (await page(5)).edges.map((e: { node: { id: string } }) => e.node.id);
    expect(newest.slice().sort()).toEqual(ids.slice().sort());
    expect(first.totalCount).toBe(5);
    expect(first.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(newest.slice(0, 2));
    expect(three.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(newest.slice(0, 3));
    expect(first.pageInfo).toEqual({
      startCursor: first.edges[0].cursor,
      endCursor: first.edges[1].cursor,
      hasNextPage: true,
      hasPreviousPage: false,
    });
    // The cursors page on (a cursor is not a page: Prisma, planned for the request).
    const next = await page(2, first.pageInfo.endCursor);
    expect(next.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(newest.slice(2, 4));
    expect(next.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const last = await page(2, next.pageInfo.endCursor);
    expect(last.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(newest.slice(4));
    expect(last.pageInfo).toMatchObject({ hasNextPage: false, endCursor: last.edges[0].cursor });
    expect(await prisma.transcript.count({ where: { projectId: p.projectID } })).toBe(5);
  });

  it('plans per request a selection with a variable or a directive beneath the field', async () => {
    const p = await adminProject(t.app);
    await ingestTranscript(t.app, p, { userID: 'u' });
    const document = `query($p: ID!, $props: Boolean!) {
      transcripts(projectID: $p) { edges { node { id properties @include(if: $props) { name } } } }
    }`;
    const node = async (props: boolean) => {
      const res = await t.app.gql(document, { p: p.projectID, props }, p.apiKey);
      expect(res.body.errors).toBeUndefined();
      return res.body.data.transcripts.edges[0].node;
    };
    spy.mockClear();
    expect(Object.keys(await node(true))).toEqual(['id', 'properties']);
    expect(Object.keys(await node(false))).toEqual(['id']);
    expect(Object.keys(await node(true))).toEqual(['id', 'properties']);
    expect(spy.mock.calls.length).toBe(3);
  });
});
