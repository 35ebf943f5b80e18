// The manager owns what every controller shares: API clients, informers,
// work queues, the leader election, events, metrics and the health port.
// Informers run on every replica (a follower has a warm cache when it takes
// over); only the leader runs reconcile workers.
import type { BatchV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { ReconcileResult } from './cache.js';
import { clusterClients, type ClusterClients } from './clients.js';
import { EffectRunner } from './effects.js';
import { EventRecorder, KubeEventSink } from './events.js';
import { Finalizers } from './finalizers.js';
import { serveHealth } from './health.js';
import { ResilientInformer, type InformerOptions } from './informer.js';
import { LeaderElector } from './leaderelection.js';
import { KubePodLabelClient, LeaderPodLabel, type PodLabelClient, type PodRef } from './leaderpod.js';
import { checkKubeObject, type ObjectCheck } from './objectschema.js';
import { KubeLeaseStore } from './leasestore.js';
import { Metrics } from './metrics.js';
import { KubeStatusClient, StatusWriter } from './status.js';
import { WorkQueue, runWorkers } from './workqueue.js';

export type { ReconcileResult };

export interface Controller {
  readonly name: string;
  readonly concurrency: number;
  reconcile(key: string): Promise<ReconcileResult | void>;
}

/** Which objects an informer holds, from which cluster, and whether the controllers wait for it. */
export interface InformerSpec {
  labelSelector?: string;
  fieldSelector?: string;
  /** Another cluster (a peer fleet's); ours when absent. */
  cluster?: ClusterClients;
  /**
   * Whether readiness and the start of the reconcile workers wait for this
   * informer's first list. Default: true for our cluster, false for another:
   * a peer that is down must never hold back our own controllers.
   */
  gates?: boolean;
  /**
   * What each object must pass before it is cached (the kind's schema, for
   * another cluster's objects); one that fails is dropped and counted in
   * leasehold_objects_dropped_total. Default: a named object whose metadata
   * has the right types.
   */
  check?: ObjectCheck;
  /** What is kept of each object (the fields its controller reads); default stripManagedFields. */
  transform?: (object: KubernetesObject) => KubernetesObject;
  /** Size limits on one answer, and what the informer may hold at once (see InformerOptions). */
  limits?: InformerOptions<KubernetesObject>['limits'];
  budget?: InformerOptions<KubernetesObject>['budget'];
  onOverBudget?: InformerOptions<KubernetesObject>['onOverBudget'];
}

export interface ManagerOptions {
  kubeConfig: KubeConfig;
  log: Logger;
  identity: string;
  metricsAddr: string;
  leaderElection?: { namespace: string; name: string; leaseDurationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number };
  /** Limit namespaced watches to one namespace (a namespaced install); Offers stay cluster-wide. */
  watchNamespace?: string;
  resyncMs?: number;
  watchdogMs?: number;
  /** On stop, how long running effects get to finish before they are cancelled. Default 25 s. */
  shutdownGraceMs?: number;
  /**
   * With leader election: this replica's own pod, labelled leasehold.dev/leader
   * while it leads (a Service selecting the label reaches only the leader).
   */
  leaderPod?: PodRef & { client?: PodLabelClient };
}

export class Manager {
  readonly metrics = new Metrics();
  /** Clients for our own cluster. */
  readonly local: ClusterClients;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly batch: BatchV1Api;
  readonly coordination: CoordinationV1Api;
  readonly status: StatusWriter;
  readonly events: EventRecorder;
  readonly finalizers: Finalizers;
  readonly log: Logger;
  private readonly informers = new Map<string, { informer: ResilientInformer<KubernetesObject>; gates: boolean }>();
  private started = false;
  private readonly controllers: { controller: Controller; queue: WorkQueue }[] = [];
  private readonly runners: EffectRunner<unknown>[] = [];
  private elector?: LeaderElector;
  private server?: Server;
  private workers: Promise<void>[] = [];
  private stopping = false;
  private leading = false;
  private leaderLabel?: LeaderPodLabel;
  private labelCleared: Promise<boolean> = Promise.resolve(true);
  private labelClearedDone = true;
  private labelled?: Promise<boolean>;

  constructor(private readonly opts: ManagerOptions) {
    this.log = opts.log;
    this.local = clusterClients('local', opts.kubeConfig, this.metrics);
    ({ custom: this.custom, core: this.core, batch: this.batch, coordination: this.coordination } = this.local);
    this.status = new StatusWriter(new KubeStatusClient(this.custom));
    this.events = new EventRecorder(new KubeEventSink(this.core), 'leasehold-controller', opts.log);
    this.finalizers = new Finalizers(this.custom);
    if (opts.leaderPod && opts.leaderElection) {
      const { client, ...pod } = opts.leaderPod;
      this.leaderLabel = new LeaderPodLabel(client ?? new KubePodLabelClient(this.core), pod, opts.log.child({ component: 'leader-pod' }));
    }
  }

  /** The namespace namespaced watches are limited to, or undefined for all. */
  get watchNamespace(): string | undefined {
    return this.opts.watchNamespace;
  }

  /**
   * One shared informer per cluster, API path and selectors (e.g.
   * /apis/leasehold.dev/v1alpha1/leases). One asked for after start() starts at once.
   */
  informer<T extends KubernetesObject>(path: string, spec: InformerSpec = {}): ResilientInformer<T> {
    const cluster = spec.cluster ?? this.local;
    const key = informerKey(cluster.name, path, spec);
    let entry = this.informers.get(key);
    if (!entry) {
      const options: InformerOptions<KubernetesObject> = {
        log: this.log.child({ informer: path, cluster: cluster.name }),
        resyncMs: this.opts.resyncMs,
        watchdogMs: this.opts.watchdogMs,
        onRestart: (reason: string) => this.metrics.informerRestarts.inc({ resource: path, reason }),
        check: spec.check ?? checkKubeObject,
        onDrop: (reason: string) => this.metrics.objectsDropped.inc({ cluster: cluster.name, reason }),
        onHandlerError: () => this.metrics.informerHandlerErrors.inc({ resource: path }),
        ...(spec.labelSelector ? { labelSelector: spec.labelSelector } : {}),
        ...(spec.fieldSelector ? { fieldSelector: spec.fieldSelector } : {}),
        ...(spec.transform ? { transform: spec.transform } : {}),
        ...(spec.limits ? { limits: spec.limits } : {}),
        ...(spec.budget ? { budget: spec.budget, onOverBudget: spec.onOverBudget } : {}),
      };
      entry = { informer: new ResilientInformer<KubernetesObject>(cluster.kubeConfig, path, options), gates: spec.gates ?? cluster === this.local };
      this.informers.set(key, entry);
      if (this.started) entry.informer.start();
    }
    return entry.informer as unknown as ResilientInformer<T>;
  }

  /** Stops and forgets an informer (one on a peer cluster that is no longer followed). */
  async dropInformer(informer: ResilientInformer<KubernetesObject>): Promise<void> {
    for (const [key, entry] of this.informers) {
      if (entry.informer === informer) this.informers.delete(key);
    }
    await informer.stop();
  }

  /** An effect runner for one controller's long effects; stop() drains it. */
  effects<R>(controller: string): EffectRunner<R> {
    const runner = new EffectRunner<R>({
      log: this.log.child({ controller, component: 'effects' }),
      onCount: (kind, running) => this.metrics.effectsInFlight.set({ controller, kind }, running),
    });
    this.runners.push(runner as EffectRunner<unknown>);
    return runner;
  }

  /** Registers a controller; returns its queue so watches can enqueue keys. */
  add(controller: Controller): WorkQueue {
    const queue = new WorkQueue();
    this.controllers.push({ controller, queue });
    return queue;
  }

  isLeader(): boolean {
    return this.leading;
  }

  synced(): boolean {
    return this.gating().every((i) => i.hasSynced());
  }

  async start(): Promise<void> {
    // Ready only once a label left from this pod's last container is gone, so
    // a Service never counts a restarted follower as the leader.
    if (this.leaderLabel) {
      this.labelClearedDone = false;
      this.labelCleared = this.leaderLabel.mark(false).finally(() => (this.labelClearedDone = true));
    }
    this.server = await serveHealth(this.opts.metricsAddr, { healthy: () => !this.stopping, ready: () => this.synced() && this.labelClearedDone }, this.metrics.registry);
    this.started = true;
    for (const { informer } of this.informers.values()) informer.start();
    for (const { controller, queue } of this.controllers) {
      const labels = { controller: controller.name };
      const sample = () => {
        this.metrics.queueDepth.set(labels, queue.len());
        this.metrics.unfinishedWork.set(labels, queue.unfinishedWorkSeconds());
        this.metrics.longestRunning.set(labels, queue.longestRunningProcessorSeconds());
      };
      setInterval(sample, 1000).unref();
    }
    if (!this.opts.leaderElection) {
      await this.startLeading();
      return;
    }
    const le = this.opts.leaderElection;
    const { coordination } = clusterClients('local', this.opts.kubeConfig, this.metrics, 'leader-election');
    this.elector = new LeaderElector({
      store: new KubeLeaseStore(coordination, le.namespace, le.name),
      identity: this.opts.identity,
      leaseDurationMs: le.leaseDurationMs,
      renewDeadlineMs: le.renewDeadlineMs,
      retryPeriodMs: le.retryPeriodMs,
      log: this.log.child({ component: 'leader-election' }),
      onStartedLeading: () => void this.labelCleared.then(() => this.startLeading()),
      onStoppedLeading: () => this.lostLeadership(),
      onNewLeader: (id: string) => this.log.info({ leader: id }, 'leader observed'),
    });
    void this.elector.run();
  }

  private async startLeading(): Promise<void> {
    this.leading = true;
    this.metrics.leader.set(1);
    this.log.info({ identity: this.opts.identity }, 'started leading');
    await Promise.all(this.gating().map((i) => i.waitForSync()));
    // Labelled once synced: before that a delivery could only be refused.
    if (this.leaderLabel && !this.stopping) this.labelled = this.leaderLabel.mark(true);
    for (const { controller, queue } of this.controllers) {
      this.workers.push(
        runWorkers(queue, controller.concurrency, async (key: string) => {
          const end = this.metrics.reconcileDuration.startTimer({ controller: controller.name });
          try {
            const result = await controller.reconcile(key);
            this.metrics.reconcileTotal.inc({ controller: controller.name, result: result?.requeueAfter ? 'requeue' : 'success' });
            return result ?? undefined;
          } catch (err) {
            // runWorkers logs the failure with its requeue count.
            this.metrics.reconcileTotal.inc({ controller: controller.name, result: 'error' });
            throw err;
          } finally {
            end();
          }
        }, { log: this.log.child({ controller: controller.name }) }),
      );
    }
  }

  // Like controller-runtime: a replica that loses the lease exits, so that
  // no reconcile from a former leader can overlap the new leader's.
  private lostLeadership(): void {
    this.metrics.leader.set(0);
    if (this.stopping) return;
    this.log.error('lost leadership; exiting');
    process.exit(1);
  }

  /**
   * Stops workers (letting in-flight reconciles finish), gives running
   * effects the grace period, then releases the leader lease and stops
   * informers. The lease is held until the effects are done so that the
   * next leader never acts on an object whose acquire is still running here;
   * an acquire that ends within the grace records its own result.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    // Unlabelled first, so new deliveries go nowhere rather than to a replica
    // that is about to stop; the lease is released only after.
    if (this.leaderLabel && this.labelled) {
      await this.labelled;
      await this.leaderLabel.mark(false);
    }
    await Promise.all(this.controllers.map(({ queue }) => queue.shutDownWithDrain()));
    await Promise.all(this.workers);
    await Promise.all(this.runners.map((r) => r.drain(this.opts.shutdownGraceMs ?? 25_000)));
    if (this.elector) await this.elector.release();
    this.leading = false;
    this.metrics.leader.set(0);
    for (const { informer } of this.informers.values()) void informer.stop();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  private gating(): ResilientInformer<KubernetesObject>[] {
    return [...this.informers.values()].filter((e) => e.gates).map((e) => e.informer);
  }
}

function informerKey(cluster: string, path: string, spec: InformerSpec): string {
  return JSON.stringify([cluster, path, spec.labelSelector ?? '', spec.fieldSelector ?? '']);
}
