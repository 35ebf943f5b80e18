// What a Lambda launch keeps for its release, read back from the Lease, and
// the names and user data it gives an instance.
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { Machine, MachineState } from '../types.js';
import type { LambdaInstance } from './client.js';

/** What a Lambda launch keeps in Lease status for release. */
export interface LambdaState {
  name: string;
  instanceID?: string;
  region?: string;
  instanceType?: string;
  /** The host key given to the instance (public half only). */
  hostKey?: string;
  /** The account that launched it (LambdaAccount.id, which reveals nothing of the key). */
  account?: string;
  /** When (ms since the epoch) the last launch request whose answer never came was sent: it may land later. */
  unansweredLaunchAt?: number;
}

/** How long after an unanswered launch request an instance may still appear under its name. */
export const DEFAULT_LAUNCH_SETTLE_MS = 120_000;

/** The name the controller's key has in the Lambda account. */
export function accountKeyName(publicKey: string): string {
  const blob = Buffer.from(publicKey.trim().split(/\s+/)[1] ?? '', 'base64');
  return `leasehold-${createHash('sha256').update(blob).digest('hex').slice(0, 16)}`;
}

/** cloud-init user_data that installs the given host key and nothing else. */
export function hostKeyUserData(hostKey: { privateKey: string; publicKey: string }): string {
  return `#cloud-config\n${stringify({
    ssh_deletekeys: true,
    ssh_genkeytypes: [],
    ssh_keys: { ed25519_private: hostKey.privateKey, ed25519_public: hostKey.publicKey },
  })}`;
}

export function parseLambdaState(raw: string): Partial<LambdaState> {
  if (!raw) return {};
  try {
    const v = JSON.parse(raw) as Partial<LambdaState>;
    return typeof v === 'object' && v ? v : {};
  } catch {
    return {};
  }
}

export const LIVE = (i: LambdaInstance) => i.status !== 'terminated';

const MACHINE_STATES = new Map<string, MachineState>([
  ['booting', 'Pending'],
  ['active', 'Running'],
  ['terminating', 'Terminating'],
]);

export function restore(state: LambdaState, unansweredLaunchAt: number | undefined): void {
  if (unansweredLaunchAt === undefined) delete state.unansweredLaunchAt;
  else state.unansweredLaunchAt = unansweredLaunchAt;
}

export function toMachine(i: LambdaInstance & { name: string }): Machine {
  return { name: i.name, id: i.id, state: MACHINE_STATES.get(i.status) ?? 'Unhealthy', providerStatus: i.status };
}
