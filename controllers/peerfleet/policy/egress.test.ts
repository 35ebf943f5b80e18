import { describe, expect, it } from '@jest/globals';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { cidrHolds, egressRefusal } from './egress.js';

const policy = (name: string, spec: V1NetworkPolicy['spec'], namespace = 'lend'): V1NetworkPolicy => ({ metadata: { name, namespace }, spec });
const denyAll = policy('default-deny-egress', { podSelector: {}, policyTypes: ['Egress'] });

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
    ['an allowance of the internet with the metadata address', [denyAll, policy('web', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] })], /reach the cloud metadata address 169.254.169.254; add 169.254.169.254\/32/],
    ['an allowance of the internet without it', [denyAll, policy('web', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '10.0.0.0/8'] } }] }] })], undefined],
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
  ])('%s holds %s: %s', (cidr, ip, want) => expect(cidrHolds(cidr, ip)).toBe(want));
});
