import type { Db } from '../db/client';
import type { JobRunner, RecurringJob } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import { purgeExpiredOriginals } from './service';

/** The recurring job that deletes unredacted originals whose retention ended. */
export const TRANSCRIPT_RETENTION_QUEUE = 'transcript-retention';

export function transcriptRecurringJobs(opts: { purgeEveryMs: number }): RecurringJob[] {
  return [{ queue: TRANSCRIPT_RETENTION_QUEUE, everyMs: opts.purgeEveryMs }];
}

/** Registers the job handlers of transcripts (the retention purge) on an instance's runner. */
export function registerTranscriptJobs(jobs: JobRunner, deps: { db: Db; logger: Logger }): void {
  jobs.register(TRANSCRIPT_RETENTION_QUEUE, async () => {
    const purged = await purgeExpiredOriginals(deps.db);
    if (purged) deps.logger.info({ purged }, 'purged unredacted transcript logs past their retention');
  });
}
