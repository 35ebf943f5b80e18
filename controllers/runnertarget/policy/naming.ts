// Host names: the pool's prefix and a suffix derived from the check and the
// launch's place in it, so the same plan names the same hosts, never one a
// host of the pool already has. A runner takes its host's name, which is
// how orphans and ghosts are paired.
import { createHash } from 'node:crypto';

/** Compute Engine instance names: a lowercase letter, then letters, digits and dashes, at most 63. */
const NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const PREFIX_MAX = 40;

/** spec.gce.namePrefix, else the RunnerTarget's name made a valid instance name prefix. */
export function namePrefix(targetName: string, configured?: string): string {
  if (configured) return configured;
  const cleaned = targetName.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^[^a-z]+/, '').slice(0, PREFIX_MAX).replace(/-+$/, '');
  return cleaned || 'runner';
}

/** `count` new names, none in `taken`. */
export function hostNames(prefix: string, seed: string, count: number, taken: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const name = `${prefix}-${createHash('sha256').update(`${seed}/${i}`).digest('hex').slice(0, 8)}`;
    if (!taken.has(name) && !out.includes(name) && NAME.test(name)) out.push(name);
  }
  return out;
}

/**
 * Whether a runner registration of the org is one of the pool's: named as
 * hostNames names hosts. Ghost removal only ever considers these, so the
 * org's other runners are never touched.
 */
export function isPoolRunner(name: string, prefix: string): boolean {
  return name.length > prefix.length + 1 && name.startsWith(`${prefix}-`) && /^[0-9a-f]{8}$/.test(name.slice(prefix.length + 1));
}

/**
 * Labels every runner of a target carries besides its job labels: the
 * target's UID and the installation. Names repeat (two targets with one
 * gce.namePrefix in other namespaces, or another installation on the same
 * org), so cleanup takes a runner as the pool's only when it carries both.
 */
export function ownerLabels(targetUID: string, installationID: string): string[] {
  return [`leasehold-target-${targetUID}`, `leasehold-installation-${installationID}`];
}

/** Whether a runner carries both owner labels of the pool (GitHub compares labels without case). */
export function ownsRunner(labels: readonly string[], owner: readonly string[]): boolean {
  const have = new Set(labels.map((l) => l.toLowerCase()));
  return owner.every((l) => have.has(l.toLowerCase()));
}
