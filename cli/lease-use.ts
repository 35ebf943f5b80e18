// What a device does to use a Lease, for run and ssh alike: put its key in
// spec.sshKeys, wait until the controller reports it installed, and mark the
// Lease active right before use. Each write carries the resourceVersion it
// was decided on; a conflict means "look again", never "write anyway".
import { ACTIVITY_ANNOTATION } from '../src/api/activity.js';
import { failedCheckOf } from '../src/api/check-failure.js';
import type { Lease } from '../src/api/lease.js';
import { MAX_SSH_KEYS, sshKeysHash } from '../src/api/ssh-keys.js';
import { statusCode } from '../src/kube/errors.js';
import { keyID, type DeviceKey } from './device-key.js';
import { EXIT, ExitError } from './exit-codes.js';
import type { LeaseAPI } from './leaseapi.js';

export const nameOf = (l: Lease) => l.metadata?.name ?? '';
const nsOf = (l: Lease) => l.metadata?.namespace ?? '';

/** Reads, decides, writes with the resourceVersion read; on a conflict reads and decides again. */
export async function updateLease(api: LeaseAPI, lease: Lease, decide: (l: Lease) => Record<string, unknown> | undefined): Promise<Lease> {
  let current = lease;
  for (;;) {
    const change = decide(current);
    if (!change) return current;
    const meta = (change.metadata ?? {}) as Record<string, unknown>;
    try {
      return await api.patch(nsOf(current), nameOf(current), { ...change, metadata: { ...meta, resourceVersion: current.metadata?.resourceVersion } });
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
      const again = await api.get(nsOf(current), nameOf(current));
      if (!again) throw new ExitError(`Lease ${nameOf(current)} was deleted`, EXIT.leaseUnusable);
      current = again;
    }
  }
}

export function hasKey(lease: Lease, key: DeviceKey): boolean {
  return (lease.spec.sshKeys ?? []).some((k) => keyID(k) === key.id);
}

/** Adds the device's public key to spec.sshKeys unless it is there; at most MAX_SSH_KEYS devices. */
export function addDeviceKey(api: LeaseAPI, lease: Lease, key: DeviceKey): Promise<Lease> {
  return updateLease(api, lease, (l) => {
    if (hasKey(l, key)) return undefined;
    const keys = l.spec.sshKeys ?? [];
    if (keys.length >= MAX_SSH_KEYS) {
      throw new ExitError(
        `Lease ${nameOf(l)} already admits ${keys.length} devices, the most spec.sshKeys takes (${MAX_SSH_KEYS}); end it with leasehold release ${nameOf(l)}, or remove a device's key from spec.sshKeys (kubectl edit leases.leasehold.dev ${nameOf(l)})`,
        EXIT.leaseUnusable,
      );
    }
    return { spec: { sshKeys: [...keys, key.publicKey] } };
  });
}

/** Whether the controller has installed exactly the keys spec.sshKeys lists now, this device's among them, on a machine it reports usable. */
export function keyInstalled(lease: Lease, key: DeviceKey): boolean {
  const st = lease.status ?? {};
  return (st.phase === 'Ready' || st.phase === 'Idle') && !failedCheckOf(lease) && hasKey(lease, key) && st.installedKeysHash === sshKeysHash(lease.spec.sshKeys ?? []);
}

/** Why the Lease cannot be run on now, or undefined while it can (Ready or Idle, its latest check passed, not deleted, before its lifetime ends). */
export function unusable(lease: Lease, now: number): string | undefined {
  const st = lease.status ?? {};
  const name = nameOf(lease);
  if (lease.metadata?.deletionTimestamp) return `Lease ${name} is being deleted; its release is recorded`;
  if (st.phase === 'Releasing' || st.phase === 'Released' || st.phase === 'Failed') {
    const why = [st.endReason ?? st.reason, st.message].filter(Boolean).join(': ');
    return `Lease ${name} is ${st.phase}${why ? ` (${why})` : ''}; its release is recorded, so nothing runs on it`;
  }
  const expires = Date.parse(st.expiresAt ?? '');
  if (Number.isFinite(expires) && now >= expires) return `Lease ${name} reached its maxLifetime at ${st.expiresAt}`;
  if (st.phase !== 'Ready' && st.phase !== 'Idle') return `Lease ${name} is ${st.phase ?? 'not scheduled yet'}, not Ready`;
  const failed = failedCheckOf(lease);
  if (failed) return `Lease ${name} failed its latest check (${failed.reason}): ${failed.message}`;
  return undefined;
}

/**
 * Sets leasehold.dev/activity to now, with the resourceVersion of a read
 * that showed the Lease usable. The controller records a release with the
 * resourceVersion it decided on, so whichever write lands first wins: this
 * one, and the Lease gets a full idle window; or the release, and this is
 * refused (ExitError) before anything runs.
 */
export function markActivity(api: LeaseAPI, lease: Lease, now: () => number = Date.now): Promise<Lease> {
  return updateLease(api, lease, (l) => {
    const why = unusable(l, now());
    if (why) throw new ExitError(why, EXIT.leaseUnusable);
    return { metadata: { annotations: { [ACTIVITY_ANNOTATION]: new Date(now()).toISOString().replace(/\.\d+Z$/, 'Z') } } };
  });
}
