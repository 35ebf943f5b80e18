// The readiness verdict: whether this PeerFleet can lend, from what reading
// its Secrets and one namespaced list on the peer found. The verdict becomes
// status.verdict and the Ready condition's reason; every message carries the
// command that fixes it, since the reader is a platform admin at kubectl.
// Secret values never reach a message.
import type { PeerFleetSpec } from '../../../src/api/index.js';
import type { ConditionInput } from '../../../src/kube/conditions.js';
import type { SecretKeyError } from '../../../src/kube/secrets.js';
import { isPeerQueueError, type FailureClass } from '../../../src/providers/peerqueue/errors.js';

export const VERDICT_CODES = ['Ready', 'EndpointNotAllowed', 'PeerRefused', 'SecretAbsent', 'KeyAbsent', 'NotAuthorized', 'PeerUnreachable', 'NamespaceNotRestricted', 'EgressNotDenied', 'TooManyPeerFleets', 'PeerOverBudget', 'Unknown'] as const;
export type VerdictCode = (typeof VERDICT_CODES)[number];

export interface Verdict {
  ready: boolean;
  code: VerdictCode;
  /** Why the fleet cannot lend and what to run; empty when ready. */
  reasons: string[];
  /** For PeerUnreachable and Unknown: wait (infra_down) or fix the spec (config). */
  failureClass?: FailureClass;
}

/** Which Secret reference failed to resolve. */
export type SecretField = 'spec.credentialSecretRef' | 'spec.caSecretRef';

export interface VerdictInput {
  /** The PeerFleet's namespace (where its Secrets default to) and spec. */
  namespace: string;
  spec: Pick<PeerFleetSpec, 'origin' | 'namespace' | 'credentialSecretRef' | 'caSecretRef'>;
  /** Why this PeerFleet is past the admin's cap on PeerFleets in its namespace; nothing was read and the peer was not asked. */
  overCap?: string;
  /** Why the watch of the peer queue was cut off past its budget (what it held, the budget, when it is watched again). */
  overBudget?: string;
  /** Why the admin's allow-list refuses spec.origin; no Secret was read and the peer was not asked. */
  endpointNotAllowed?: string;
  /** A Secret that did not resolve; the probe never ran. */
  secret?: { field: SecretField; error: SecretKeyError };
  /** What the peer answered a namespaced list of Jobs with our token: undefined for an answer, else the error. */
  probeError?: unknown;
  /** The PeerFleet namespace's pod-security.kubernetes.io/enforce label; undefined when lending is off. */
  podSecurity?: string | null;
  /** With lending on: the namespace has not been read yet, so its label is not known. */
  namespaceUnread?: boolean;
  /** With lending on: why mirrors' egress is not denied by default (egress.ts); undefined when it is, or lending is off. */
  egress?: string;
}

/** The Pod Security label a PeerFleet's namespace must carry: mirrors run there. */
export const POD_SECURITY_LABEL = 'pod-security.kubernetes.io/enforce';

const MAX_MESSAGE = 1024;
const clip = (s: string) => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 1)}…` : s);

function verdict(code: Exclude<VerdictCode, 'Ready'>, message: string, failureClass?: FailureClass): Verdict {
  return { ready: false, code, reasons: [clip(message)], ...(failureClass ? { failureClass } : {}) };
}

export function judgeReadiness(input: VerdictInput): Verdict {
  if (input.overCap !== undefined) return verdict('TooManyPeerFleets', input.overCap, 'config');
  if (input.endpointNotAllowed !== undefined) return verdict('EndpointNotAllowed', input.endpointNotAllowed, 'config');
  if (input.secret) return secretVerdict(input, input.secret.field, input.secret.error);
  if (input.probeError !== undefined) return peerVerdict(input, input.probeError);
  if (input.overBudget !== undefined) return verdict('PeerOverBudget', input.overBudget);
  // Checked after the peer, so that a namespace fixed first shows the next problem at once.
  // Until the namespace was read its label is not known: lending waits rather than assume it.
  if (input.namespaceUnread) {
    return verdict('NamespaceNotRestricted', `the labels of namespace ${input.namespace} have not been read yet; lending waits until they show ${POD_SECURITY_LABEL}=restricted`, 'infra_down');
  }
  if (input.podSecurity !== undefined && input.podSecurity !== 'restricted') {
    const now = input.podSecurity === null ? 'has no such label' : `has ${POD_SECURITY_LABEL}=${input.podSecurity}`;
    return verdict('NamespaceNotRestricted', `peer Jobs run as mirror Jobs in namespace ${input.namespace}, which ${now}; lending needs the restricted Pod Security Standard there: kubectl label namespace ${input.namespace} ${POD_SECURITY_LABEL}=restricted --overwrite`, 'config');
  }
  if (input.egress !== undefined) return verdict('EgressNotDenied', input.egress, 'config');
  return { ready: true, code: 'Ready', reasons: [] };
}

function secretVerdict({ namespace, spec }: VerdictInput, field: SecretField, error: SecretKeyError): Verdict {
  const ref = field === 'spec.caSecretRef' ? spec.caSecretRef : spec.credentialSecretRef;
  const ns = ref?.namespace || namespace;
  const name = ref?.name ?? '';
  const ca = field === 'spec.caSecretRef';
  const key = ref?.key || (ca ? 'ca.crt' : 'token');
  const value = ca ? `--from-file=${key}=<the peer CA, PEM>` : `--from-literal=${key}=<the peer ServiceAccount token>`;
  const create = `kubectl -n ${ns} create secret generic ${name} ${value} --dry-run=client -o yaml | kubectl apply -f -`;
  switch (error.problem) {
    case 'SecretAbsent':
      return verdict('SecretAbsent', `${error.message}: ${create}`);
    case 'KeyAbsent':
      return verdict('KeyAbsent', `${error.message}: ${create}`);
    case 'Forbidden':
      return verdict(
        'NotAuthorized',
        `${error.message}: helm upgrade <release> <chart> --reuse-values --set 'secretNamespaces={…,${ns}}' (our API server refused the controller's read of ${field})`,
      );
    case 'Unreadable':
      return verdict('Unknown', `${error.message}; our API server did not answer the read of ${field}, and it is tried again at the next poll`, 'infra_down');
  }
}

function peerVerdict({ spec }: VerdictInput, err: unknown): Verdict {
  const peer = `the peer API server at ${spec.origin}`;
  const token = `kubectl --context <peer> -n ${spec.namespace} create token <service account> --duration=8760h`;
  if (isPeerQueueError(err, 'Unauthorized')) {
    return verdict('PeerRefused', `${peer} refused our token (401: expired, revoked or from another cluster); make a new one on the peer with ${token} and store it in the Secret named by spec.credentialSecretRef`);
  }
  if (isPeerQueueError(err, 'Forbidden')) {
    return verdict(
      'PeerRefused',
      `${peer} does not let our token list Jobs in namespace ${spec.namespace} (403); on the peer: kubectl -n ${spec.namespace} create role leasehold-lender --verb=get,list,watch,patch --resource=jobs,jobs/status && kubectl -n ${spec.namespace} create rolebinding leasehold-lender --role=leasehold-lender --serviceaccount=${spec.namespace}:<service account>`,
    );
  }
  if (isPeerQueueError(err, 'NotFound')) {
    return verdict('PeerUnreachable', `${peer} does not serve the Kubernetes batch/v1 API (404); set spec.origin to the API server URL, e.g. https://peer.example.com:6443`, 'config');
  }
  if (isPeerQueueError(err, 'Unreachable')) {
    if (err.failureClass === 'config') {
      return verdict(
        'PeerUnreachable',
        `${peer} could not be verified or named (${err.message}); if a private CA signed it, store that CA and name it in spec.caSecretRef: kubectl -n <namespace> create secret generic <name> --from-file=ca.crt=<the peer CA, PEM>; otherwise fix spec.origin`,
        'config',
      );
    }
    return verdict('PeerUnreachable', `${peer} did not answer (${err.message}); it is tried again at the next poll; check it with curl -sk ${spec.origin}/readyz`, 'infra_down');
  }
  const text = err instanceof Error ? err.message : String(err);
  return verdict('Unknown', `${peer} answered the list of Jobs in namespace ${spec.namespace} with an error (${text}); it is tried again at the next poll`, 'infra_down');
}

/** The Ready condition for a verdict: its reason is the verdict code. */
export function readyCondition(v: Verdict): ConditionInput {
  if (v.ready) return { type: 'Ready', status: 'True', reason: 'Ready', message: 'the peer API server answered with our token' };
  return { type: 'Ready', status: 'False', reason: v.code, message: clip(v.reasons.join('; ')) };
}
