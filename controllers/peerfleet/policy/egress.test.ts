import { describe, expect, it } from '@jest/globals';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { cidrHolds, egressRefusal } from './egress.js';

const policy = (name: string, spec: V1NetworkPolicy['spec'], namespace = 'lend'): V1NetworkPolicy => ({ metadata: { name, namespace }, spec });
const denyAll = policy('default-deny-egress', { podSelector: {}, policyTypes: ['Egress'] });
const web = (...blocks: { cidr: string; except?: string[] }[]) => policy('web', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: blocks.map((ipBlock) => ({ ipBlock })) }] });
const V4_SAFE = { cidr: '0.0.0.0/0', except: ['169.254.169.254/32', '169.254.170.2/32', '169.254.170.23/32', '169.254.0.23/32', '100.100.100.200/32', '168.63.129.16/32'] };
const V6_SAFE = { cidr: '::/0', except: ['fd00:ec2::254/128', 'fd00:ec2::23/128', 'fd20:ce::254/128'] };

describe('egressRefusal', () => {
  it.each<[string, V1NetworkPolicy[], RegExp | undefined]>([
    ['no policy at all', [], /namespace lend has no NetworkPolicy that denies the egress of mirror Jobs by default.*policyTypes: \[Egress\]/s],
    ['a default deny of every pod', [denyAll], undefined],
    ['a default deny of this fleet\'s mirrors', [policy('mirrors', { podSelector: { matchLabels: { 'leasehold.dev/peerfleet': 'gpu' } }, policyTypes: ['Egress'] })], undefined],
    ['a deny of another fleet\'s mirrors only', [policy('other', { podSelector: { matchLabels: { 'leasehold.dev/peerfleet': 'other' } }, policyTypes: ['Egress'] })], /has no NetworkPolicy/],
    ['an ingress-only policy', [policy('in', { podSelector: {}, policyTypes: ['Ingress'] })], /has no NetworkPolicy/],
    ['a policy in another namespace', [policy('x', { podSelector: {}, policyTypes: ['Egress'] }, 'elsewhere')], /has no NetworkPolicy/],
    ['an allowance of DNS beside the deny', [denyAll, policy('dns', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: {} }], ports: [{ port: 53 as never, protocol: 'UDP' }] }] })], undefined],
    ['an allowance of everything', [denyAll, policy('open', { podSelector: {}, policyTypes: ['Egress'], egress: [{}] })], /NetworkPolicy lend\/open spec.egress\[0\] allows every destination/],
    ['an allowance of the internet with the metadata addresses', [denyAll, web({ cidr: '0.0.0.0/0' })],
      /NetworkPolicy lend\/web spec.egress\[0\].to\[0\].ipBlock \(cidr 0.0.0.0\/0\) lets mirror Jobs reach the cloud metadata addresses 169.254.169.254 \(instance metadata.*\), 169.254.170.2 .*; add 169.254.169.254\/32, 169.254.170.2\/32, 169.254.170.23\/32, 169.254.0.23\/32, 100.100.100.200\/32, 168.63.129.16\/32 to its except$/],
    ['an allowance of the internet without the link-local ones only', [denyAll, web({ cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '10.0.0.0/8'] })],
      /reach the cloud metadata addresses 100.100.100.200 \(Alibaba Cloud metadata\), 168.63.129.16 .*; add 100.100.100.200\/32, 168.63.129.16\/32 to its except$/],
    ['an allowance of the internet without any of them', [denyAll, web(V4_SAFE)], undefined],
    ['an allowance of a block holding Alibaba\'s address only', [denyAll, web({ cidr: '100.64.0.0/10' })], /reach the cloud metadata address 100.100.100.200 \(Alibaba Cloud metadata\); add 100.100.100.200\/32 to its except$/],
    ['the IPv6 internet with no except', [denyAll, web({ cidr: '::/0' })],
      /ipBlock \(cidr ::\/0\) lets mirror Jobs reach the cloud metadata addresses fd00:ec2::254 \(AWS instance metadata over IPv6\), fd00:ec2::23 .*, fd20:ce::254 .*; add fd00:ec2::254\/128, fd00:ec2::23\/128, fd20:ce::254\/128 to its except$/],
    ['the IPv6 internet without AWS\'s metadata only', [denyAll, web({ cidr: '::/0', except: ['fd00:ec2::254/128'] })], /reach the cloud metadata addresses fd00:ec2::23 .*, fd20:ce::254 .*; add fd00:ec2::23\/128, fd20:ce::254\/128 to its except$/],
    ['the IPv6 internet without any of them', [denyAll, web(V6_SAFE)], undefined],
    ['the IPv6 internet without the unique local block', [denyAll, web({ cidr: '::/0', except: ['fc00::/7'] })], undefined],
    ['except entries written out in full or in capitals', [denyAll, web({ cidr: '::/0', except: ['FD00:0EC2:0000:0000:0000:0000:0000:0254/128', 'fd00:ec2:0:0:0:0:0:23/128', 'FD20:CE::254/128'] })], undefined],
    ['AWS\'s IPv6 block', [denyAll, web({ cidr: 'fd00:ec2::/32' })], /reach the cloud metadata addresses fd00:ec2::254 .*, fd00:ec2::23 .*; add fd00:ec2::254\/128, fd00:ec2::23\/128 to its except$/],
    ['an IPv6 block holding no metadata address', [denyAll, web({ cidr: '2001:db8::/32' })], undefined],
    ['both families, AWS\'s IPv6 address excepted, Alibaba\'s not', [denyAll, web({ cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '168.63.129.16/32'] }, { cidr: '::/0', except: ['fd00:ec2::254/128', 'fd00:ec2::23/128', 'fd20:ce::254/128'] })],
      /to\[0\].ipBlock \(cidr 0.0.0.0\/0\) lets mirror Jobs reach the cloud metadata address 100.100.100.200 \(Alibaba Cloud metadata\); add 100.100.100.200\/32 to its except$/],
    ['both families, every address excepted', [denyAll, web(V4_SAFE, V6_SAFE)], undefined],
    ['the whole internet as docs/peerfleet.md writes it', [denyAll, web({ cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '169.254.0.0/16', '100.100.100.200/32', '168.63.129.16/32'] }, { cidr: '::/0', except: ['fc00::/7'] })], undefined],
    ['both families, the IPv6 side open', [denyAll, web(V4_SAFE, { cidr: '::/0', except: ['fd00:ec2::254/128'] })], /to\[1\].ipBlock \(cidr ::\/0\) lets mirror Jobs reach .*fd20:ce::254/],
    ['IPv4 written as IPv4-mapped IPv6', [denyAll, web({ cidr: '::ffff:0:0/96' })], /reach the cloud metadata addresses 169.254.169.254 .*; add 169.254.169.254\/32, .*168.63.129.16\/32 to its except$/],
    ['one mapped address', [denyAll, web({ cidr: '::ffff:169.254.169.254/128' })], /reach the cloud metadata address 169.254.169.254 \(instance metadata.*\); add 169.254.169.254\/32 to its except$/],
    ['a CIDR that cannot be read', [denyAll, web({ cidr: 'fd00::ec2::254/128' })], /to\[0\].ipBlock.cidr "fd00::ec2::254\/128" cannot be read, so it may hold a cloud metadata address/],
    ['an except that cannot be read excludes nothing', [denyAll, web({ cidr: '169.254.169.254/32', except: ['169.254.169.254/40'] })], /reach the cloud metadata address 169.254.169.254/],
  ])('%s', (_what, policies, why) => {
    const r = egressRefusal('lend', 'gpu', policies);
    if (why) expect(r).toMatch(why);
    else expect(r).toBeUndefined();
  });
});

describe('cidrHolds', () => {
  it.each<[string, string, boolean]>([
    ['169.254.169.254/32', '169.254.169.254', true],
    ['169.254.0.0/16', '169.254.169.254', true],
    ['0.0.0.0/0', '169.254.169.254', true],
    ['10.0.0.0/8', '169.254.169.254', false],
    ['::/0', '169.254.169.254', false],
    ['garbage', '169.254.169.254', false],
    ['169.254.169.254/33', '169.254.169.254', false],
    ['169.254.169.256/32', '169.254.169.254', false],
    ['169.254.169.254/', '169.254.169.254', false],
    ['169.254.169.0/24', '169.254.169.254', true],
    ['169.254.169.254/16', '169.254.169.254', true],
    ['::/0', 'fd00:ec2::254', true],
    ['0.0.0.0/0', 'fd00:ec2::254', false],
    ['fd00:ec2::/32', 'fd00:ec2::254', true],
    ['fd00:ec2::254/128', 'fd00:ec2::254', true],
    ['fd00:ec2::255/128', 'fd00:ec2::254', false],
    ['fd00:ec2:0:0:0:0:0:254/128', 'fd00:ec2::254', true],
    ['FD20:CE::254/128', 'fd20:ce::254', true],
    ['fd20:ce::/64', 'fd00:ec2::254', false],
    ['fc00::/7', 'fd20:ce::254', true],
    ['fe80::/10', 'fd20:ce::254', false],
    ['::ffff:169.254.0.0/112', '169.254.169.254', true],
    ['::ffff:a9fe:a9fe/128', '169.254.169.254', true],
    ['::ffff:0:0/96', '100.100.100.200', true],
    ['::ffff:0:0/95', '100.100.100.200', false],
    ['fd00::ec2::254/128', 'fd00:ec2::254', false],
    ['fd00:ec2::254/129', 'fd00:ec2::254', false],
    ['1:2:3:4:5:6:7:8:9/128', '1:2:3:4:5:6:7:8', false],
    ['1:2:3:4:5:6:7:8/128', '1:2:3:4:5:6:7:8', true],
    ['1:2:3:4:5:6:7/128', '1:2:3:4:5:6:7:0', false],
    ['fd00:ec2::12345/128', 'fd00:ec2::254', false],
  ])('%s holds %s: %s', (cidr, ip, want) => expect(cidrHolds(cidr, ip)).toBe(want));
});
