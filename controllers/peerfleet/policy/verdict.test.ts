import { describe, expect, it } from '@jest/globals';
import { SecretKeyError } from '../../../src/kube/secrets.js';
import { PeerQueueError } from '../../../src/providers/peerqueue/errors.js';
import { judgeReadiness, readyCondition, type VerdictInput } from './verdict.js';

const spec = {
  origin: 'https://peer.example.com:6443',
  namespace: 'queue',
  credentialSecretRef: { name: 'peer-token', namespace: undefined, key: 'token' },
  caSecretRef: { name: 'peer-ca', namespace: 'ops', key: 'ca.crt' },
};
const base: VerdictInput = { namespace: 'lending', spec };
const secret = (field: 'spec.credentialSecretRef' | 'spec.caSecretRef', problem: SecretKeyError['problem']) => ({
  secret: { field, error: new SecretKeyError(problem, `Secret problem ${problem}`) },
});

describe('judgeReadiness', () => {
  it.each<[string, Partial<VerdictInput>, string, string | null, RegExp]>([
    ['the peer answered', {}, 'Ready', null, /^$/],
    ['past the cap on PeerFleets in its namespace, before anything else', { overCap: 'namespace lending has 5 PeerFleets and at most 4 are served', endpointNotAllowed: 'not allowed', probeError: new PeerQueueError('Unauthorized', 'x') }, 'TooManyPeerFleets', 'config', /^namespace lending has 5 PeerFleets/],
    ['the watch of the peer was cut off past its budget', { overBudget: 'the watch held 40 objects in 33.0 MiB, past the budget of 32 MiB', podSecurity: null }, 'PeerOverBudget', null, /^the watch held 40 objects in 33.0 MiB/],
    ['the peer refused the token, whatever the budget said before', { overBudget: 'cut off', probeError: new PeerQueueError('Unauthorized', 'Unauthorized') }, 'PeerRefused', null, /401/],
    ['the origin is not allowed, before anything else', { endpointNotAllowed: 'spec.origin https://x is not an endpoint the admin allowed', ...secret('spec.credentialSecretRef', 'SecretAbsent'), podSecurity: null }, 'EndpointNotAllowed', 'config', /spec.origin https:\/\/x is not an endpoint/],
    ['the token Secret is missing', secret('spec.credentialSecretRef', 'SecretAbsent'), 'SecretAbsent', null, /kubectl -n lending create secret generic peer-token --from-literal=token=<the peer ServiceAccount token>/],
    ['the token key is missing', secret('spec.credentialSecretRef', 'KeyAbsent'), 'KeyAbsent', null, /--from-literal=token=/],
    ['the CA Secret is missing, in its own namespace', secret('spec.caSecretRef', 'SecretAbsent'), 'SecretAbsent', null, /kubectl -n ops create secret generic peer-ca --from-file=ca.crt=<the peer CA, PEM>/],
    ['our API server refused the Secret read', secret('spec.credentialSecretRef', 'Forbidden'), 'NotAuthorized', null, /helm upgrade <release> <chart> --reuse-values --set 'secretNamespaces=\{…,lending\}'/],
    ['our API server did not answer', secret('spec.credentialSecretRef', 'Unreadable'), 'Unknown', 'infra_down', /tried again at the next poll/],
    ['the peer refused the token', { probeError: new PeerQueueError('Unauthorized', 'Unauthorized') }, 'PeerRefused', null, /401.*kubectl --context <peer> -n queue create token <service account>/],
    ['the peer forbids the list', { probeError: new PeerQueueError('Forbidden', 'forbidden') }, 'PeerRefused', null, /403.*create role leasehold-lender --verb=get,list,watch,patch --resource=jobs,jobs\/status/],
    ['the peer is down', { probeError: new PeerQueueError('Unreachable', 'connect ECONNREFUSED 10.0.0.1:6443', 'infra_down') }, 'PeerUnreachable', 'infra_down', /ECONNREFUSED.*curl -sk https:\/\/peer.example.com:6443\/readyz/],
    ['the peer certificate is not trusted', { probeError: new PeerQueueError('Unreachable', 'self-signed certificate', 'config') }, 'PeerUnreachable', 'config', /spec.caSecretRef: kubectl -n <namespace> create secret generic <name> --from-file=ca.crt=/],
    ['the origin is not an API server', { probeError: new PeerQueueError('NotFound', '404') }, 'PeerUnreachable', 'config', /set spec.origin/],
    ['anything else', { probeError: new Error('boom') }, 'Unknown', 'infra_down', /boom/],
    ['the namespace has no Pod Security label', { podSecurity: null }, 'NamespaceNotRestricted', 'config', /kubectl label namespace lending pod-security.kubernetes.io\/enforce=restricted --overwrite/],
    ['the namespace enforces baseline only', { podSecurity: 'baseline' }, 'NamespaceNotRestricted', 'config', /has pod-security.kubernetes.io\/enforce=baseline/],
    ['the namespace is restricted', { podSecurity: 'restricted' }, 'Ready', null, /^$/],
    ['the namespace has not been read yet', { namespaceUnread: true }, 'NamespaceNotRestricted', 'infra_down', /have not been read yet/],
    ['mirrors could reach out', { podSecurity: 'restricted', egress: 'no default deny' }, 'EgressNotDenied', 'config', /no default deny/],
    ['the label is judged before egress', { podSecurity: null, egress: 'no default deny' }, 'NamespaceNotRestricted', 'config', /restricted/],
    ['the peer fails first, then the namespace', { podSecurity: null, probeError: new PeerQueueError('Unauthorized', 'Unauthorized') }, 'PeerRefused', null, /401/],
  ])('%s: %s', (_name, over, code, failureClass, message) => {
    const v = judgeReadiness({ ...base, ...over });
    expect(v.code).toBe(code);
    expect(v.ready).toBe(code === 'Ready');
    expect(v.failureClass).toBe(failureClass ?? undefined);
    expect(v.reasons.join('\n')).toMatch(message);
  });

  it('a missing Secret is judged before the peer is asked', () => {
    expect(judgeReadiness({ ...base, ...secret('spec.credentialSecretRef', 'SecretAbsent'), probeError: new PeerQueueError('Unauthorized', 'x') }).code).toBe('SecretAbsent');
  });

  it('keeps each reason within the status limit', () => {
    const v = judgeReadiness({ ...base, probeError: new Error('x'.repeat(5000)) });
    expect(v.reasons[0]!.length).toBeLessThanOrEqual(1024);
  });
});

describe('readyCondition', () => {
  it('is True with reason Ready when ready', () => {
    expect(readyCondition(judgeReadiness(base))).toMatchObject({ type: 'Ready', status: 'True', reason: 'Ready' });
  });
  it('is False with the verdict as reason and the fix as message', () => {
    const v = judgeReadiness({ ...base, probeError: new PeerQueueError('Unauthorized', 'x') });
    expect(readyCondition(v)).toMatchObject({ type: 'Ready', status: 'False', reason: 'PeerRefused', message: expect.stringContaining('create token') });
  });
});
