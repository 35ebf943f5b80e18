// How to address each kind through the API server. The shape matches
// ResourceRef in src/kube/resource.ts (declared here structurally so the API
// package depends on nothing else in the project).

import { GROUP, VERSION } from './common.js';
import { LEASE_NAMES } from './lease.js';
import { OFFER_NAMES } from './offer.js';
import { PEERFLEET_NAMES } from './peerfleet.js';
import { RUNNERTARGET_NAMES } from './runnertarget.js';

export interface ApiResource {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

function resource(names: { plural: string; kind: string }, namespaced: boolean): ApiResource {
  return { group: GROUP, version: VERSION, plural: names.plural, kind: names.kind, namespaced };
}

export const LEASE_RESOURCE = resource(LEASE_NAMES, true);
export const OFFER_RESOURCE = resource(OFFER_NAMES, false);
export const PEERFLEET_RESOURCE = resource(PEERFLEET_NAMES, true);
export const RUNNERTARGET_RESOURCE = resource(RUNNERTARGET_NAMES, true);

export const RESOURCES = {
  Lease: LEASE_RESOURCE,
  Offer: OFFER_RESOURCE,
  PeerFleet: PEERFLEET_RESOURCE,
  RunnerTarget: RUNNERTARGET_RESOURCE,
} as const;
