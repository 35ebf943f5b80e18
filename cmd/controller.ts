#!/usr/bin/env node
// The controller process: flags in, manager and controllers wired, nothing else.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { loadKubeConfig } from '../src/kube/client.js';
import { errorText } from '../src/kube/errors.js';
import { waitForInstallation } from '../src/kube/installation.js';
import { createLogger } from '../src/kube/logger.js';
import { Manager } from '../src/kube/manager.js';
import { secretDataReader } from '../src/kube/secrets.js';
import { DEFAULT_GCE_ENDPOINT } from '../src/api/index.js';
import { MetadataTokenSource } from '../src/providers/gce/auth.js';
import { LambdaAccounts } from '../src/providers/lambda/accounts.js';
import { leaseRecords, registerLeaseController } from '../controllers/lease/register.js';
import { registerOfferController } from '../controllers/offer/register.js';
import { registerPeerFleetController } from '../controllers/peerfleet/register.js';
import { registerRunnerTargetController, serveRunnerTargetWebhooks } from '../controllers/runnertarget/register.js';
import { sampleWindow } from '../controllers/runnertarget/policy/sample.js';
import { FlagError, parseControllerFlags, type ControllerFlags } from './flags.js';

let flags: ControllerFlags;
try {
  flags = parseControllerFlags(process.argv.slice(2), process.env);
} catch (err) {
  if (!(err instanceof FlagError) && !(err instanceof TypeError)) throw err;
  process.stderr.write(`leasehold: ${err.message}\n`);
  process.exit(2);
}
const log = createLogger({ level: flags.logLevel });
const identity = `${process.env.POD_NAME ?? hostname()}_${randomUUID()}`;
const mgr = new Manager({
  kubeConfig: loadKubeConfig(flags.kubeconfig),
  log,
  identity,
  metricsAddr: flags.metricsAddr,
  watchNamespace: flags.watchNamespace,
  resyncMs: flags.resyncMs,
  leaderElection: flags.leaderElection,
  shutdownGraceMs: flags.shutdownGraceMs,
  // Webhook deliveries are acted on only by the leader, and GitHub does not
  // redeliver a refused one: the chart's webhook Service selects the leader's label.
  ...(flags.githubWebhookPort && process.env.POD_NAME && process.env.POD_NAMESPACE
    ? { leaderPod: { name: process.env.POD_NAME, namespace: process.env.POD_NAMESPACE } }
    : {}),
});
// A promise nobody awaited failed: that one operation is lost, and its
// object is reconciled again at its next event or requeue. Exiting would stop
// every other controller and Lease with it, and the standby would meet the
// same input. An uncaught exception keeps Node's default (exit): the state
// it leaves behind is unknown.
process.on('unhandledRejection', (reason) => {
  mgr.metrics.unhandledRejections.inc();
  log.error({ err: errorText(reason).slice(0, 500) }, 'unhandled promise rejection; the controller goes on');
});
// Known before any controller runs: every machine name carries it.
const { id: installationID } = await waitForInstallation(mgr.core, flags.namespace, flags.installationSecret, (err, inMs) =>
  log.warn({ namespace: flags.namespace, secret: flags.installationSecret, err: String(err), retryInMs: inMs }, 'reading the installation ID Secret failed; retrying'),
);
log.info({ installationID }, 'installation');
// One set of Lambda accounts for both controllers: each account has one
// launch pacer, whoever sends the request.
const lambda = new LambdaAccounts({
  launchIntervalMs: flags.lambdaLaunchMs,
  onResult: (operation, code) => mgr.metrics.providerRequests.inc({ provider: 'lambda', operation, code }),
  secrets: secretDataReader(mgr.core),
});
// What every kind is registered with; each adds its own options.
const installation = { installationID, controllerNamespace: flags.namespace };
const leaseSettings = {
  maxLeases: flags.maxLeases,
  maxLeasesPerNamespace: flags.maxLeasesPerNamespace,
  namespaceLeaseLimits: flags.namespaceLeaseLimits,
  acquireTimeoutMs: flags.acquireTimeoutMs,
  checkIntervalMs: flags.checkIntervalMs,
  historyLimit: flags.historyLimit,
  historyMaxAgeMs: flags.historyMaxAgeMs,
};
registerOfferController(mgr, {
  ...installation,
  concurrency: flags.offerConcurrency,
  lambda: {
    accounts: lambda,
    listIntervalMs: flags.lambdaListMs,
    orphanGraceMs: flags.orphanGraceMs,
    orphans: flags.orphans,
    records: leaseRecords(mgr, { ...installation, installationSecret: flags.installationSecret }),
  },
});
registerLeaseController(mgr, {
  ...installation,
  concurrency: flags.concurrency,
  installationSecret: flags.installationSecret,
  lambda: { accounts: lambda, pollMs: flags.lambdaPollMs, launchSettleMs: flags.lambdaLaunchSettleMs },
  settings: leaseSettings,
});
registerPeerFleetController(mgr, {
  ...installation,
  concurrency: flags.peerFleetConcurrency,
  lending: flags.peerLending,
  origins: { allowed: flags.allowedPeerOrigins, allowLoopbackHTTP: flags.allowLoopbackEndpoints },
  policy: { tolerate: flags.peerTolerateTaints, allowedRegistries: flags.peerAllowedRegistries },
  effectConcurrency: flags.peerFleetEffectConcurrency,
  peerBudget: flags.peerBudget,
  maxPerNamespace: flags.maxPeerFleetsPerNamespace,
});
const runnerTargets = registerRunnerTargetController(mgr, {
  ...installation,
  concurrency: flags.runnerTargetConcurrency,
  identity,
  endpoints: {
    github: { allowed: flags.allowedGitHubEndpoints, allowLoopbackHTTP: flags.allowLoopbackEndpoints },
    gce: { allowed: flags.allowedGceEndpoints, allowLoopbackHTTP: flags.allowLoopbackEndpoints },
    gceToken: { allowed: flags.allowedGceTokenEndpoints, allowLoopbackHTTP: flags.allowLoopbackEndpoints },
  },
  settings: { window: sampleWindow(flags.runnerSampleWindowScale), busyLagMs: flags.runnerBusyLagMs, bootGraceMs: flags.runnerBootGraceMs, offlineGraceMs: flags.runnerOfflineGraceMs, lifetimeScale: flags.runnerLifetimeScale },
  hostSSH: { user: flags.runnerSSHUser, port: flags.runnerSSHPort },
  ...(flags.runnerGceOwnIdentity ? { gceOwnIdentity: { tokens: new MetadataTokenSource(), endpoint: DEFAULT_GCE_ENDPOINT } } : {}),
  followUpMs: flags.runnerFollowUpMs,
  checkLeaseMs: flags.runnerCheckLeaseMs,
  checkIntervalScale: flags.runnerCheckIntervalScale,
  checkConcurrency: flags.runnerCheckConcurrency,
});
// Before the manager starts, so that a replica that does not lead answers 503 rather than refusing GitHub's connection.
const webhooks = flags.githubWebhookPort ? await serveRunnerTargetWebhooks(mgr, runnerTargets, { port: flags.githubWebhookPort }) : undefined;
if (webhooks) log.info({ port: flags.githubWebhookPort }, 'receiving GitHub webhook deliveries');

let signalled = false;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (signalled) return;
    signalled = true;
    log.info({ signal: sig }, 'shutting down');
    // New effects stop at once; running ones get the grace period, then are
    // cancelled; this is the backstop should one ignore its cancellation.
    const force = setTimeout(() => process.exit(1), flags.shutdownGraceMs + 15_000);
    force.unref();
    webhooks?.close();
    mgr.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}

await mgr.start();
log.info({ identity, metricsAddr: flags.metricsAddr }, 'manager started');
