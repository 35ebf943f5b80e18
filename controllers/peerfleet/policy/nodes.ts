// Which of our nodes a PeerFleet may lend. The PeerFleet's selector is
// written by whoever may write the PeerFleet, possibly a team; node labels
// and taints are admin-only. So a node is lent only when an admin opted it
// in with a node label, and never when it is a control-plane node, cordoned,
// or carries a taint the admin did not let mirrors tolerate (another team's
// dedicated nodes are tainted for that team).
import type { LabelSelector } from '../../../src/api/index.js';
import type { V1Node, V1Taint, V1Toleration } from '@kubernetes/client-node';
import { deepEqual } from '../../../src/kube/mergepatch.js';
import { selects } from '../../../src/kube/selector.js';

/** The node label an admin sets to let PeerFleets lend the node. */
export const LENDABLE_NODE_LABEL = 'leasehold.dev/lendable';
const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'];

/** A taint an admin lets mirror Jobs tolerate (chart value peerFleet.tolerateTaints). */
export interface TaintRule {
  key: string;
  effect: 'NoSchedule' | 'NoExecute';
  /** For NoExecute: how long a mirror stays once the taint is added. */
  tolerationSeconds?: number;
}

const blocking = (t: V1Taint) => t.effect === 'NoSchedule' || t.effect === 'NoExecute';
const ruleFor = (t: V1Taint, rules: readonly TaintRule[]) => rules.find((r) => r.key === t.key && r.effect === t.effect);

/** Why the node is never lent, whatever a PeerFleet selects; undefined when an admin opted it in. */
export function nodeRefusal(node: V1Node, tolerate: readonly TaintRule[]): string | undefined {
  const name = node.metadata?.name ?? '';
  const labels = node.metadata?.labels ?? {};
  const cp = CONTROL_PLANE_LABELS.find((l) => l in labels);
  if (cp) return `node ${name} is a control-plane node (${cp}); control-plane nodes are never lent`;
  if (node.spec?.unschedulable) return `node ${name} is cordoned; it is lent again once uncordoned`;
  if (labels[LENDABLE_NODE_LABEL] !== 'true') return `node ${name} has no ${LENDABLE_NODE_LABEL}=true label; an admin opts a node in with kubectl label node ${name} ${LENDABLE_NODE_LABEL}=true`;
  const taint = (node.spec?.taints ?? []).find((t) => blocking(t) && !ruleFor(t, tolerate));
  if (taint) return `node ${name} has taint ${taint.key}:${taint.effect}, which the admin did not list in peerFleet.tolerateTaints`;
  return undefined;
}

/** The nodes the PeerFleet's selector picks among those an admin opted in. */
export function lendableNodes(nodes: readonly V1Node[], selector: LabelSelector, tolerate: readonly TaintRule[]): V1Node[] {
  return nodes.filter((n) => selects(selector, n.metadata?.labels ?? {}) && nodeRefusal(n, tolerate) === undefined);
}

/** Tolerations for the node's taints that the admin listed, and no others. */
export function tolerationsFor(node: V1Node, tolerate: readonly TaintRule[]): V1Toleration[] {
  return (node.spec?.taints ?? []).filter(blocking).flatMap((t) => {
    const rule = ruleFor(t, tolerate);
    if (!rule) return [];
    const base: V1Toleration = t.value ? { key: t.key, operator: 'Equal', value: t.value, effect: t.effect } : { key: t.key, operator: 'Exists', effect: t.effect };
    return [t.effect === 'NoExecute' && rule.tolerationSeconds !== undefined ? { ...base, tolerationSeconds: rule.tolerationSeconds } : base];
  });
}

/** Parses `key:Effect` or `key:NoExecute:seconds` entries, comma-separated (the flag's value). */
export function parseTaintRules(text: string, flag: string): TaintRule[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const [key = '', effect, seconds, ...rest] = entry.split(':');
      if (!/^([a-z0-9.-]+\/)?[A-Za-z0-9._-]{1,63}$/.test(key) || rest.length > 0) throw new Error(`${flag}: ${entry} must be key:NoSchedule or key:NoExecute:<seconds>`);
      if (effect === 'NoSchedule' && seconds === undefined) return { key, effect };
      // A NoExecute taint is there to move pods off: a mirror that tolerated it forever would never leave.
      if (effect === 'NoExecute' && seconds !== undefined && /^[0-9]{1,9}$/.test(seconds)) return { key, effect, tolerationSeconds: Number(seconds) };
      throw new Error(`${flag}: ${entry} must be key:NoSchedule or key:NoExecute:<seconds> (a NoExecute toleration always has tolerationSeconds)`);
    });
}

/**
 * Whether a Node update can change what a lending pass decides: its labels,
 * annotations, spec (cordon, taints), allocatable or deletion. The kubelet
 * (or KWOK) rewrites each node's status every few seconds for its
 * heartbeat; at 1,000 nodes that is dozens of updates a second, and a pass
 * over every node for each of them would take the controller's CPU from
 * the passes that claim.
 */
export function nodeChangeMatters(node: V1Node, old: V1Node): boolean {
  const m = node.metadata;
  const o = old.metadata;
  return !deepEqual(m?.labels, o?.labels)
    || !deepEqual(m?.annotations, o?.annotations)
    || String(m?.deletionTimestamp ?? '') !== String(o?.deletionTimestamp ?? '')
    || !deepEqual(node.spec, old.spec)
    || !deepEqual(node.status?.allocatable, old.status?.allocatable);
}
