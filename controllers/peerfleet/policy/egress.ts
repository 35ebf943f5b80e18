// Whether the PeerFleet's namespace keeps mirror Jobs from reaching our
// network. A lent Job runs someone else's code on our node: unless a
// NetworkPolicy denies its egress by default, it reaches every Service of
// ours and the clouds' metadata addresses (the node's cloud credentials). The
// policies an admin writes are read, never written: what mirrors may reach
// is the admin's choice, this only says whether a default deny is there.
import type { V1IPBlock, V1NetworkPolicy } from '@kubernetes/client-node';
import { selects } from '../../../src/kube/selector.js';
import { PEERFLEET_LABEL } from '../labels.js';

/**
 * Where clouds hand an instance (or a pod on it) its metadata and
 * credentials, in both address families: none may be reachable from a
 * mirror, whatever cloud the node runs in.
 */
export const METADATA_ADDRESSES: readonly { address: string; what: string }[] = [
  { address: '169.254.169.254', what: 'instance metadata: AWS, Google Cloud (metadata.google.internal), Azure, OpenStack, Oracle and more' },
  { address: '169.254.170.2', what: 'AWS ECS task metadata and credentials' },
  { address: '169.254.170.23', what: 'EKS Pod Identity credentials' },
  { address: '169.254.0.23', what: 'Tencent Cloud metadata' },
  { address: '100.100.100.200', what: 'Alibaba Cloud metadata' },
  { address: '168.63.129.16', what: 'Azure WireServer (extension settings)' },
  { address: 'fd00:ec2::254', what: 'AWS instance metadata over IPv6' },
  { address: 'fd00:ec2::23', what: 'EKS Pod Identity credentials over IPv6' },
  { address: 'fd20:ce::254', what: 'Google Cloud metadata over IPv6' },
];

interface Prefix {
  family: 4 | 6;
  /** The address as an integer of 32 or 128 bits. */
  base: bigint;
  bits: number;
}

const V4_PART = /^(0|[1-9][0-9]{0,2}|0[0-9]{1,2})$/;
const V6_GROUP = /^[0-9a-f]{1,4}$/;

function ipv4(ip: string): bigint | undefined {
  const parts = ip.split('.');
  if (parts.length !== 4 || !parts.every((p) => V4_PART.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
}

/** An IPv6 address, `::` compression and a dotted IPv4 tail allowed, as 128 bits. */
function ipv6(ip: string): bigint | undefined {
  let text = ip.toLowerCase();
  const lastColon = text.lastIndexOf(':');
  if (lastColon >= 0 && text.includes('.', lastColon)) {
    const v4 = ipv4(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    text = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (half: string) => (half === '' ? [] : half.split(':'));
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const present = head.length + tail.length;
  if (halves.length === 1 ? present !== 8 : present > 7) return undefined;
  const all = [...head, ...Array<string>(8 - present).fill('0'), ...tail];
  if (!all.every((g) => V6_GROUP.test(g))) return undefined;
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/**
 * A CIDR (or one address) of either family; undefined when unreadable. An
 * IPv4-mapped IPv6 prefix (::ffff:a.b.c.d/96 and longer) is read as the IPv4
 * prefix it stands for, as a dual-stack socket sends it.
 */
export function parsePrefix(text: string): Prefix | undefined {
  const [ip = '', bitsText, extra] = text.trim().split('/');
  if (extra !== undefined || (bitsText !== undefined && !/^[0-9]{1,3}$/.test(bitsText))) return undefined;
  const v4 = ipv4(ip);
  if (v4 !== undefined) {
    const bits = bitsText === undefined ? 32 : Number(bitsText);
    return bits <= 32 ? { family: 4, base: v4, bits } : undefined;
  }
  const v6 = ipv6(ip);
  const bits = bitsText === undefined ? 128 : Number(bitsText);
  if (v6 === undefined || bits > 128) return undefined;
  if (bits >= 96 && v6 >> 32n === 0xffffn) return { family: 4, base: v6 & 0xffffffffn, bits: bits - 96 };
  return { family: 6, base: v6, bits };
}

const holds = (p: Prefix, a: Prefix) => {
  if (p.family !== a.family) return false;
  const shift = BigInt((p.family === 4 ? 32 : 128) - p.bits);
  return p.base >> shift === a.base >> shift;
};

/** Whether the CIDR holds the address, in either family; an unreadable one holds nothing. */
export function cidrHolds(cidr: string, ip: string): boolean {
  const p = parsePrefix(cidr);
  const a = parsePrefix(ip);
  return !!p && !!a && holds(p, a);
}

const METADATA = METADATA_ADDRESSES.map((m) => ({ ...m, prefix: parsePrefix(m.address)! }));

/** The metadata addresses an ipBlock lets through; undefined when its CIDR cannot be read. */
function reached(block: V1IPBlock): typeof METADATA | undefined {
  const cidr = parsePrefix(block.cidr);
  if (!cidr) return undefined;
  const except = (block.except ?? []).map(parsePrefix).filter((e): e is Prefix => e !== undefined);
  return METADATA.filter((m) => holds(cidr, m.prefix) && !except.some((e) => holds(e, m.prefix)));
}

/** Why mirrors of this PeerFleet could reach out freely; undefined when a default deny holds. */
export function egressRefusal(namespace: string, fleet: string, policies: readonly V1NetworkPolicy[]): string | undefined {
  const mirrorLabels = { [PEERFLEET_LABEL]: fleet };
  const selecting = policies.filter((p) => p.metadata?.namespace === namespace && selects(p.spec?.podSelector as never, mirrorLabels) && (p.spec?.policyTypes ?? []).includes('Egress'));
  const example = `e.g. kubectl -n ${namespace} apply -f - <<'EOF'\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: default-deny-egress}\nspec: {podSelector: {}, policyTypes: [Egress]}\nEOF`;
  if (selecting.length === 0) {
    return `namespace ${namespace} has no NetworkPolicy that denies the egress of mirror Jobs by default; lent Jobs could reach our Services and the cloud metadata addresses; add one (${example}) and allow what mirrors need in policies of their own`;
  }
  for (const p of selecting) {
    for (const [i, rule] of (p.spec?.egress ?? []).entries()) {
      const at = `NetworkPolicy ${namespace}/${p.metadata?.name} spec.egress[${i}]`;
      if (!rule.to || rule.to.length === 0) return `${at} allows every destination to mirror Jobs, the cloud metadata addresses (${METADATA_ADDRESSES.map((m) => m.address).join(', ')}) included; list the destinations in spec.egress[${i}].to`;
      for (const [j, peer] of rule.to.entries()) {
        if (!peer.ipBlock) continue;
        const where = `${at}.to[${j}].ipBlock`;
        const through = reached(peer.ipBlock);
        // What cannot be read is taken to reach everything: the API server accepted it, so some CNI will too.
        if (!through) return `${where}.cidr ${JSON.stringify(peer.ipBlock.cidr)} cannot be read, so it may hold a cloud metadata address; write it as an IPv4 or IPv6 CIDR`;
        if (through.length === 0) continue;
        const names = through.map((m) => `${m.address} (${m.what})`).join(', ');
        const fix = through.map((m) => `${m.address}/${m.prefix.family === 4 ? 32 : 128}`).join(', ');
        return `${where} (cidr ${peer.ipBlock.cidr}) lets mirror Jobs reach the cloud metadata ${through.length === 1 ? 'address' : 'addresses'} ${names}; add ${fix} to its except`;
      }
    }
  }
  return undefined;
}
