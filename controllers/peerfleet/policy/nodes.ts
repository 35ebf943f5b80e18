// Which of our nodes a PeerFleet may lend. The PeerFleet's selector is
// written by whoever may write the PeerFleet, possibly a team; node labels,
// annotations and taints are admin-only. So a node is lent only when an
// admin opted it in with a node label and, with a node annotation, for the
// PeerFleet's namespace (a label alone would let every team's PeerFleet take
// it); and never when it is a control-plane node, cordoned, or carries a
// taint the admin did not let mirrors tolerate (another team's dedicated
// nodes are tainted for that team).
import type { LabelSelector } from '../../../src/api/index.js';
import { DNS_LABEL_PATTERN } from '../../../src/api/common.js';
import type { V1Node, V1Taint, V1Toleration } from '@kubernetes/client-node';
import { deepEqual } from '../../../src/kube/mergepatch.js';
import { selects } from '../../../src/kube/selector.js';

/** The node label an admin sets to let PeerFleets lend the node. */
export const LENDABLE_NODE_LABEL = 'leasehold.dev/lendable';
/** The node annotation naming the namespaces whose PeerFleets may lend it: comma-separated names, or `*` for every namespace. */
export const LENDABLE_NAMESPACES_ANNOTATION = 'leasehold.dev/lendable-namespaces';
const NAMESPACE_NAME = new RegExp(DNS_LABEL_PATTERN);
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

/** The namespaces a node's annotation opts it in for; undefined when the node has no annotation. */
export interface LendableNamespaces {
  /** `*` is among the entries: every namespace. */
  any: boolean;
  namespaces: Set<string>;
  /** Entries that are not namespace names (DNS-1123 labels): ignored. */
  malformed: string[];
}

/** Reads the annotation's value: entries split on commas, whitespace around them and empty ones dropped. */
export function lendableNamespaces(node: V1Node): LendableNamespaces | undefined {
  const value = node.metadata?.annotations?.[LENDABLE_NAMESPACES_ANNOTATION];
  if (value === undefined) return undefined;
  const out: LendableNamespaces = { any: false, namespaces: new Set(), malformed: [] };
  for (const entry of value.split(',').map((e) => e.trim()).filter(Boolean)) {
    if (entry === '*') out.any = true;
    else if (entry.length <= 63 && NAMESPACE_NAME.test(entry)) out.namespaces.add(entry);
    else out.malformed.push(entry);
  }
  return out;
}

/** Why the node is never lent to any PeerFleet, whatever it selects; undefined when an admin opted it in for some namespace. */
function adminRefusal(node: V1Node, tolerate: readonly TaintRule[]): string | undefined {
  const name = node.metadata?.name ?? '';
  const labels = node.metadata?.labels ?? {};
  const cp = CONTROL_PLANE_LABELS.find((l) => l in labels);
  if (cp) return `node ${name} is a control-plane node (${cp}); control-plane nodes are never lent`;
  if (node.spec?.unschedulable) return `node ${name} is cordoned; it is lent again once uncordoned`;
  if (labels[LENDABLE_NODE_LABEL] !== 'true') return `node ${name} has no ${LENDABLE_NODE_LABEL}=true label; an admin opts a node in with kubectl label node ${name} ${LENDABLE_NODE_LABEL}=true and kubectl annotate node ${name} ${LENDABLE_NAMESPACES_ANNOTATION}=<namespace>`;
  const taint = (node.spec?.taints ?? []).find((t) => blocking(t) && !ruleFor(t, tolerate));
  if (taint) return `node ${name} has taint ${taint.key}:${taint.effect}, which the admin did not list in peerFleet.tolerateTaints`;
  return undefined;
}

/** Why the node is not lent to PeerFleets of `namespace` although an admin opted it in for lending; undefined when its annotation lists the namespace or `*`. */
export function namespaceRefusal(node: V1Node, namespace: string): string | undefined {
  const name = node.metadata?.name ?? '';
  const opted = lendableNamespaces(node);
  if (opted?.any || opted?.namespaces.has(namespace)) return undefined;
  const annotate = (value: string) => `kubectl annotate node ${name} ${LENDABLE_NAMESPACES_ANNOTATION}=${value}`;
  if (!opted) return `node ${name} is opted in for lending (${LENDABLE_NODE_LABEL}=true) but for no namespace: it has no ${LENDABLE_NAMESPACES_ANNOTATION} annotation, so PeerFleets of namespace ${namespace} do not lend it; an admin opts it in for ${namespace} with ${annotate(namespace)} (or * for every namespace)`;
  // A tenant reads this in its PeerFleet's status: the namespaces the node
  // is opted in for belong to other teams and are not named here.
  const bad = opted.malformed;
  const shown = bad.slice(0, 3).map((e) => JSON.stringify(e.slice(0, 63))).join(', ') + (bad.length > 3 ? `, and ${bad.length - 3} more` : '');
  const ignored = bad.length === 0 ? '' : `; its ${bad.length === 1 ? 'entry' : 'entries'} ${shown} ${bad.length === 1 ? 'is not a namespace name' : 'are not namespace names'} (DNS-1123 labels) and ${bad.length === 1 ? 'is' : 'are'} ignored`;
  const listed = opted.namespaces.size === 0
    ? `its ${LENDABLE_NAMESPACES_ANNOTATION} annotation names no namespace${ignored}; an admin opts it in for ${namespace} with ${annotate(namespace)} --overwrite`
    : `its ${LENDABLE_NAMESPACES_ANNOTATION} annotation does not list namespace ${namespace}${ignored}; an admin appends ${namespace} to that comma-separated list: ${annotate(`<the list>,${namespace}`)} --overwrite`;
  return `node ${name} is not opted in for lending to PeerFleets of namespace ${namespace}: ${listed}`;
}

/** Why the node is never lent to a PeerFleet of `namespace`, whatever it selects; undefined when an admin opted it in for that namespace. */
export function nodeRefusal(node: V1Node, namespace: string, tolerate: readonly TaintRule[]): string | undefined {
  return adminRefusal(node, tolerate) ?? namespaceRefusal(node, namespace);
}

/** Whether a PeerFleet of `namespace` with this selector lends the node. */
export function lends(node: V1Node, selector: LabelSelector, namespace: string, tolerate: readonly TaintRule[]): boolean {
  return selects(selector, node.metadata?.labels ?? {}) && nodeRefusal(node, namespace, tolerate) === undefined;
}

/** The nodes the PeerFleet's selector picks among those an admin opted in for its namespace. */
export function lendableNodes(nodes: readonly V1Node[], selector: LabelSelector, namespace: string, tolerate: readonly TaintRule[]): V1Node[] {
  return nodes.filter((n) => lends(n, selector, namespace, tolerate));
}

/**
 * The nodes the selector picks that an admin opted in for lending, but not
 * for `namespace`, by name, with why and the fix: the PeerFleet reports them
 * and lends none of them. Nodes refused for any other reason stay out of
 * its view, as before.
 */
export function notOptedInNodes(nodes: readonly V1Node[], selector: LabelSelector, namespace: string, tolerate: readonly TaintRule[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of nodes) {
    if (!selects(selector, n.metadata?.labels ?? {}) || adminRefusal(n, tolerate) !== undefined) continue;
    const why = namespaceRefusal(n, namespace);
    if (why) out.set(n.metadata?.name ?? '', why);
  }
  return out;
}

/**
 * The names of the nodes in `lent` that one of `others` (PeerFleets that
 * could start a session) would lend too: a holder Lease keeps only those
 * from another PeerFleet, so only there is it given up after a session.
 */
export function sharedNodes(lent: readonly V1Node[], others: readonly { selector: LabelSelector; namespace: string }[], tolerate: readonly TaintRule[]): Set<string> {
  return new Set(lent.filter((n) => others.some((f) => lends(n, f.selector, f.namespace, tolerate))).map((n) => n.metadata?.name ?? ''));
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
