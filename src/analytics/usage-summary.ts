import type { Db } from '../db/client';
import { usageTotals } from './aggregates';
import { queryUsage, rollupWhere } from './query';

/**
 * The v1 usage query of the original's analytics API (`POST /v1/query/usage`; docs/usage.md "The v1
 * usage query"): one total per query over a range and one or more projects, read from the same
 * counters as the v2 query. `top_slots` and `understood_messages` are not here: Parley's runtime
 * records neither slot fills nor not-understood turns, so the validation refuses them with a 400.
 */

export const usageSummaryNames = ['interactions', 'sessions', 'top_intents', 'unique_users', 'token_usage'] as const;
export type UsageSummaryName = (typeof usageSummaryNames)[number];

export interface UsageSummaryQuery {
  name: UsageSummaryName;
  /** The projects whose usage is summed (already checked against the key). */
  projectIds: string[];
  start: Date | null;
  end: Date | null;
  /** top_intents only: how many intents, after skipping `offset`. */
  limit: number;
  offset: number;
}

export interface UsageSummary {
  name: UsageSummaryName;
  count: number | null;
  intents: { name: string; count: number }[] | null;
  tokens: { model: string; count: number }[] | null;
}

const empty = { count: null, intents: null, tokens: null };

/** Totals of every environment of each project, summed over the projects. */
export async function usageSummary(db: Db, q: UsageSummaryQuery): Promise<UsageSummary> {
  const ranges = q.projectIds.map((projectId) => ({ projectId, start: q.start, end: q.end, environmentIds: null }));
  switch (q.name) {
    case 'interactions':
    case 'sessions':
    case 'unique_users': {
      // A session is a conversation, and Parley keeps one transcript per conversation session
      // (DECISIONS.md §5): sessions are the transcripts created in the range.
      const metric =
        q.name === 'interactions' ? 'interactions' : q.name === 'sessions' ? 'transcripts' : 'unique_users';
      let count = 0;
      for (const range of ranges) count += (await usageTotals(db, range))[metric].count;
      return { ...empty, name: q.name, count };
    }
    case 'top_intents': {
      const counts = new Map<string, number>();
      // One project: the database ranks and cuts. Several: every intent of each, summed, then ranked.
      const limit = ranges.length === 1 ? q.offset + q.limit : Number.MAX_SAFE_INTEGER;
      for (const range of ranges) {
        const result = await queryUsage(db, { ...range, name: 'top_intents', limit, cursor: null });
        if (result.name !== 'top_intents') throw new Error('top_intents answered another query');
        for (const i of result.intents) counts.set(i.name, (counts.get(i.name) ?? 0) + i.count);
      }
      const intents = [...counts]
        .map(([name, count]) => ({ name, count }))
        .sort((a, b) => b.count - a.count || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .slice(q.offset, q.offset + q.limit);
      return { ...empty, name: q.name, intents };
    }
    case 'token_usage': {
      const counts = new Map<string, number>();
      for (const range of ranges) {
        const rows = await db.prisma.usageRollup.groupBy({
          by: ['model'],
          where: { ...rollupWhere(range), metric: 'credit_usage' },
          _sum: { count: true },
        });
        for (const r of rows) counts.set(r.model, (counts.get(r.model) ?? 0) + Number(r._sum.count ?? 0));
      }
      const tokens = [...counts]
        .map(([model, count]) => ({ model, count }))
        .sort((a, b) => b.count - a.count || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
      return { ...empty, name: q.name, tokens };
    }
  }
}
