import { expect, it } from 'vitest';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { publish, v2StreamPath } from '../helpers/runtime';
import { conforms, uncovered, uncoveredStatuses } from './harness';
import { exercisedElsewhere, notYetImplemented } from './pending';

/**
 * voiceflow-dialog-management-api.json: the v2 stream route and its documented 400, 401, 404 and 429.
 * The state routes of the same document are checked by test/rest/dialog-manager.test.ts against a
 * copy with its corrections (test/fixtures/dialog-manager-api.schemas.json).
 */

const DOCUMENT = 'voiceflow-dialog-management-api.json';
const STREAM = 'POST /v2/project/{projectID}/user/{userID}/interact/stream';

const hello = {
  name: 'Hello',
  startFlow: 'main',
  flows: [{ id: 'main', name: 'Main', start: 'hi', steps: [{ id: 'hi', type: 'message', message: 'Hi!' }] }],
};

describeEachDatabase(`${DOCUMENT} stream contract`, (provider) => {
  // Eight runtime requests a minute, so the documented 429 is reached within the test.
  const t = useTestApp(provider, { env: { RATE_LIMIT_RUNTIME: '8/60' } });

  it('streams, and answers 400, 401, 404 and 429 as documented', { timeout: 180_000 }, async () => {
    const p = await t.app.createProject();
    const other = await t.app.createProject();
    await publish(t.app, p.projectID, hello);
    const post = (path: string, opts: { key?: string; body?: unknown; query?: Record<string, string> } = {}) =>
      t.app.http('POST', path, {
        key: opts.key ?? p.apiKey,
        body: opts.body ?? { action: { type: 'launch' } },
        query: opts.query,
      });

    const streamed = await post(v2StreamPath(p.projectID, 'ann'));
    conforms(STREAM, streamed, 200);
    expect(streamed.text).toContain('event: end');
    conforms(STREAM, await post(v2StreamPath(p.projectID, 'ann'), { body: { action: { type: 42 } } }), 400);
    conforms(STREAM, await post(v2StreamPath(p.projectID, 'ann'), { key: 'ak.nope' }), 401);
    conforms(STREAM, await post(v2StreamPath(p.projectID, 'ann'), { key: other.apiKey }), 404);
    let limited = null;
    for (let i = 0; i < 12 && !limited; i++) {
      const res = await post(v2StreamPath(p.projectID, 'bo'));
      if (res.status === 429) limited = res;
    }
    expect(limited, 'the runtime rate limit was never reached').not.toBeNull();
    conforms(STREAM, limited!, 429);
    expect(limited!.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});

it(`drives every documented route and status of ${DOCUMENT} (the state routes in ${exercisedElsewhere['GET /state/user/{userID}']})`, () => {
  const elsewhere = { ...notYetImplemented, ...exercisedElsewhere };
  expect(uncovered(DOCUMENT, elsewhere)).toEqual([]);
  expect(uncoveredStatuses(DOCUMENT, elsewhere)).toEqual([]);
});
