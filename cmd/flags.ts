// The controller's command line: every flag, its default (some from the
// environment the chart sets) and its validation. A bad flag exits 2 with a
// message naming it.
import { parseArgs } from 'node:util';
import { parseDuration } from '../src/api/duration.js';
import { errorText } from '../src/kube/errors.js';
import { parseTaintRules, type TaintRule } from '../controllers/peerfleet/policy/nodes.js';
import { parseEndpointList } from '../src/providers/endpoints.js';
import { parseNamespaceLeaseLimits, type NamespaceLeaseLimits } from '../controllers/lease/policy/limits.js';

export interface ControllerFlags {
  kubeconfig: string | undefined;
  metricsAddr: string;
  leaderElection: { namespace: string; name: string } | undefined;
  logLevel: string;
  /** Reconcile workers of each kind's work queue; Lease's flag is --concurrency, each other kind's --<kind>-concurrency. */
  concurrency: number;
  offerConcurrency: number;
  runnerTargetConcurrency: number;
  maxLeases: number;
  /** Active Leases of one namespace; 0: no limit. */
  maxLeasesPerNamespace: number;
  /** The admin's caps per namespace (Helm leaseLimits). */
  namespaceLeaseLimits: NamespaceLeaseLimits;
  acquireTimeoutMs: number;
  checkIntervalMs: number;
  resyncMs: number;
  /** The controller's own namespace: its SSH key Secret lives there. */
  namespace: string;
  /** The Secret (in namespace) holding this release's installation ID: one per release. */
  installationSecret: string;
  watchNamespace: string | undefined;
  lambdaListMs: number;
  lambdaLaunchMs: number;
  lambdaPollMs: number;
  /** How long a Lambda release watches a name after a launch request whose answer never came. */
  lambdaLaunchSettleMs: number;
  orphans: 'terminate' | 'report';
  orphanGraceMs: number;
  historyLimit: number;
  historyMaxAgeMs: number;
  /** On SIGTERM, how long running acquires, probes and releases get to finish before they are cancelled. */
  shutdownGraceMs: number;
  /** Whether PeerFleets lend (needs read access to nodes and pods); without it they only report readiness. */
  peerLending: boolean;
  /** What the watch of one PeerFleet's peer queue may hold, and how long a peer cut off past it waits before it is watched again. */
  peerBudget: { bytes: number; objects: number; retryMs: number };
  /** PeerFleets served in one namespace (the oldest first); 0: no cap. */
  maxPeerFleetsPerNamespace: number;
  /** RunnerTarget's sample window (300-450 s, waits up to 2 min) times this; below 1 only for tests. */
  runnerSampleWindowScale: number;
  /** The controller's reading of spec.gce.maxRunDuration times this, for replacing idle hosts before it (tests only; VMs are inserted with the spec's value). */
  runnerLifetimeScale: number;
  /** RunnerTarget checkInterval (at least 30 s) times this; below 1 only for tests. */
  runnerCheckIntervalScale: number;
  /** The login user and SSH port of RunnerTarget hosts. */
  runnerSSHUser: string;
  runnerSSHPort: number;
  /** Whether RunnerTargets without spec.gce.credentialsSecretRef call Compute Engine as the controller's own identity (metadata server). */
  runnerGceOwnIdentity: boolean;
  /** RunnerTarget policy times, shorter only for tests: how long a host is seen idle before it drains, how long a VM may run without a runner. */
  runnerBusyLagMs: number;
  runnerBootGraceMs: number;
  runnerOfflineGraceMs: number;
  runnerCheckConcurrency: number;
  /** The port GitHub webhook deliveries (workflow_job) are received on; 0: no webhook server. */
  githubWebhookPort: number;
  /** PeerFleet reconcile workers, and PeerFleet probes and lending effects running at once (off those workers). */
  peerFleetConcurrency: number;
  peerFleetEffectConcurrency: number;
  /** How soon a RunnerTarget check follows one that left a launch open, and how long its check lease lasts unrenewed. */
  runnerFollowUpMs: number;
  runnerCheckLeaseMs: number;
  /** Base URLs a RunnerTarget may send its GitHub credential to, and its Compute Engine credential to. */
  allowedGitHubEndpoints: string[];
  allowedGceEndpoints: string[];
  allowedGceTokenEndpoints: string[];
  /** Peer API servers a PeerFleet may send its bearer token to; empty: none. */
  allowedPeerOrigins: string[];
  /** Plain http to loopback endpoints that are listed; for tests running emulators on this machine only. */
  allowLoopbackEndpoints: boolean;
  /** Node taints a PeerFleet's mirror Jobs may tolerate; a node with any other NoSchedule or NoExecute taint is never lent. */
  peerTolerateTaints: TaintRule[];
  /** Registries (host, or host/path) a lent Job's images may come from; empty: any. */
  peerAllowedRegistries: string[];
}

export class FlagError extends Error {
  override readonly name = 'FlagError';
}

export function parseControllerFlags(args: string[], env: NodeJS.ProcessEnv): ControllerFlags {
  const { values } = parseArgs({
    args,
    options: {
      kubeconfig: { type: 'string', default: env.KUBECONFIG },
      'metrics-addr': { type: 'string', default: env.LEASEHOLD_METRICS_ADDR ?? ':8080' },
      'no-leader-elect': { type: 'boolean', default: false },
      'no-peer-lending': { type: 'boolean', default: false },
      'leader-election-namespace': { type: 'string', default: env.POD_NAMESPACE ?? 'default' },
      'leader-election-id': { type: 'string', default: 'leasehold-controller' },
      'log-level': { type: 'string', default: env.LEASEHOLD_LOG_LEVEL ?? 'info' },
      concurrency: { type: 'string', default: '4' },
      'offer-concurrency': { type: 'string', default: '1' },
      'runnertarget-concurrency': { type: 'string', default: '4' },
      'max-leases': { type: 'string', default: env.LEASEHOLD_MAX_LEASES ?? '2' },
      'max-leases-per-namespace': { type: 'string', default: env.LEASEHOLD_MAX_LEASES_PER_NAMESPACE ?? '0' },
      'namespace-lease-limits': { type: 'string', default: env.LEASEHOLD_NAMESPACE_LEASE_LIMITS ?? '{}' },
      'acquire-timeout': { type: 'string', default: env.LEASEHOLD_ACQUIRE_TIMEOUT ?? '15m' },
      'check-interval': { type: 'string', default: env.LEASEHOLD_CHECK_INTERVAL ?? '1m' },
      'resync-period': { type: 'string', default: '10m' },
      namespace: { type: 'string', default: env.POD_NAMESPACE ?? 'default' },
      'watch-namespace': { type: 'string', default: env.LEASEHOLD_WATCH_NAMESPACE },
      'installation-secret': { type: 'string', default: env.LEASEHOLD_INSTALLATION_SECRET ?? 'leasehold-installation' },
      'lambda-list-interval': { type: 'string', default: '2m' },
      'lambda-launch-interval': { type: 'string', default: '12s' },
      'lambda-poll-interval': { type: 'string', default: '2s' },
      'lambda-launch-settle': { type: 'string', default: '2m' },
      orphans: { type: 'string', default: 'report' },
      'orphan-grace': { type: 'string', default: '10m' },
      'history-limit': { type: 'string', default: '32' },
      'history-max-age': { type: 'string', default: '168h' },
      'shutdown-grace': { type: 'string', default: '25s' },
      'runner-sample-window-scale': { type: 'string', default: '1' },
      'runner-check-interval-scale': { type: 'string', default: '1' },
      'runner-lifetime-scale': { type: 'string', default: '1' },
      'runner-ssh-user': { type: 'string', default: 'leasehold' },
      'runner-ssh-port': { type: 'string', default: '22' },
      'runner-gce-own-identity': { type: 'boolean', default: false },
      'runner-busy-flag-lag': { type: 'string', default: '60s' },
      'runner-boot-grace': { type: 'string', default: '45m' },
      'runner-offline-grace': { type: 'string', default: '5m' },
      'runner-check-concurrency': { type: 'string', default: '4' },
      'github-webhook-port': { type: 'string', default: '0' },
      'peerfleet-concurrency': { type: 'string', default: '2' },
      'peerfleet-effect-concurrency': { type: 'string', default: '4' },
      'peer-budget-bytes': { type: 'string', default: '32Mi' },
      'peer-budget-objects': { type: 'string', default: '5000' },
      'peer-budget-retry': { type: 'string', default: '10m' },
      'max-peerfleets-per-namespace': { type: 'string', default: '4' },
      'runner-follow-up': { type: 'string', default: '10s' },
      'runner-check-lease': { type: 'string', default: '30s' },
      'allowed-github-endpoints': { type: 'string', default: env.LEASEHOLD_ALLOWED_GITHUB_ENDPOINTS ?? 'https://api.github.com' },
      'allowed-gce-endpoints': { type: 'string', default: env.LEASEHOLD_ALLOWED_GCE_ENDPOINTS ?? 'https://compute.googleapis.com' },
      'allowed-gce-token-endpoints': { type: 'string', default: env.LEASEHOLD_ALLOWED_GCE_TOKEN_ENDPOINTS ?? 'https://oauth2.googleapis.com/token' },
      'allowed-peer-origins': { type: 'string', default: env.LEASEHOLD_ALLOWED_PEER_ORIGINS ?? '' },
      'allow-loopback-endpoints': { type: 'boolean', default: false },
      'peer-tolerate-taints': { type: 'string', default: env.LEASEHOLD_PEER_TOLERATE_TAINTS ?? '' },
      'peer-allowed-registries': { type: 'string', default: env.LEASEHOLD_PEER_ALLOWED_REGISTRIES ?? '' },
    },
    strict: true,
  });
  const text = (name: keyof typeof values): string => String(values[name] ?? '');
  const duration = (name: keyof typeof values): number => {
    try {
      return parseDuration(text(name));
    } catch (err) {
      throw new FlagError(`--${name}: ${errorText(err)}`);
    }
  };
  const whole = (name: keyof typeof values, min: number, meaning: string): number => {
    const n = Number(text(name));
    if (!Number.isInteger(n) || n < min) throw new FlagError(`--${name} ${text(name)} must be a whole number ${meaning}`);
    return n;
  };
  const positive = (name: keyof typeof values): number => {
    const ms = duration(name);
    if (!(ms > 0)) throw new FlagError(`--${name} ${text(name)} must be a duration above 0`);
    return ms;
  };
  const scale = Number(text('runner-sample-window-scale'));
  if (!(scale > 0) || !Number.isFinite(scale)) throw new FlagError(`--runner-sample-window-scale ${text('runner-sample-window-scale')} must be a positive number (1: the 300-450 s window)`);
  const checkScale = Number(text('runner-check-interval-scale'));
  if (!(checkScale > 0) || !Number.isFinite(checkScale)) throw new FlagError(`--runner-check-interval-scale ${text('runner-check-interval-scale')} must be a positive number (1: spec.checkInterval as written)`);
  const lifetimeScale = Number(text('runner-lifetime-scale'));
  if (!(lifetimeScale > 0) || !Number.isFinite(lifetimeScale)) throw new FlagError(`--runner-lifetime-scale ${text('runner-lifetime-scale')} must be a positive number (1: spec.gce.maxRunDuration as written)`);
  const port = (name: keyof typeof values): number => {
    const n = whole(name, 1, 'from 1 to 65535');
    if (n > 65535) throw new FlagError(`--${name} ${n} must be a whole number from 1 to 65535`);
    return n;
  };
  const sshUser = text('runner-ssh-user');
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(sshUser)) throw new FlagError(`--runner-ssh-user ${sshUser} must be a Unix user name (lowercase letters, digits, _ and -)`);
  const endpoints = (name: keyof typeof values): string[] => {
    try {
      return parseEndpointList(text(name), `--${name}`);
    } catch (err) {
      throw new FlagError(errorText(err));
    }
  };
  const installationSecret = text('installation-secret');
  if (!/^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/.test(installationSecret)) throw new FlagError(`--installation-secret ${installationSecret} must be a Secret name (lowercase letters, digits and -)`);
  let namespaceLeaseLimits: NamespaceLeaseLimits;
  try {
    namespaceLeaseLimits = parseNamespaceLeaseLimits(text('namespace-lease-limits'), '--namespace-lease-limits');
  } catch (err) {
    throw new FlagError(errorText(err));
  }
  const taintRules = (name: keyof typeof values): TaintRule[] => {
    try {
      return parseTaintRules(text(name), `--${name}`);
    } catch (err) {
      throw new FlagError(errorText(err));
    }
  };
  const registries = text('peer-allowed-registries').split(',').map((r) => r.trim()).filter(Boolean);
  for (const r of registries) {
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9._-]+)*$/.test(r)) {
      throw new FlagError(`--peer-allowed-registries: ${r} must be a registry host (e.g. registry.example.com, ghcr.io/team), without a scheme`);
    }
  }
  const bytes = (name: keyof typeof values): number => {
    const m = /^([0-9]{1,7})(Ki|Mi|Gi)?$/.exec(text(name));
    const n = m ? Number(m[1]) * { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] ?? '']! : 0;
    if (!(n >= 1024 * 1024)) throw new FlagError(`--${name} ${text(name)} must be a size of at least 1Mi, in bytes or with Ki, Mi or Gi (e.g. 32Mi)`);
    return n;
  };
  const webhookPort = whole('github-webhook-port', 0, 'from 0 (off) to 65535');
  if (webhookPort > 65535) throw new FlagError(`--github-webhook-port ${webhookPort} must be a whole number from 0 (off) to 65535`);
  if (webhookPort !== 0 && text('metrics-addr').endsWith(`:${webhookPort}`)) throw new FlagError(`--github-webhook-port ${webhookPort} is the port of --metrics-addr ${text('metrics-addr')}; webhooks get a port of their own: choose another`);
  const orphans = text('orphans');
  if (orphans !== 'terminate' && orphans !== 'report') throw new FlagError(`--orphans ${orphans} must be terminate or report`);
  return {
    kubeconfig: values.kubeconfig,
    metricsAddr: text('metrics-addr'),
    leaderElection: values['no-leader-elect'] ? undefined : { namespace: text('leader-election-namespace'), name: text('leader-election-id') },
    logLevel: text('log-level'),
    concurrency: whole('concurrency', 1, 'of at least 1'),
    offerConcurrency: whole('offer-concurrency', 1, 'of at least 1'),
    runnerTargetConcurrency: whole('runnertarget-concurrency', 1, 'of at least 1'),
    maxLeases: whole('max-leases', 0, '(0 stops all new leases)'),
    maxLeasesPerNamespace: whole('max-leases-per-namespace', 0, '(0: no limit per namespace)'),
    namespaceLeaseLimits,
    acquireTimeoutMs: duration('acquire-timeout'),
    checkIntervalMs: duration('check-interval'),
    resyncMs: duration('resync-period'),
    namespace: text('namespace'),
    watchNamespace: values['watch-namespace'] || undefined,
    installationSecret,
    lambdaListMs: duration('lambda-list-interval'),
    lambdaLaunchMs: duration('lambda-launch-interval'),
    lambdaPollMs: duration('lambda-poll-interval'),
    lambdaLaunchSettleMs: duration('lambda-launch-settle'),
    orphans,
    orphanGraceMs: duration('orphan-grace'),
    historyLimit: whole('history-limit', 0, '(ended Leases kept per namespace; 0 keeps none)'),
    historyMaxAgeMs: duration('history-max-age'),
    shutdownGraceMs: duration('shutdown-grace'),
    peerLending: !values['no-peer-lending'],
    peerBudget: { bytes: bytes('peer-budget-bytes'), objects: whole('peer-budget-objects', 1, 'of at least 1'), retryMs: positive('peer-budget-retry') },
    maxPeerFleetsPerNamespace: whole('max-peerfleets-per-namespace', 0, '(0: no cap)'),
    runnerSampleWindowScale: scale,
    runnerCheckIntervalScale: checkScale,
    runnerLifetimeScale: lifetimeScale,
    runnerSSHUser: sshUser,
    runnerSSHPort: port('runner-ssh-port'),
    runnerGceOwnIdentity: values['runner-gce-own-identity'] === true,
    runnerBusyLagMs: duration('runner-busy-flag-lag'),
    runnerBootGraceMs: duration('runner-boot-grace'),
    runnerOfflineGraceMs: duration('runner-offline-grace'),
    runnerCheckConcurrency: whole('runner-check-concurrency', 1, 'of at least 1'),
    githubWebhookPort: webhookPort,
    peerFleetConcurrency: whole('peerfleet-concurrency', 1, 'of at least 1'),
    peerFleetEffectConcurrency: whole('peerfleet-effect-concurrency', 1, 'of at least 1'),
    runnerFollowUpMs: positive('runner-follow-up'),
    runnerCheckLeaseMs: positive('runner-check-lease'),
    allowedGitHubEndpoints: endpoints('allowed-github-endpoints'),
    allowedGceEndpoints: endpoints('allowed-gce-endpoints'),
    allowedGceTokenEndpoints: endpoints('allowed-gce-token-endpoints'),
    allowedPeerOrigins: endpoints('allowed-peer-origins'),
    allowLoopbackEndpoints: values['allow-loopback-endpoints'] === true,
    peerTolerateTaints: taintRules('peer-tolerate-taints'),
    peerAllowedRegistries: registries,
  };
}
