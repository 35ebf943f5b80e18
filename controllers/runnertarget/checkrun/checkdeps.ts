// What one check needs from the rest of the controller; the reconciler's
// dependencies extend it and hand it to every CheckRun.
import type { Logger } from 'pino';
import type { RunnerTarget } from '../../../src/api/index.js';
import type { EventRecorder } from '../../../src/kube/events.js';
import type { StatusWriter } from '../../../src/kube/status.js';
import type { RunnerTargetMetrics } from '../metrics.js';
import type { PlanSettings } from '../policy/plan.js';
import type { CheckLeases } from './checklease.js';
import type { HostAccess } from './hostssh.js';
import type { TargetClients } from './providers.js';
import type { RunnerGroupIds } from './runnergroupids.js';

/** What one check works with: the API server, the providers, the check lease, this replica; the reconciler's deps carry them. */
export interface CheckDeps {
  /** The object as the API server has it now; undefined when it is gone. */
  read(namespace: string, name: string): Promise<RunnerTarget | undefined>;
  status: Pick<StatusWriter, 'write'>;
  events: Pick<EventRecorder, 'record'>;
  providers: { clients(target: RunnerTarget): Promise<TargetClients>; forget(key: string): void };
  leases: Pick<CheckLeases, 'acquire'>;
  /** This replica, as the Held condition names it. */
  identity: string;
  installationID: string;
  /** The target's own SSH key (its hosts admit its public half, and only theirs) and the hosts' login user and port. */
  hostAccess(target: RunnerTarget): Promise<HostAccess>;
  settings?: Partial<PlanSettings>;
  /** Runner group ids kept between checks; absent, each check lists the groups. */
  runnerGroups?: RunnerGroupIds;
  metrics?: RunnerTargetMetrics;
  log?: Logger;
  now?: () => number;
}
