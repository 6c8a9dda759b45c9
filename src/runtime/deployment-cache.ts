import { resolveEnvironment } from '../admin/environments';
import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import type { AppPubSub } from '../lib/pubsub';

/**
 * Which environment a turn's reference names, and which agent version it runs, without a query
 * per turn (docs/performance.md "Turn path").
 *
 * - Environments are never renamed or deleted (src/admin: created only), so a reference, once
 *   resolved, always names the same environment: kept until evicted. A reference that names none
 *   is not kept (the environment may be created later).
 * - The deployed version changes on publish and deploy (src/runtime/agents.ts). Those announce it
 *   on the `agentDeployed` topic, in-process or through Redis to every instance, and the instance
 *   that made the change forgets its entry at once. An entry is also re-read once it is older than
 *   `ttlMs`, so an announcement lost on the way (Redis down) leaves an instance behind by that long
 *   at most. A read that started before a change is not kept.
 */

export interface Deployment {
  environment: { id: string; alias: string; projectId: string };
  /** The deployed agent version, or null when none was published to the environment. */
  agentVersionId: string | null;
}

export interface DeploymentCache {
  /** The environment `ref` names in the project (ID, alias, or the default) and its deployed version; 404s as resolveEnvironment. */
  get(projectId: string, ref: string): Promise<Deployment>;
  /** Drops what is known of the environment's deployment (this instance changed it). */
  forget(environmentId: string): void;
  close(): void;
}

const maxEntries = 5000;

export function createDeploymentCache(
  db: Db,
  pubsub: AppPubSub,
  opts: { ttlMs: number; logger: Logger },
): DeploymentCache {
  const environments = new Map<string, Deployment['environment']>();
  const deployments = new Map<string, { agentVersionId: string | null; readAt: number }>();
  /** Bumped by every change: a read that began before one is not kept. */
  let generation = 0;
  let closed = false;

  const remember = <K, V>(map: Map<K, V>, key: K, value: V) => {
    if (map.size >= maxEntries && !map.has(key)) map.delete(map.keys().next().value as K);
    map.set(key, value);
  };
  const forget = (environmentId: string) => {
    generation++;
    deployments.delete(environmentId);
  };

  const iterator = pubsub.subscribe('agentDeployed')[Symbol.asyncIterator]();
  void (async () => {
    try {
      for (;;) {
        const next = await iterator.next();
        if (next.done || closed) return;
        forget(next.value.environmentId);
      }
    } catch (err) {
      opts.logger.warn(
        { err, component: 'runtime' },
        'the agentDeployed subscription ended; deployments are re-read by age only',
      );
    }
  })();

  return {
    async get(projectId, ref) {
      const key = `${projectId}\u0000${ref}`;
      const environment = environments.get(key);
      const deployment = environment ? deployments.get(environment.id) : undefined;
      if (environment && deployment && Date.now() - deployment.readAt < opts.ttlMs) {
        return { environment, agentVersionId: deployment.agentVersionId };
      }
      const startedAt = generation;
      const readAt = Date.now();
      const found = await resolveEnvironment(db.prisma, projectId, ref, {
        agentDeployment: { select: { agentVersionId: true } },
      });
      const env = { id: found.id, alias: found.alias, projectId: found.projectId };
      const agentVersionId = found.agentDeployment?.agentVersionId ?? null;
      remember(environments, key, env);
      if (generation === startedAt) remember(deployments, env.id, { agentVersionId, readAt });
      return { environment: env, agentVersionId };
    },
    forget,
    close() {
      closed = true;
      void iterator.return?.();
    },
  };
}
