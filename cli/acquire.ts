// Getting a Lease for a run: reuse a matching one of this namespace (the
// spec: "a ready or launching lease of yours that already matches is
// reused, from any of your devices"), or create one; then wait, printing
// what the controller writes, until this device's key is on a Ready machine.
// A run waiting on a Lease that is not Ready yet is listed in its
// leasehold.dev/waiters annotation, so a run that stops while the Lease
// launches withdraws it only when no other run waits on it.
import { randomBytes } from 'node:crypto';
import { failedCheckOf } from '../src/api/check-failure.js';
import { API_VERSION } from '../src/api/group.js';
import type { Lease } from '../src/api/lease.js';
import { formatWhere, parseWhere } from '../src/api/where.js';
import { realClock, sleep } from '../src/kube/clock.js';
import { statusCode } from '../src/kube/errors.js';
import type { DeviceKey } from './device-key.js';
import { EXIT, ExitError, pendingExitCode } from './exit-codes.js';
import { answerLost, type LeaseAPI } from './leaseapi.js';
import { addDeviceKey, keyInstalled, nameOf, unusable, updateLease } from './lease-use.js';
import { span, type Progress } from './output.js';

export const WAITERS_ANNOTATION = 'leasehold.dev/waiters';
/** Set on Leases `leasehold run` creates: only those does a run withdraw (a Lease someone applied by hand is theirs to delete). */
export const CREATED_BY_ANNOTATION = 'leasehold.dev/created-by';
export const CREATED_BY_RUN = 'leasehold-run';

const POLL_MS = 250;

/** spec.where in canonical form, lower case, tools sorted: two spellings of one requirement compare equal. */
export function canonicalWhere(raw: string): string | undefined {
  const parsed = parseWhere(raw);
  if (!parsed.ok) return undefined;
  const value = { ...parsed.value, ...(parsed.value.tools ? { tools: [...parsed.value.tools].sort() } : {}) };
  return formatWhere(value).toLowerCase();
}

/**
 * The Lease a run reuses: a Ready, Idle or Launching one that asks for the
 * same where (and Offer, when named), and whose latest check did not fail;
 * Ready first, then the most recently active.
 */
export function reusable(leases: readonly Lease[], where: string, offer: string | undefined): Lease | undefined {
  const want = canonicalWhere(where);
  const rank = (l: Lease) => (l.status?.phase === 'Launching' ? 1 : 0);
  const active = (l: Lease) => Date.parse(l.status?.lastActivityAt ?? l.status?.readyAt ?? '') || 0;
  return leases
    .filter((l) => !l.metadata?.deletionTimestamp && ['Ready', 'Idle', 'Launching'].includes(l.status?.phase ?? '') && !failedCheckOf(l))
    .filter((l) => canonicalWhere(l.spec.where) === want && (offer === undefined || l.spec.offer === offer || l.status?.offer === offer))
    .sort((a, b) => rank(a) - rank(b) || active(b) - active(a))[0];
}

/** A name for a new Lease: the where requirement as a DNS label, and 4 random hex digits ("gpu-h100-7f3a"). */
export function leaseName(where: string, random = () => randomBytes(2).toString('hex')): string {
  const slug = where.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40).replace(/-+$/, '');
  return `${slug || 'lease'}-${random()}`;
}

export function waitersOf(lease: Lease): string[] {
  const raw = (lease.metadata?.annotations as Record<string, string> | undefined)?.[WAITERS_ANNOTATION] ?? '';
  return raw.split(',').filter(Boolean);
}

function setWaiters(waiters: string[]): Record<string, unknown> {
  return { metadata: { annotations: { [WAITERS_ANNOTATION]: waiters.length ? waiters.join(',') : null } } };
}

export interface Waiting {
  api: LeaseAPI;
  progress: Progress;
  /** This run's ID in the waiters annotation. */
  runID: string;
  signal: AbortSignal;
}

/**
 * Creates the Lease. An answer that is lost is asked once more (an
 * AlreadyExists then means the first request made it: the random name is
 * this run's); lost again, or refused after a lost one, the Lease may exist
 * with nobody told, so it is withdrawn and the run fails.
 */
export async function createLease(w: Waiting, lease: Lease): Promise<Lease> {
  const ns = lease.metadata!.namespace!;
  const name = nameOf(lease);
  try {
    return await w.api.create(lease);
  } catch (err) {
    if (!answerLost(err)) throw err;
  }
  w.progress.note(`no answer from the API server to creating Lease ${name}; asking once more`);
  try {
    return await w.api.create(lease);
  } catch (err) {
    if (statusCode(err) === 409) {
      const made = await w.api.get(ns, name);
      if (made) return made;
    }
    await w.api.delete(ns, name).catch(() => false);
    const why = answerLost(err) ? 'no answer again' : `refused: ${err instanceof Error ? err.message : String(err)}`;
    throw new ExitError(`creating Lease ${name}: ${why}; it may have been made with nobody told, so it was withdrawn (deleted). Run again`, EXIT.runFailed);
  }
}

export function newLease(ns: string, name: string, where: string, offer: string | undefined, key: DeviceKey, runID: string): Lease {
  return {
    apiVersion: API_VERSION,
    kind: 'Lease',
    metadata: { name, namespace: ns, annotations: { [CREATED_BY_ANNOTATION]: CREATED_BY_RUN, [WAITERS_ANNOTATION]: runID } },
    spec: { where, ...(offer ? { offer } : {}), sshKeys: [key.publicKey] },
  } as Lease;
}

/**
 * Waits until this device's key is installed on the Lease's Ready machine,
 * showing the controller's progress. Throws ExitError when the Lease cannot
 * become usable (refused, failed, deleted).
 */
export async function waitUsable(w: Waiting, lease: Lease, key: DeviceKey, created: boolean): Promise<Lease> {
  let current = lease;
  let joined = false;
  let lastMessage: string | undefined;
  let lastPhase: string | undefined;
  const started = Date.now();
  try {
    for (;;) {
      const st = current.status ?? {};
      if (st.phase !== lastPhase) {
        lastPhase = st.phase;
        if (st.phase === 'Launching' && st.offer) w.progress.note(`Lease ${nameOf(current)}: Offer ${st.offer}${st.instanceType ? ` (${st.instanceType})` : ''}${st.pricePerHour === undefined ? '' : `, $${st.pricePerHour.toFixed(2)}/h`}; launching`);
      }
      if (keyInstalled(current, key)) {
        if (created || joined) w.progress.note(`Lease ${nameOf(current)} ready after ${span(Date.now() - started)}${describe(current)}`);
        return current;
      }
      if (st.message && st.message !== lastMessage) {
        lastMessage = st.message;
        w.progress.step(`${nameOf(current)}: ${st.message}`);
      }
      const refused = st.phase === 'Pending' ? pendingExitCode(st.reason) : undefined;
      if (refused !== undefined) {
        // A refused Lease left Pending would launch once the limit clears, billing with nobody waiting.
        const withdrawn = await leave(w, current, true);
        joined = false;
        throw new ExitError(`Lease ${nameOf(current)} cannot be scheduled (${st.reason}): ${st.message ?? ''}${withdrawn ? '; withdrew it' : ''}`, refused);
      }
      if (st.phase === 'Ready' || st.phase === 'Idle') {
        // A machine whose latest check failed is not run on, even by name: say why rather than wait on it.
        const failed = failedCheckOf(current);
        if (failed) throw new ExitError(unusable(current, Date.now())!, EXIT.leaseUnusable);
        current = await addDeviceKey(w.api, current, key);
      } else if (st.phase === 'Pending' || st.phase === 'Launching' || st.phase === undefined) {
        if (!joined) {
          current = await updateLease(w.api, current, (l) => (waitersOf(l).includes(w.runID) ? undefined : setWaiters([...waitersOf(l), w.runID])));
          current = await addDeviceKey(w.api, current, key);
          joined = true;
        }
      } else {
        throw new ExitError(unusable(current, Date.now()) ?? `Lease ${nameOf(current)} is ${st.phase}`, EXIT.leaseUnusable);
      }
      await sleep(realClock, POLL_MS, w.signal);
      w.signal.throwIfAborted();
      const again = await w.api.get(current.metadata!.namespace!, nameOf(current));
      if (!again) throw new ExitError(`Lease ${nameOf(current)} was deleted while this run waited for it`, EXIT.leaseUnusable);
      current = again;
    }
  } finally {
    // Ready or not, this run no longer waits; what happens to the Lease then is leave()'s to decide.
    if (joined && !w.signal.aborted) await leave(w, current, false).catch(() => undefined);
  }
}

/**
 * Takes this run off the Lease's waiters. With `withdraw`, a Lease that
 * `leasehold run` created and that is still Pending or Launching is deleted
 * when no other run waits on it, so a cancelled run never leaves a machine
 * billing; the delete is conditional on the resourceVersion that showed no
 * waiter, so a run that joins meanwhile keeps it. Returns whether it was withdrawn.
 */
export async function leave(w: Pick<Waiting, 'api' | 'runID'>, lease: Lease, withdraw: boolean): Promise<boolean> {
  const ns = lease.metadata!.namespace!;
  const name = nameOf(lease);
  let current: Lease | undefined = lease;
  for (;;) {
    current = await w.api.get(ns, name);
    if (!current) return false;
    current = await updateLease(w.api, current, (l) => (waitersOf(l).includes(w.runID) ? setWaiters(waitersOf(l).filter((id) => id !== w.runID)) : undefined));
    const ours = (current.metadata?.annotations as Record<string, string> | undefined)?.[CREATED_BY_ANNOTATION] === CREATED_BY_RUN;
    const launching = ['Pending', 'Launching', undefined].includes(current.status?.phase);
    if (!withdraw || !ours || !launching || waitersOf(current).length > 0) return false;
    try {
      return await w.api.delete(ns, name, current.metadata?.resourceVersion);
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
  }
}

function describe(lease: Lease): string {
  const f = lease.status?.facts;
  if (!f) return '';
  const gpu = f.gpus ? `, ${f.gpus}x ${f.gpuModel ?? 'GPU'}${f.vramGiB ? ` (${f.vramGiB} GiB)` : ''}` : '';
  return ` (${f.os ?? '?'}/${f.arch ?? '?'}, ${f.cpus ?? '?'} cpu${gpu})`;
}

