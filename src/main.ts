#!/usr/bin/env node
// The controller process: flags and environment in, manager and controllers wired, nothing else.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadKubeConfig } from './kube/client.js';
import { createLogger } from './kube/logger.js';
import { Manager } from './kube/manager.js';
import { registerLeaseController } from '../controllers/lease/controller.js';
import { registerOfferController } from '../controllers/offer/controller.js';
import { MachineDriver } from '../controllers/lease/machines.js';
import { sshAgent } from '../controllers/lease/ssh-agent.js';
import { loadOrCreateControllerKey, type ControllerKey } from '../controllers/lease/identity.js';
import { compareFacts } from './machine/facts.js';
import { parseDuration } from './api/duration.js';
import { OFFER_RESOURCE } from './api/resources.js';
import { resourcePath } from './kube/resource.js';
import type { Offer } from './api/index.js';
import { LambdaAccounts } from './providers/lambda/accounts.js';
import { LambdaOffers } from '../controllers/offer/lambda.js';
import { isNotFound } from './kube/client.js';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string', default: process.env.KUBECONFIG },
    'metrics-addr': { type: 'string', default: process.env.LEASEHOLD_METRICS_ADDR ?? ':8080' },
    'leader-elect': { type: 'boolean', default: true },
    'no-leader-elect': { type: 'boolean', default: false },
    'leader-election-namespace': { type: 'string', default: process.env.POD_NAMESPACE ?? 'default' },
    'leader-election-id': { type: 'string', default: 'leasehold-controller' },
    'log-level': { type: 'string', default: process.env.LEASEHOLD_LOG_LEVEL ?? 'info' },
    concurrency: { type: 'string', default: '4' },
    'max-leases': { type: 'string', default: process.env.LEASEHOLD_MAX_LEASES ?? '2' },
    'acquire-timeout': { type: 'string', default: process.env.LEASEHOLD_ACQUIRE_TIMEOUT ?? '15m' },
    'check-interval': { type: 'string', default: process.env.LEASEHOLD_CHECK_INTERVAL ?? '1m' },
    'resync-period': { type: 'string', default: '10m' },
    namespace: { type: 'string', default: process.env.POD_NAMESPACE ?? 'default' },
    'watch-namespace': { type: 'string', default: process.env.LEASEHOLD_WATCH_NAMESPACE },
    'lambda-list-interval': { type: 'string', default: '2m' },
    'lambda-launch-interval': { type: 'string', default: '12s' },
    'lambda-poll-interval': { type: 'string', default: '2s' },
    orphans: { type: 'string' },
    'orphan-grace': { type: 'string', default: '10m' },
    'history-limit': { type: 'string', default: '32' },
    'history-max-age': { type: 'string', default: '168h' },
  },
  strict: true,
});

const log = createLogger({ level: values['log-level']! });
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  log.fatal(`--concurrency ${values.concurrency} must be a whole number of at least 1`);
  process.exit(2);
}

function durationFlag(name: string): number {
  try {
    return parseDuration(String(values[name as keyof typeof values]));
  } catch (err) {
    log.fatal(`--${name}: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(2);
  }
}
const maxLeases = Number(values['max-leases']);
if (!Number.isInteger(maxLeases) || maxLeases < 0) {
  log.fatal(`--max-leases ${values['max-leases']} must be a whole number (0 stops all new leases)`);
  process.exit(2);
}
const acquireTimeoutMs = durationFlag('acquire-timeout');
const checkIntervalMs = durationFlag('check-interval');
const resyncMs = durationFlag('resync-period');
const historyLimit = Number(values['history-limit']);
if (!Number.isInteger(historyLimit) || historyLimit < 0) {
  log.fatal(`--history-limit ${values['history-limit']} must be a whole number (ended Leases kept per namespace; 0 keeps none)`);
  process.exit(2);
}
const historyMaxAgeMs = durationFlag('history-max-age');

const lambdaListMs = durationFlag('lambda-list-interval');
const lambdaLaunchMs = durationFlag('lambda-launch-interval');
const lambdaPollMs = durationFlag('lambda-poll-interval');
const orphanGraceMs = durationFlag('orphan-grace');
if (values.orphans !== undefined && values.orphans !== 'terminate' && values.orphans !== 'report') {
  log.fatal(`--orphans ${values.orphans} must be terminate or report`);
  process.exit(2);
}

const kubeConfig = loadKubeConfig(values.kubeconfig);
const identity = `${process.env.POD_NAME ?? hostname()}_${randomUUID()}`;
const mgr = new Manager({
  kubeConfig,
  log,
  identity,
  metricsAddr: values['metrics-addr']!,
  watchNamespace: values['watch-namespace'] || undefined,
  resyncMs,
  leaderElection: values['no-leader-elect']
    ? undefined
    : { namespace: values['leader-election-namespace']!, name: values['leader-election-id']! },
});
// The controller's SSH key is read (or made) on first use, so a follower
// replica never needs it.
let key: Promise<ControllerKey> | undefined;
const controllerKey = () => {
  key ??= loadOrCreateControllerKey(mgr.core, values.namespace!).catch((err) => {
    key = undefined;
    throw err;
  });
  return key;
};
const offers = mgr.informer<Offer>(resourcePath(OFFER_RESOURCE));
const lambdaAccounts = new LambdaAccounts({
  launchIntervalMs: lambdaLaunchMs,
  onResult: (operation, code) => mgr.metrics.providerRequests.inc({ provider: 'lambda', operation, code }),
  async secrets(namespace, name) {
    try {
      const s = await mgr.core.readNamespacedSecret({ namespace, name });
      return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  },
});
// A controller that sees one namespace cannot tell another namespace's
// machines from orphans, so unless told otherwise it only reports them.
const lambdaOffers = new LambdaOffers({
  accounts: lambdaAccounts,
  events: mgr.events,
  log: log.child({ controller: 'offer' }),
  listIntervalMs: lambdaListMs,
  orphanGraceMs,
  orphans: (values.orphans as 'terminate' | 'report' | undefined) ?? (values['watch-namespace'] ? 'report' : 'terminate'),
});
const driver = new MachineDriver({
  lambda: lambdaAccounts,
  metrics: {
    launched: (provider, result, seconds) => mgr.metrics.launchDuration.observe({ provider, result }, seconds),
    commandCall: (operation, code) => mgr.metrics.providerRequests.inc({ provider: 'command', operation, code }),
  },
  lambdaPollMs,
  offers,
  key: controllerKey,
  agent: sshAgent(),
  compare: (lease, measured) => {
    const offer = offers.get(undefined, lease.status?.offer ?? '');
    let claim: Parameters<typeof compareFacts>[0] | undefined = offer?.spec.command?.shape as never;
    if (offer?.spec.lambda) {
      // A Lambda machine is checked against the listing it was rented from.
      const c = offer.status?.candidates?.find((x) => x.instanceType === lease.status?.instanceType);
      if (c) claim = { os: 'linux', arch: c.arch, cpus: c.cpus, memoryGiB: c.memoryGiB, gpus: c.gpus, gpu: c.gpus ? c.gpuModel : undefined, vramGiB: c.vramGiB };
    }
    if (!claim) return [];
    const r = compareFacts(claim, measured as never);
    return r.ok ? [] : r.differences;
  },
  acquireTimeoutMs,
  releaseTimeoutMs: 5 * 60_000,
  log,
});
registerOfferController(mgr, { lambda: lambdaOffers });
registerLeaseController(mgr, {
  concurrency,
  driver,
  settings: { maxLeases, acquireTimeoutMs, checkIntervalMs, historyLimit, historyMaxAgeMs },
});

let signalled = false;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (signalled) return;
    signalled = true;
    log.info({ signal: sig }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    mgr.stop().then(() => process.exit(0), (err) => {
      log.error({ err: String(err) }, 'shutdown failed');
      process.exit(1);
    });
  });
}

await mgr.start();
log.info({ identity, metricsAddr: values['metrics-addr'] }, 'manager started');
