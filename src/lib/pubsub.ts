import { createRedisEventTarget } from '@graphql-yoga/redis-event-target';
import { createPubSub, type PubSub } from '@graphql-yoga/subscription';
import { Redis } from 'ioredis';

/** An entry of the admin audit log, as published to subscribers. */
export interface AuditEventPayload {
  id: string;
  workspaceId: string;
  actor: string;
  action: string;
  targetType: string;
  targetId: string;
  data: unknown;
  createdAt: string;
}

/** Hourly usage counters of one project that a write changed, with their new values. */
export interface UsageCountersPayload {
  projectId: string;
  counters: {
    /** The usage query name the counter belongs to. */
    metric: string;
    environmentId: string;
    /** Start of the UTC hour, ISO 8601. */
    period: string;
    count: number;
    successCount: number;
  }[];
}

/** Something new in a transcript: logs appended, or an evaluation result stored (IDs only). */
export interface TranscriptEventPayload {
  transcriptId: string;
  kind: 'logs' | 'result';
  /** For `logs`: the new logs, in order. */
  logIds?: string[];
  /** For `result`: the evaluation whose result changed. */
  evaluationId?: string;
}

/** A knowledge-base document's ingestion status changed. */
export interface KbDocumentEventPayload {
  documentId: string;
  revision: number;
  status: string;
}

/**
 * Every topic, with its routing ID and payload. Payloads are small JSON objects (IDs, not rows),
 * because with REDIS_URL set they travel between instances through Redis.
 */
export type Topics = {
  /** Audit events of one workspace. */
  auditEvent: [workspaceId: string, event: AuditEventPayload];
  /** Audit events of every workspace, for the operator. */
  auditEventAll: [event: AuditEventPayload];
  /** A job was enqueued: wakes the job runners of every instance. */
  jobEnqueued: [event: { queue: string }];
  /** Usage counters of one project as events are recorded (src/analytics/usage-event-writer.ts). */
  usageCounters: [projectId: string, update: UsageCountersPayload];
  /** New logs and evaluation results of one transcript. */
  transcriptEvent: [transcriptId: string, event: TranscriptEventPayload];
  /** A knowledge-base document was ingested (or failed): wakes `?wait=true` uploads on any instance. */
  kbDocument: [documentId: string, event: KbDocumentEventPayload];
  /** An environment now runs another agent version (publish, deploy): runtimes drop what they cached of it. */
  agentDeployed: [event: { projectId: string; environmentId: string }];
  /** A project's redaction patterns were replaced: instances drop the redactor they cached of it. */
  redactionPatternsChanged: [event: { projectId: string }];
  /** An API key was revoked or rotated: instances drop what they cached of it (src/auth/authenticate.ts). */
  apiKeyChanged: [event: { keyId: string }];
};

export type AppPubSub = PubSub<Topics>;

export interface PubSubHandle {
  pubsub: AppPubSub;
  close(): Promise<void>;
}

/** In-process events by default; through Redis when `redisUrl` is given, so instances share them. */
export function createAppPubSub(
  redisUrl?: string,
  opts: { prefix?: string; onError?: (err: Error) => void } = {},
): PubSubHandle {
  const { prefix = 'parley:', onError } = opts;
  if (!redisUrl) return { pubsub: createPubSub<Topics>(), close: async () => {} };
  const publishClient = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  // A SUBSCRIBE issued while ioredis 5 is still connecting races its handshake (INFO ready check,
  // CLIENT SETINFO): the connection enters subscriber mode, the handshake command is refused, and
  // later subscriptions are lost (ioredis#2037, fixed in ioredis 6, which the Redis event target
  // does not support yet). A subscriber connection has no use for either check: turn them off.
  const subscribeClient = new Redis(redisUrl, {
    maxRetriesPerRequest: 3,
    enableReadyCheck: false,
    disableClientInfo: true,
  });
  // ioredis reconnects by itself; without a listener an outage would be an unhandled 'error' event.
  for (const client of [publishClient, subscribeClient]) client.on('error', (err) => onError?.(err));
  // The event target fires subscribe/unsubscribe/publish without awaiting them: a command caught
  // by a closing or broken connection would be an unhandled rejection. Route those to onError.
  const report = (err: Error) => onError?.(err);
  // Channels carry `prefix`, so deployments (or test runs) sharing one Redis never see each
  // other's events.
  const guarded = (client: Redis) =>
    ({
      on: (event: string, listener: (channel: string, message: string) => void) =>
        client.on(event, (channel: string, message: string) => {
          if (channel.startsWith(prefix)) listener(channel.slice(prefix.length), message);
        }),
      subscribe: (channel: string) => client.subscribe(prefix + channel).catch(report),
      unsubscribe: (channel: string) => client.unsubscribe(prefix + channel).catch(report),
      publish: (channel: string, message: string) => client.publish(prefix + channel, message).catch(report),
    }) as unknown as Redis;
  const eventTarget = createRedisEventTarget({
    publishClient: guarded(publishClient),
    subscribeClient: guarded(subscribeClient),
  });
  return {
    pubsub: createPubSub<Topics>({ eventTarget }),
    close: async () => {
      // Subscriptions may still be unsubscribing as the instance stops: drop that connection
      // rather than queue commands behind QUIT.
      subscribeClient.disconnect();
      // What this instance published goes out before it stops (a CLI command's announcements: a
      // revoked key, audit events): QUIT is answered after the PUBLISH commands queued before it.
      // Bounded, so a Redis that is down does not hold the exit.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        publishClient.quit().catch(() => {}),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, 1000);
        }),
      ]);
      clearTimeout(timer);
      publishClient.disconnect();
    },
  };
}
