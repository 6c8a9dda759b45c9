import type { Db } from '../db/client';
import type { JobRunner, RecurringJob } from '../jobs/runner';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';
import { endIdleTranscripts, purgeExpiredOriginals } from './service';

/** The recurring job that deletes unredacted originals whose retention ended. */
export const TRANSCRIPT_RETENTION_QUEUE = 'transcript-retention';
/** The recurring job that ends the transcripts of runtime sessions idle past RUNTIME_SESSION_IDLE_MS. */
export const TRANSCRIPT_IDLE_QUEUE = 'transcript-idle-end';

export function transcriptRecurringJobs(opts: { purgeEveryMs: number; idleSweepEveryMs: number }): RecurringJob[] {
  return [
    { queue: TRANSCRIPT_RETENTION_QUEUE, everyMs: opts.purgeEveryMs },
    { queue: TRANSCRIPT_IDLE_QUEUE, everyMs: opts.idleSweepEveryMs },
  ];
}

/** Registers the job handlers of transcripts (the retention purge, the idle sweep) on an instance's runner. */
export function registerTranscriptJobs(
  jobs: JobRunner,
  deps: { db: Db; pubsub: AppPubSub; logger: Logger; sessionIdleMs: number },
): void {
  jobs.register(TRANSCRIPT_RETENTION_QUEUE, async () => {
    const purged = await purgeExpiredOriginals(deps.db);
    if (purged) deps.logger.info({ purged }, 'purged unredacted transcript logs past their retention');
  });
  jobs.register(TRANSCRIPT_IDLE_QUEUE, async () => {
    const ended = await endIdleTranscripts(deps, { idleMs: deps.sessionIdleMs });
    if (ended) deps.logger.info({ ended }, 'ended the transcripts of idle runtime sessions');
  });
}
