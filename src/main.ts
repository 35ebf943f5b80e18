#!/usr/bin/env node
// The controller process: flags and environment in, manager and controllers wired, nothing else.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadKubeConfig } from './kube/client.js';
import { createLogger } from './kube/logger.js';
import { Manager } from './kube/manager.js';
import { registerLeaseController } from '../controllers/lease/controller.js';

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

const kubeConfig = loadKubeConfig(values.kubeconfig);
const identity = `${process.env.POD_NAME ?? hostname()}_${randomUUID()}`;
const mgr = new Manager({
  kubeConfig,
  log,
  identity,
  metricsAddr: values['metrics-addr']!,
  watchNamespace: values['watch-namespace'] || undefined,
  leaderElection: values['no-leader-elect']
    ? undefined
    : { namespace: values['leader-election-namespace']!, name: values['leader-election-id']! },
});
registerLeaseController(mgr, { concurrency });

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
