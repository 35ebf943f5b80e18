// One reading of a PeerFleet's Secrets and its peer: the origin checked
// against the admin's list, the bearer token (and CA) read from the fleet's
// own namespace, then one namespaced list on the peer with that token. What
// it finds is the input of the readiness verdict (policy/verdict.ts); a Secret that
// is missing or a peer that refuses is a finding, never a thrown error.
import type { PeerFleet } from '../../src/api/index.js';
import { readSecretKey, SecretKeyError, type SecretDataReader } from '../../src/kube/secrets.js';
import { checkEndpoint, type EndpointPolicy } from '../../src/providers/endpoints.js';
import type { SecretField, VerdictInput } from './policy/verdict.js';

/** What a probe needs from the peer: one namespaced list with our token. */
export interface PeerProbe {
  probe(signal?: AbortSignal): Promise<void>;
}

/** The peer as the fleet's spec and Secrets name it. */
export interface PeerAccess {
  fleetKey: string;
  origin: string;
  namespace: string;
  token: string;
  caPEM?: string | undefined;
}

/** A reading of a PeerFleet's Secrets and peer. */
export interface Reading {
  input: VerdictInput;
  access?: PeerAccess | undefined;
}

export interface PeerReadingDeps {
  secrets: SecretDataReader;
  /** The peer origins an admin allowed (chart value peerFleet.allowedOrigins); an empty list allows none. */
  origins: EndpointPolicy;
  /** The peer queue for this access; may be cached by the caller while the access is unchanged. */
  peer(access: PeerAccess): PeerProbe;
  /** Why this PeerFleet is past the cap on PeerFleets in its namespace (policy/cap.ts); undefined when it is served. */
  overCap?(fleet: PeerFleet): string | undefined;
  /** Forgets what was kept for a fleet that is gone. */
  forget?(fleetKey: string): void;
}

const SECRET_USES = {
  'spec.credentialSecretRef': { field: 'spec.credentialSecretRef', what: 'the peer bearer token', defaultKey: 'token' },
  'spec.caSecretRef': { field: 'spec.caSecretRef', what: 'the PEM certificate authority of the peer', defaultKey: 'ca.crt' },
} as const;

export async function readPeer(deps: PeerReadingDeps, key: string, fleet: PeerFleet, signal?: AbortSignal): Promise<Reading> {
  const namespace = fleet.metadata!.namespace!;
  const input: VerdictInput = { namespace, spec: fleet.spec };
  // Before anything else: past the cap, a PeerFleet costs no Secret read,
  // no peer client and no watch, whatever its spec says.
  const overCap = deps.overCap?.(fleet);
  if (overCap !== undefined) {
    input.overCap = overCap;
    deps.forget?.(key);
    return { input };
  }
  // Before any Secret is read: a team that may write a PeerFleet chooses
  // its origin, and the token must never travel to a server the admin did
  // not list.
  const origin = checkEndpoint(fleet.spec.origin, deps.origins, 'spec.origin', 'peerFleet.allowedOrigins');
  if (!origin.allowed) {
    input.endpointNotAllowed = origin.reason;
    deps.forget?.(key);
    return { input };
  }
  const read = async (field: SecretField) => {
    const ref = field === 'spec.caSecretRef' ? fleet.spec.caSecretRef : fleet.spec.credentialSecretRef;
    if (!ref) return undefined;
    try {
      // The fleet's own namespace, whatever the reference says: a team that may
      // write a PeerFleet must not reach another namespace's Secrets.
      return await readSecretKey(deps.secrets, { name: ref.name, namespace, key: ref.key }, SECRET_USES[field]);
    } catch (err) {
      if (!(err instanceof SecretKeyError)) throw err;
      input.secret = { field, error: err };
      return undefined;
    }
  };
  const token = await read('spec.credentialSecretRef');
  if (input.secret || token === undefined) return { input };
  const caPEM = await read('spec.caSecretRef');
  if (input.secret) return { input };
  const access: PeerAccess = { fleetKey: key, origin: fleet.spec.origin, namespace: fleet.spec.namespace, token, caPEM };
  try {
    await deps.peer(access).probe(signal);
  } catch (err) {
    input.probeError = err;
  }
  return { input, access };
}
