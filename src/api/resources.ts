// How to address each kind through the API server. The shape matches
// ResourceRef in src/kube/resource.ts (declared here structurally so the API
// package depends on nothing else in the project).

import { GROUP, VERSION } from './common.js';
import { LEASE_KIND, LEASE_PLURAL } from './lease.js';
import { OFFER_KIND, OFFER_PLURAL } from './offer.js';
import { PEERFLEET_KIND, PEERFLEET_PLURAL } from './peerfleet.js';
import { RUNNERTARGET_KIND, RUNNERTARGET_PLURAL } from './runnertarget.js';

export interface ApiResource {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export const LEASE_RESOURCE: ApiResource = {
  group: GROUP,
  version: VERSION,
  plural: LEASE_PLURAL,
  kind: LEASE_KIND,
  namespaced: true,
};
export const OFFER_RESOURCE: ApiResource = {
  group: GROUP,
  version: VERSION,
  plural: OFFER_PLURAL,
  kind: OFFER_KIND,
  namespaced: false,
};
export const PEERFLEET_RESOURCE: ApiResource = {
  group: GROUP,
  version: VERSION,
  plural: PEERFLEET_PLURAL,
  kind: PEERFLEET_KIND,
  namespaced: true,
};
export const RUNNERTARGET_RESOURCE: ApiResource = {
  group: GROUP,
  version: VERSION,
  plural: RUNNERTARGET_PLURAL,
  kind: RUNNERTARGET_KIND,
  namespaced: true,
};

export const RESOURCES = {
  Lease: LEASE_RESOURCE,
  Offer: OFFER_RESOURCE,
  PeerFleet: PEERFLEET_RESOURCE,
  RunnerTarget: RUNNERTARGET_RESOURCE,
} as const;
