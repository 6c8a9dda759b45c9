import { expect, it } from 'vitest';
import { resolveEnvironment } from '../../src/admin/environments';
import {
  appendLogs,
  findOrCreateSessionTranscript,
  publishTranscriptLogs,
  recordSessionLogs,
} from '../../src/transcripts/service';
import { useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSubscription } from '../helpers/subscriptions';
import { adminProject, conversation, ingestTranscript, unredactedProject } from './helpers';

describeEachDatabase('the transcripts domain API (for the runtime)', (provider) => {
  const t = useTestApp(provider, { env: { JOB_POLL_MS: '50', TRANSCRIPT_PURGE_INTERVAL_MS: '1000' } });
  const deps = () => ({ db: t.app.services.db, pubsub: t.app.services.pubsub, retentionMs: 30 * 24 * 3600_000 });

  it('records turns of a session into one transcript, in order, also when turns race', async () => {
    const p = await t.app.createProject();
    const { id: environmentId } = await resolveEnvironment(t.app.services.db.prisma, p.projectID, 'development');
    const key = { projectId: p.projectID, environmentId, sessionId: 'runtime-session', userId: 'u' };
    const turns = await Promise.all(
      Array.from({ length: 6 }, (_, i) => recordSessionLogs(deps(), { ...key, logs: conversation(`turn ${i}`) })),
    );
    expect(new Set(turns.map((r) => r.transcriptId)).size).toBe(1);
    expect(turns.filter((r) => r.created)).toHaveLength(1);
    const logs = await t.app.services.db.prisma.transcriptLog.findMany({
      where: { transcriptId: turns[0]!.transcriptId },
      orderBy: { seq: 'asc' },
    });
    expect(logs.map((l) => l.seq)).toEqual(Array.from({ length: 18 }, (_, i) => i));
    // Each turn's three logs stay together, whatever order the turns committed in.
    for (const turn of turns) {
      const seqs = logs.filter((l) => turn.logIds.includes(l.id)).map((l) => l.seq);
      expect(seqs[2]! - seqs[0]!).toBe(2);
    }
  });

  it("works inside a caller's transaction: a rollback leaves no transcript and no logs", async () => {
    const p = await t.app.createProject();
    const db = t.app.services.db.prisma;
    const { id: environmentId } = await resolveEnvironment(db, p.projectID, null);
    await expect(
      db.$transaction(async (tx) => {
        const transcript = await findOrCreateSessionTranscript(tx, {
          projectId: p.projectID,
          environmentId,
          sessionId: 'rolled',
        });
        await appendLogs(tx, {
          transcriptId: transcript.id,
          projectId: p.projectID,
          logs: conversation('a@b.io'),
          retentionMs: 1000,
        });
        throw new Error('the turn failed after recording');
      }),
    ).rejects.toThrow('the turn failed');
    expect(await db.transcript.count({ where: { projectId: p.projectID } })).toBe(0);
    expect(await db.transcriptLog.count({ where: { transcript: { projectId: p.projectID } } })).toBe(0);
    expect(await db.transcriptLogOriginal.count({ where: { log: { transcript: { projectId: p.projectID } } } })).toBe(
      0,
    );

    const committed = await db.$transaction(async (tx) => {
      const transcript = await findOrCreateSessionTranscript(tx, {
        projectId: p.projectID,
        environmentId,
        sessionId: 'kept',
      });
      return appendLogs(tx, {
        transcriptId: transcript.id,
        projectId: p.projectID,
        logs: conversation('hi'),
        retentionMs: 1000,
      });
    });
    publishTranscriptLogs(t.app.services.pubsub, committed);
    expect(await db.transcriptLog.count({ where: { transcriptId: committed.transcriptId } })).toBe(3);
  });

  it('purges kept originals after the retention period with the recurring job', async () => {
    const p = await unredactedProject(t.app);
    const { id: environmentId } = await resolveEnvironment(t.app.services.db.prisma, p.projectID, null);
    const short = { ...deps(), retentionMs: 1 };
    const recorded = await recordSessionLogs(short, {
      projectId: p.projectID,
      environmentId,
      sessionId: 'retention',
      logs: conversation('my card is 4111 1111 1111 1111'),
    });
    const db = t.app.services.db.prisma;
    await expect
      .poll(() => db.transcriptLogOriginal.count({ where: { logId: { in: recorded.logIds } } }), { timeout: 15_000 })
      .toBe(0);
    const job = await db.job.findFirst({ where: { queue: 'transcript-retention', status: 'done' } });
    expect(job).not.toBeNull();
    // The redacted logs stay; unredacted=true now returns them.
    const got = await t.app.http('GET', `/v1/transcript/${recorded.transcriptId}`, {
      key: p.apiKey,
      query: { unredacted: 'true' },
    });
    expect(got.body.transcript.logs[0].data.payload).toBe('my card is [card]');
  });

  it("applies the project's redaction patterns, which only admin keys may set", async () => {
    const p = await adminProject(t.app);
    const set = (patterns: unknown, key = p.apiKey) =>
      t.app.http('PUT', `/v1/transcript-redaction/project/${p.projectID}`, { key, body: { patterns } });
    expect((await set(['ORDER-\\d+', '(?i)password:\\s*\\S+'])).body).toEqual({
      patterns: ['ORDER-\\d+', '(?i)password:\\s*\\S+'],
    });
    expect(
      (await t.app.http('GET', `/v1/transcript-redaction/project/${p.projectID}`, { key: p.apiKey })).body.patterns,
    ).toEqual(['ORDER-\\d+', '(?i)password:\\s*\\S+']);
    const id = await ingestTranscript(t.app, p, { logs: conversation('ORDER-991 Password: hunter2') });
    const got = await t.app.http('GET', `/v1/transcript/${id}`, { key: p.apiKey });
    expect(got.body.transcript.logs[0].data.payload).toBe('[redacted] [redacted]');
    const bad = await set(['ok', '(?<=x)y']);
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].path).toBe('patterns.1');
    expect((await set(Array(21).fill('a'))).status).toBe(400);
    expect((await set(['x'.repeat(501)])).status).toBe(400);
    const plain = await t.app.createProject();
    const denied = await t.app.http('PUT', `/v1/transcript-redaction/project/${plain.projectID}`, {
      key: plain.apiKey,
      body: { patterns: ['x'] },
    });
    expect(denied.status).toBe(401);
    expect((await set(['x'], plain.apiKey)).status).toBe(401);
  });

  it("streams a transcript's new logs and evaluation results to a GraphQL subscriber", async () => {
    const p = await adminProject(t.app);
    await t.app.http('POST', '/v1/transcript-evaluation', {
      key: p.apiKey,
      body: { projectID: p.projectID, name: 'topic', type: 'string', prompt: 'Topic?' },
    });
    const id = await ingestTranscript(t.app, p);
    type Event = {
      data?: {
        transcriptEvents: {
          kind: string;
          transcriptID: string;
          logs: { type: string; data: { payload?: unknown } }[];
          result: { name: string; status: string } | null;
        };
      };
    };
    const sub = recordSubscription<Event>(t.app, {
      query: `subscription($id: ID!) { transcriptEvents(transcriptID: $id) {
        kind transcriptID logs { type data } result { name status }
      } }`,
      variables: { id },
      key: p.apiKey,
    });
    try {
      let n = 0;
      await sub.prime(() =>
        t.app.http('POST', `/v1/transcript/${id}/logs`, {
          key: p.apiKey,
          body: { logs: conversation(`probe ${n++}`) },
        }),
      );
      await t.app.http('POST', `/v1/transcript/${id}/logs`, {
        key: p.apiKey,
        body: { logs: conversation('mail me: z@z.io') },
      });
      await sub.waitFor((events) =>
        events.some((e) => e.data?.transcriptEvents.logs.some((l) => l.data?.payload === 'mail me: [email]')),
      );
      await t.app.http('POST', `/v1/transcript/${id}/project/${p.projectID}/end`, { key: p.apiKey });
      const events = await sub.waitFor((all) => all.some((e) => e.data?.transcriptEvents.kind === 'result'));
      expect(events.find((e) => e.data?.transcriptEvents.kind === 'result')!.data!.transcriptEvents).toEqual({
        kind: 'result',
        transcriptID: id,
        logs: [],
        result: { name: 'topic', status: 'skipped' },
      });
    } finally {
      sub.close();
    }
    // Another project's key cannot follow it.
    const other = await t.app.createProject();
    const res = await fetch(`${t.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: other.apiKey, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription($id: ID!) { transcriptEvents(transcriptID: $id) { kind } }',
        variables: { id },
      }),
    });
    const text = await res.text();
    expect(text).toContain('NOT_FOUND');
  });
});
