// Whether the PeerFleet's namespace keeps mirror Jobs from reaching our
// network. A lent Job runs someone else's code on our node: unless a
// NetworkPolicy denies its egress by default, it reaches every Service of
// ours and the cloud metadata address (the node's cloud credentials). The
// policies an admin writes are read, never written: what mirrors may reach
// is the admin's choice, this only says whether a default deny is there.
import type { V1NetworkPolicy, V1NetworkPolicyPeer } from '@kubernetes/client-node';
import { selects } from '../../../src/kube/selector.js';
import { PEERFLEET_LABEL } from '../labels.js';

/** The cloud metadata address (AWS, GCP, Azure, OpenStack): never reachable from a mirror. */
export const METADATA_ADDRESS = '169.254.169.254';

const ipv4 = (ip: string): number | undefined => {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) return undefined;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
};

/** Whether an IPv4 CIDR holds the address; an IPv6 or unreadable one does not. */
export function cidrHolds(cidr: string, ip: string): boolean {
  const [base = '', bits = ''] = cidr.split('/');
  const net = ipv4(base);
  const addr = ipv4(ip);
  const len = Number(bits);
  if (net === undefined || addr === undefined || !Number.isInteger(len) || len < 0 || len > 32) return false;
  const mask = len === 0 ? 0 : (~0 << (32 - len)) >>> 0;
  return ((net & mask) >>> 0) === ((addr & mask) >>> 0);
}

const reachesMetadata = (peer: V1NetworkPolicyPeer) =>
  !!peer.ipBlock && cidrHolds(peer.ipBlock.cidr, METADATA_ADDRESS) && !(peer.ipBlock.except ?? []).some((e) => cidrHolds(e, METADATA_ADDRESS));

/** Why mirrors of this PeerFleet could reach out freely; undefined when a default deny holds. */
export function egressRefusal(namespace: string, fleet: string, policies: readonly V1NetworkPolicy[]): string | undefined {
  const mirrorLabels = { [PEERFLEET_LABEL]: fleet };
  const selecting = policies.filter((p) => p.metadata?.namespace === namespace && selects(p.spec?.podSelector as never, mirrorLabels) && (p.spec?.policyTypes ?? []).includes('Egress'));
  const example = `e.g. kubectl -n ${namespace} apply -f - <<'EOF'\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: default-deny-egress}\nspec: {podSelector: {}, policyTypes: [Egress]}\nEOF`;
  if (selecting.length === 0) {
    return `namespace ${namespace} has no NetworkPolicy that denies the egress of mirror Jobs by default; lent Jobs could reach our Services and the cloud metadata address; add one (${example}) and allow what mirrors need in policies of their own`;
  }
  for (const p of selecting) {
    for (const [i, rule] of (p.spec?.egress ?? []).entries()) {
      const at = `NetworkPolicy ${namespace}/${p.metadata?.name} spec.egress[${i}]`;
      if (!rule.to || rule.to.length === 0) return `${at} allows every destination to mirror Jobs, the cloud metadata address ${METADATA_ADDRESS} included; list the destinations in spec.egress[${i}].to`;
      if (rule.to.some(reachesMetadata)) return `${at} lets mirror Jobs reach the cloud metadata address ${METADATA_ADDRESS}; add ${METADATA_ADDRESS}/32 to the ipBlock's except`;
    }
  }
  return undefined;
}
