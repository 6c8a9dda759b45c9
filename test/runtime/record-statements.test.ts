import { expect, it } from 'vitest';
import type { DriverEvent, QueryEvent } from '../../src/db/client';
import { newId } from '../../src/lib/ids';
import { createLogger } from '../../src/lib/logger';
import { enqueueTurnRecord, TURN_RECORD_QUEUE } from '../../src/runtime/turn-outbox';
import type { TurnRecord, TurnRecorder } from '../../src/runtime/turn-record';
import { createTurnRecordBatcher } from '../../src/runtime/turn-record-batcher';
import { setRedactionPatterns } from '../../src/transcripts/service';
import { type TestProject, useTestApp } from '../helpers/app';
import { describeEachDatabase } from '../helpers/lanes';
import { recordSqlStatements } from '../helpers/sql-statements';

/**
 * The record batch of the runtime's turns (src/runtime/turn-record-batcher.ts,
 * src/transcripts/turn-record-sql.ts) runs as driver statements in one transaction, on both
 * engines: no Prisma operation, no statement per turn, one commit per batch; and what it stores
 * is what Prisma's own path (`TurnRecorder.record`) stores for the same turn, so Prisma reads it
 * back unchanged.
 */

describeEachDatabase('the record batch on the driver', (provider) => {
  const captured: { recorder: TurnRecorder | null } = { recorder: null };
  const t = useTestApp(provider, {
    // No job runner: the statements recorded are the batches' alone.
    env: { JOBS_ENABLED: 'false' },
    // The app's own recorder (logging, transcripts, usage), kept to drive a batcher directly.
    services: {
      turnRecorder: (base) => {
        captured.recorder = base;
        return base;
      },
    },
  });
  const logger = createLogger('silent');

  let seq = 0;
  /** A finished turn of `sessionID`: an action, a trace with an e-mail address (redacted), one intent. */
  function turn(p: TestProject, sessionID: string, opts: { ended?: boolean; time?: number } = {}): TurnRecord {
    const time = opts.time ?? Date.UTC(2026, 10, 25, 9, 0, seq++);
    return {
      turnID: newId(),
      projectID: p.projectID,
      environmentID: p.environments[0]!.id,
      environmentAlias: p.environments[0]!.alias,
      userID: `user-${sessionID}`,
      sessionID,
      sessionStarted: false,
      agent: { agentID: 'agent-1', name: 'Greeter', versionID: 'version-1', versionNumber: 1 },
      action: { type: 'text', payload: 'my code is secret-123' } as TurnRecord['action'],
      interactionType: 'text',
      requestVariables: null,
      traces: [
        { type: 'text', payload: { message: 'Write to ann@example.com' }, time },
        { type: 'debug', payload: { message: 'plain' }, time: time + 1 },
      ],
      intents: [{ name: 'greet', confidence: 0.9, source: 'nlu' }],
      apiCalls: [],
      functionCalls: [],
      outcome: 'completed',
      success: true,
      error: null,
      stateSaved: true,
      conversationEnded: opts.ended ?? false,
      clientDisconnected: false,
      stepsRun: 2,
      startedAt: new Date(time - 5),
      finishedAt: new Date(time + 2),
    };
  }

  async function setup(): Promise<TestProject> {
    const p = await t.app.createProject();
    const { db, pubsub } = t.app.services;
    await setRedactionPatterns({ db, pubsub }, { projectId: p.projectID, patterns: ['secret-\\d+'] });
    await db.prisma.evaluation.create({
      data: {
        id: newId(),
        projectId: p.projectID,
        name: 'resolved',
        type: 'boolean',
        prompt: 'Resolved?',
        settings: {},
      },
    });
    return p;
  }

  /** A transcript's rows (transcript, logs, originals, evaluation results, evaluation jobs) as stored, read without Prisma. */
  async function storedRows(transcriptId: string) {
    const { db } = t.app.services;
    const q = (sql: string) =>
      db.queryRows(provider === 'postgresql' ? sql.replace(/\?/g, () => '$1') : sql, [transcriptId]);
    return {
      transcript: await q(`SELECT * FROM "Transcript" WHERE "id" = ?`),
      logs: await q(`SELECT * FROM "TranscriptLog" WHERE "transcriptId" = ? ORDER BY "seq"`),
      originals: await q(
        `SELECT o.* FROM "TranscriptLogOriginal" o JOIN "TranscriptLog" l ON l."id" = o."logId" WHERE l."transcriptId" = ? ORDER BY l."seq"`,
      ),
      results: await q(`SELECT * FROM "EvaluationResult" WHERE "transcriptId" = ?`),
      jobs: await q(
        provider === 'postgresql'
          ? `SELECT * FROM "Job" WHERE "queue" = 'evaluation' AND "payload" ->> 'transcriptId' = ?`
          : `SELECT * FROM "Job" WHERE "queue" = 'evaluation' AND json_extract("payload", '$.transcriptId') = ?`,
      ),
    };
  }

  /**
   * A stored row with what must differ between two recordings of the same turn made apart (IDs,
   * the moment of writing) reduced to its form: an ID to "id", every digit of a timestamp to 0.
   */
  function form(rows: Record<string, unknown>[]): unknown[] {
    const shape = (key: string, value: unknown): unknown => {
      if (value instanceof Date) return `Date:${value.toISOString().replace(/\d/g, '0')}`;
      if (typeof value === 'string' && /^[0-9a-f]{24}$/.test(value)) return 'id';
      if (['sessionId', 'userId', 'dedupeKey'].includes(key)) return key;
      if (typeof value === 'string' && /^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d/.test(value)) {
        // SQLite's text exactly; PostgreSQL's adapter prints a timestamp's fraction without its trailing zeros.
        return (provider === 'postgresql' ? value.replace(/\.\d+/, '.f') : value).replace(/\d/g, '0');
      }
      if (key === 'payload' && typeof value === 'string') return shape(key, JSON.parse(value));
      if (key === 'payload' && value && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === 'string' ? 'id' : v]));
      }
      return value;
    };
    return rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, shape(k, v)])));
  }

  it('records a batch with no Prisma operation, no statement per turn and one commit, as Prisma would store it', async () => {
    const p = await setup();
    const { db } = t.app.services;
    const recorder = captured.recorder!;
    const batcher = createTurnRecordBatcher({ db, recorder, logger });

    // Session "a" gets three turns, "b" two, the last of which ends the conversation.
    const turns = [turn(p, 'a'), turn(p, 'a'), turn(p, 'b'), turn(p, 'a'), turn(p, 'b', { ended: true })];
    // Each turn's outbox entry, written before it is handed to the batcher (as its state commit does).
    // One after another, as a user's turns are (the batch keeps the entries' order).
    const enqueued = async (list: TurnRecord[]) => {
      const ids: string[] = [];
      for (const r of list) ids.push(await enqueueTurnRecord(db.prisma, r));
      return ids;
    };

    const prismaOps: QueryEvent[] = [];
    const driverCalls: DriverEvent[] = [];
    const onQuery = (e: QueryEvent) => {
      if (!e.background) prismaOps.push(e);
    };
    const onDriver = (e: DriverEvent) => driverCalls.push(e);
    /** Runs `fn` recording its Prisma operations, driver calls and SQL statements. */
    const measured = async (fn: () => Promise<unknown>): Promise<string[]> => {
      db.queryListeners.add(onQuery);
      db.driverListeners.add(onDriver);
      try {
        return await recordSqlStatements(async () => {
          await fn();
        });
      } finally {
        db.queryListeners.delete(onQuery);
        db.driverListeners.delete(onDriver);
      }
    };
    // The first turn alone; then four that finish in one pass of the event loop share a batch.
    const [firstJob] = await enqueued(turns.slice(0, 1));
    const statements = await measured(() => batcher.record(turns[0]!, firstJob!));
    const rest = await enqueued(turns.slice(1));
    statements.push(...(await measured(() => Promise.all(turns.slice(1).map((r, i) => batcher.record(r, rest[i]!))))));

    expect(prismaOps.map((e) => `${e.model}.${e.operation}`)).toEqual([]);
    expect(driverCalls.map((e) => [e.label, e.commits])).toEqual([
      ['turn.record', 1],
      ['turn.record', 1],
    ]);
    // Both batches' statements, BEGIN and COMMIT aside, as the drivers saw them (no job runner).
    const [first, second] = driverCalls.map((e) => e.statements) as [number, number];
    const sent = statements.filter((s) => !/^(BEGIN|COMMIT|ROLLBACK)/.test(s.trim()));
    expect(sent).toHaveLength(first + second);
    // The second batch (four turns of two sessions, a new transcript, an end with its evaluation)
    // runs each statement once, whatever the number of turns: the outbox read, the logs already
    // there, the transcripts, the logs, the originals, the end (update, evaluations, result, job),
    // the outbox delete, the usage write (events, hour users, rollups, day intents, hour totals).
    const batch = sent.slice(first);
    expect(new Set(batch).size).toBe(batch.length);
    // The first batch (one turn) read the project's redaction patterns. The second takes them from
    // the cache, unless the cache dropped them in between: it keeps them 5 s, and on the Redis lane
    // the announcement of setRedactionPatterns can arrive after the first read. Either way the read
    // is one statement per batch, never one per turn; it is counted apart so the figures do not
    // depend on that timing.
    const readsPatterns = (s: string) => /FROM "TranscriptRedactionPattern"/.test(s);
    expect(sent.slice(0, first).filter(readsPatterns)).toHaveLength(1);
    expect(batch.filter(readsPatterns).length).toBeLessThanOrEqual(1);
    expect(first).toBe(12);
    expect(second - batch.filter(readsPatterns).length).toBe(15);

    // Everything is there, in order, once.
    const transcripts = await db.prisma.transcript.findMany({
      where: { projectId: p.projectID },
      orderBy: { sessionId: 'asc' },
      include: { logs: { orderBy: { seq: 'asc' }, include: { original: true } } },
    });
    expect(transcripts.map((tr) => [tr.sessionId, tr.logCount, tr.endedAt !== null, tr.endsWhenIdle])).toEqual([
      ['a', 9, false, true],
      ['b', 7, true, true],
    ]);
    const a = transcripts[0]!;
    expect(a.logs.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(a.logs.filter((l) => l.type === 'action').map((l) => l.id)).toEqual(
      [turns[0], turns[1], turns[3]].map((r) => r!.turnID),
    );
    expect(a.logs[0]!.data).toEqual({ type: 'text', payload: 'my code is [redacted]' });
    expect(a.logs[1]!.data).toMatchObject({ type: 'text', payload: { message: 'Write to [email]' } });
    expect(a.logs[1]!.traceType).toBe('text');
    expect(a.logs[1]!.original?.data).toMatchObject({ payload: { message: 'Write to ann@example.com' } });
    expect(a.logs[2]!.original).toBeNull();
    expect(transcripts[1]!.logs.at(-1)).toMatchObject({ type: 'end', data: null });
    const counted = await db.prisma.usageEvent.groupBy({
      by: ['kind'],
      where: { projectId: p.projectID },
      _count: true,
      orderBy: { kind: 'asc' },
    });
    expect(counted.map((c) => [c.kind, c._count])).toEqual([
      ['agent_invocation', 5],
      ['intent', 5],
      ['interaction', 5],
      ['transcript', 2],
    ]);
    expect(await db.prisma.job.count({ where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID } })).toBe(0);
    expect(await db.prisma.evaluationResult.count({ where: { transcriptId: transcripts[1]!.id } })).toBe(1);

    // Recorded again (a second outbox entry of the same turn): nothing more is written.
    const again = await enqueueTurnRecord(db.prisma, turns[3]!);
    await batcher.record(turns[3]!, again);
    expect(await db.prisma.transcriptLog.count({ where: { transcriptId: a.id } })).toBe(9);
    expect(await db.prisma.usageEvent.count({ where: { projectId: p.projectID } })).toBe(17);
    expect(await db.prisma.job.count({ where: { queue: TURN_RECORD_QUEUE, projectId: p.projectID } })).toBe(0);

    // The same two turns of session "b" recorded through Prisma's path (`record`) as session "c":
    // row for row, the same values in the same form.
    const sameTime = (r: TurnRecord, ended: boolean) => ({
      ...turn(p, 'c', { ended, time: r.traces[0]!.time! }),
    });
    await recorder.record(sameTime(turns[2]!, false));
    await recorder.record(sameTime(turns[4]!, true));
    const c = await db.prisma.transcript.findFirstOrThrow({ where: { projectId: p.projectID, sessionId: 'c' } });
    const viaDriver = await storedRows(transcripts[1]!.id);
    const viaPrisma = await storedRows(c.id);
    expect(viaDriver.logs).toHaveLength(7);
    expect(viaDriver.results).toHaveLength(1);
    expect(viaDriver.jobs).toHaveLength(1);
    expect(form(viaDriver.transcript)).toEqual(form(viaPrisma.transcript));
    expect(form(viaDriver.logs)).toEqual(form(viaPrisma.logs));
    expect(form(viaDriver.originals)).toEqual(form(viaPrisma.originals));
    expect(form(viaDriver.results)).toEqual(form(viaPrisma.results));
    expect(form(viaDriver.jobs)).toEqual(form(viaPrisma.jobs));
  });
});
