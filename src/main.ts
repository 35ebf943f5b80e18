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
const driver = new MachineDriver({
  offers,
  key: controllerKey,
  agent: sshAgent(),
  compare: (lease, measured) => {
    const offer = offers.get(undefined, lease.status?.offer ?? '');
    const shape = offer?.spec.command?.shape;
    if (!shape) return [];
    const r = compareFacts(shape as never, measured as never);
    return r.ok ? [] : r.differences;
  },
  acquireTimeoutMs,
  releaseTimeoutMs: 5 * 60_000,
  log,
});
registerOfferController(mgr);
registerLeaseController(mgr, {
  concurrency,
  driver,
  settings: { maxLeases, acquireTimeoutMs, checkIntervalMs },
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
