import { type BulkRow, bulkInsert } from '../db/bulk-insert';
import type { Provider } from '../db/schema-source';
import type { PrismaTx } from '../db/transaction';
import { newId } from '../lib/ids';
import type { Redactor } from './redaction';
import { type LogInput, traceTypeOf } from './validation';

/**
 * Many finished or running conversations written at once, with their own times (the demo data,
 * src/demo/): a few `createMany` statements per batch instead of a transaction per transcript.
 * Logs are redacted as `appendLogs` does; a redacted log's original is kept until its own time
 * plus the retention period (what it would have been had it been recorded then); originals already
 * past that are not stored, as the purge job would have deleted them.
 */

export interface ImportedTranscript {
  id?: string;
  environmentId: string;
  sessionId: string;
  userId: string | null;
  createdAt: Date;
  endedAt: Date | null;
  /** In order; each with its `createdAt`. */
  logs: readonly (LogInput & { createdAt: Date })[];
}

const transcriptColumns = {
  id: 'text',
  projectId: 'text',
  environmentId: 'text',
  sessionId: 'text',
  userId: 'text',
  logCount: 'int',
  createdAt: 'timestamp',
  updatedAt: 'timestamp',
  endedAt: 'timestamp',
} as const;
const logColumns = {
  id: 'text',
  transcriptId: 'text',
  seq: 'int',
  type: 'text',
  traceType: 'text',
  data: 'json',
  createdAt: 'timestamp',
  updatedAt: 'timestamp',
} as const;
const originalColumns = { logId: 'text', data: 'json', expiresAt: 'timestamp' } as const;

export async function insertTranscripts(
  tx: PrismaTx,
  provider: Provider,
  input: {
    projectId: string;
    transcripts: readonly ImportedTranscript[];
    redactor: Redactor;
    retentionMs: number;
    /** Originals whose retention ended before this time are not stored (default now). */
    now?: Date;
  },
): Promise<{ ids: string[]; logs: number }> {
  const transcriptRows: (BulkRow & { id: string })[] = [];
  const logRows: BulkRow[] = [];
  const originals: BulkRow[] = [];
  const now = (input.now ?? new Date()).getTime();
  for (const t of input.transcripts) {
    const id = t.id ?? newId(t.createdAt.getTime());
    const lastLogAt = t.logs.reduce((max, l) => Math.max(max, l.createdAt.getTime()), t.createdAt.getTime());
    const updatedAt = new Date(Math.max(lastLogAt, t.endedAt?.getTime() ?? 0));
    transcriptRows.push({
      id,
      projectId: input.projectId,
      environmentId: t.environmentId,
      sessionId: t.sessionId,
      userId: t.userId,
      logCount: t.logs.length,
      createdAt: t.createdAt,
      updatedAt,
      endedAt: t.endedAt,
    });
    t.logs.forEach((log, seq) => {
      const logId = log.id ?? newId(log.createdAt.getTime());
      const redacted = input.redactor.json(log.data ?? null);
      const traceType = traceTypeOf(log);
      logRows.push({
        id: logId,
        transcriptId: id,
        seq,
        type: log.type,
        traceType,
        data: redacted.value,
        createdAt: log.createdAt,
        updatedAt: log.createdAt,
      });
      const expiresAt = log.createdAt.getTime() + input.retentionMs;
      if (redacted.changed && expiresAt > now) {
        originals.push({ logId, data: log.data ?? null, expiresAt: new Date(expiresAt) });
      }
    });
  }
  await bulkInsert(tx, provider, 'Transcript', transcriptColumns, transcriptRows);
  await bulkInsert(tx, provider, 'TranscriptLog', logColumns, logRows);
  await bulkInsert(tx, provider, 'TranscriptLogOriginal', originalColumns, originals);
  return { ids: transcriptRows.map((r) => r.id), logs: logRows.length };
}
