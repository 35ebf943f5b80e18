// Wires the RunnerTarget controller into the manager: the informer on
// RunnerTargets, the provider clients made from their Secrets, the check
// leases in the controller's namespace, metrics, and the work queue.
import { RUNNERTARGET_RESOURCE, type RunnerTarget } from '../../src/api/index.js';
import { isNotFound } from '../../src/kube/client.js';
import type { Manager } from '../../src/kube/manager.js';
import type { ControllerOptions } from '../../src/kube/registration.js';
import { objectKey, resourcePath } from '../../src/kube/resource.js';
import { secretDataReader } from '../../src/kube/secrets.js';
import type { AccessTokens } from '../../src/providers/gce/auth.js';
import { CheckLeases } from './checkrun/checklease.js';
import { RunnerTargetMetrics } from './metrics.js';
import type { TargetEndpointPolicy } from './policy/endpoints.js';
import { TargetProviders } from './checkrun/providers.js';
import type { PlanSettings } from './policy/plan.js';
import { RunnerTargetReconciler, type FinishedEffect } from './reconciler.js';
import type { WorkQueue } from '../../src/kube/workqueue.js';
import { TargetKeys } from './targetkey.js';
import { RUNNER_HOSTS_FINALIZER } from './policy/teardown.js';
import type { Server } from 'node:http';
import { startWebhookServer } from './webhook/server.js';
import { WebhookSecrets } from './webhook/secrets.js';

/** The check leases and each target's SSH key Secret live in controllerNamespace. */
export interface RunnerTargetControllerOptions extends ControllerOptions {
  identity: string;
  /** The endpoints an admin allowed the targets' GitHub and Compute Engine credentials to go to. */
  endpoints: TargetEndpointPolicy;
  settings?: Partial<PlanSettings>;
  /** Checks running at once across every target (--runner-check-concurrency); each runs off the reconcile workers. */
  checkConcurrency?: number;
  /** The login user and SSH port of hosts (default leasehold, 22); tests reach emulated hosts elsewhere. */
  hostSSH?: { user?: string | undefined; port?: number | undefined };
  /** The controller's own Compute Engine identity and the endpoint its tokens may go to, for targets without spec.gce.credentialsSecretRef (--runner-gce-own-identity); absent: they are refused. */
  gceOwnIdentity?: { tokens: AccessTokens; endpoint: string } | undefined;
  /** How soon a check follows an open launch (LAUNCH_FOLLOW_UP_MS), and the check lease's duration (30 s). */
  followUpMs?: number;
  checkLeaseMs?: number;
  /** checkInterval times this (--runner-check-interval-scale); below 1 only for tests. */
  checkIntervalScale?: number;
}

/** The Unix user the controller's key logs in as on a host (Compute Engine's guest agent makes it from the ssh-keys metadata). */
export const HOST_SSH_USER = 'leasehold';

export function registerRunnerTargetController(mgr: Manager, opts: RunnerTargetControllerOptions): RunnerTargetReconciler {
  const targets = mgr.informer<RunnerTarget>(resourcePath(RUNNERTARGET_RESOURCE, mgr.watchNamespace));
  const { group, version, plural } = RUNNERTARGET_RESOURCE;
  const keys = new TargetKeys(mgr.core, opts.controllerNamespace);
  let queue: WorkQueue | undefined;
  const reconciler = new RunnerTargetReconciler({
    targets,
    read: async (namespace, name) => {
      try {
        return (await mgr.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as RunnerTarget;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    status: mgr.status,
    events: mgr.events,
    providers: new TargetProviders({
      secrets: secretDataReader(mgr.core),
      endpoints: opts.endpoints,
      ownIdentity: opts.gceOwnIdentity,
      onResult: (provider, operation, code) => mgr.metrics.providerRequests.inc({ provider, operation, code }),
    }),
    leases: new CheckLeases({ api: mgr.coordination, namespace: opts.controllerNamespace, identity: opts.identity, ...(opts.checkLeaseMs ? { durationMs: opts.checkLeaseMs } : {}) }),
    identity: opts.identity,
    installationID: opts.installationID,
    hostAccess: async (t) => ({ ...(await keys.key(t.metadata!.uid!)), user: opts.hostSSH?.user ?? HOST_SSH_USER, port: opts.hostSSH?.port ?? 22 }),
    removeHostKey: (t) => keys.remove(t.metadata!.uid!),
    ...(opts.settings ? { settings: opts.settings } : {}),
    ...(opts.followUpMs ? { followUpMs: opts.followUpMs } : {}),
    ...(opts.checkIntervalScale ? { checkIntervalScale: opts.checkIntervalScale } : {}),
    checks: { effects: mgr.effects<FinishedEffect>('runnertarget'), concurrency: opts.checkConcurrency ?? 4, requeue: (key) => queue?.add(key) },
    metrics: new RunnerTargetMetrics(mgr.metrics.registry, () => targets.list()),
    log: mgr.log.child({ controller: 'runnertarget' }),
    finalizers: {
      add: (t) => mgr.finalizers.add(RUNNERTARGET_RESOURCE, t, RUNNER_HOSTS_FINALIZER),
      remove: (t) => mgr.finalizers.remove(RUNNERTARGET_RESOURCE, t, RUNNER_HOSTS_FINALIZER),
    },
  });
  const q = (queue = mgr.add({ name: 'runnertarget', concurrency: opts.concurrency, reconcile: (k) => reconciler.reconcile(k) }));
  const enqueue = (t: RunnerTarget) => q.add(objectKey(t));
  targets.on('add', enqueue).on('update', enqueue).on('delete', enqueue);
  return reconciler;
}

/**
 * The GitHub webhook server (--github-webhook-port): signed workflow_job
 * deliveries make the matching targets' checks happen now. Started with
 * the process, leader or not, so that a follower answers 503 rather than
 * refusing the connection; the leader answers once its caches are synced.
 */
export function serveRunnerTargetWebhooks(mgr: Manager, reconciler: RunnerTargetReconciler, opts: { port: number; host?: string }): Promise<Server> {
  const targets = mgr.informer<RunnerTarget>(resourcePath(RUNNERTARGET_RESOURCE, mgr.watchNamespace));
  const log = mgr.log.child({ component: 'github-webhook' });
  const secrets = new WebhookSecrets(secretDataReader(mgr.core), { log });
  return startWebhookServer({
    port: opts.port,
    host: opts.host,
    registry: mgr.metrics.registry,
    leader: () => mgr.isLeader() && mgr.synced(),
    targets: () => targets.list(),
    secret: (t) => secrets.secret(t),
    requestCheck: (key) => reconciler.requestCheck(key),
    log,
  });
}
