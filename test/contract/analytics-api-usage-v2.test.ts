import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { adminProject } from '../transcripts/helpers';
import { conforms, uncovered, uncoveredStatuses } from './harness';
import { notYetImplemented } from './pending';

/** analytics-api-usage-v2.json: `POST /v2/query/usage` for every query name, and its errors. */

const DOCUMENT = 'analytics-api-usage-v2.json';
const USAGE = 'POST /v2/query/usage';
const names = [
  'interactions',
  'top_intents',
  'unique_users',
  'credit_usage',
  'function_usage',
  'api_calls',
  'kb_documents',
  'integrations',
  'transcripts',
  'agent_usage',
];

describeEachDatabase(`${DOCUMENT} contract`, (provider) => {
  const t = useTestApp(provider);

  it('answers every query name in the documented shape; 400, and 401 for a foreign project, environment or no key', {
    timeout: 180_000,
  }, async () => {
    const p = await adminProject(t.app);
    const other = await adminProject(t.app);
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000).toISOString();
    const common = { projectID: p.projectID, environment: 'production', timestamp: hour, userID: 'u1' };
    const ingested = await t.app.http('POST', '/v1/usage/events', {
      key: t.app.operatorToken,
      body: {
        events: [
          { ...common, kind: 'interaction', type: 'text' },
          { ...common, kind: 'intent', name: 'order' },
          { ...common, kind: 'credit', type: 'llm-input', model: 'm', tokens: 10, diagramID: 'main', nodeID: 'n1' },
          { ...common, kind: 'function_call', functionID: 'f', name: 'F', success: true },
          { ...common, kind: 'api_call', apiToolID: 'a', name: 'A', success: false },
          { ...common, kind: 'kb_document', documentID: 'd' },
          { ...common, kind: 'integration_call', integrationToolName: 'zendesk', success: true },
          { ...common, kind: 'transcript' },
          { ...common, kind: 'agent_invocation', agentID: 'ag', name: 'Agent', success: true },
        ],
      },
    });
    expect(ingested.status, ingested.text).toBe(201);
    const query = (name: string, filter: Record<string, unknown>, key: string | null = p.apiKey) =>
      t.app.http('POST', '/v2/query/usage', { key: key ?? undefined, body: { data: { name, filter } } });
    for (const name of names) {
      const res = conforms(USAGE, await query(name, { projectID: p.projectID, platform: 'webchat' }), 200);
      if (name === 'top_intents') expect(res.result.intents).toEqual([{ name: 'order', count: 1 }]);
      else expect(res.result.items, name).toHaveLength(1);
    }
    // A page with a cursor, in the documented shape too.
    await query('interactions', { projectID: p.projectID });
    conforms(USAGE, await query('interactions', { projectID: p.projectID, limit: 1 }), 200);

    conforms(USAGE, await query('calls', { projectID: p.projectID }), 400);
    conforms(USAGE, await query('interactions', { projectID: p.projectID, limit: 0 }), 400);
    conforms(USAGE, await query('interactions', { projectID: other.projectID }), 401);
    conforms(
      USAGE,
      await query('interactions', { projectID: p.projectID, projectEnvironmentIDOrAlias: other.environments[0]!.id }),
      401,
    );
    const anonymous = conforms(USAGE, await query('calls', { limit: 'x' }, null), 401);
    expect(anonymous.details).toBeUndefined();
  });
});

it(`drives every documented route and status of ${DOCUMENT}`, () => {
  expect(uncovered(DOCUMENT, notYetImplemented)).toEqual([]);
  expect(uncoveredStatuses(DOCUMENT, notYetImplemented)).toEqual([]);
});
