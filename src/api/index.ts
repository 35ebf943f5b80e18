// The Leasehold API: zod schemas, their TypeScript types, and the names of
// the kinds. The schemas are the one source of truth; crds/ is generated
// from them (see crd.ts).

export * from './common.js';
export * from './where.js';
export * from './duration.js';
export * from './offer.js';
export * from './lease.js';
export * from './peerfleet.js';
export * from './runnertarget.js';
export * from './runnertarget-github.js';
export * from './runnertarget-gce.js';
export * from './resources.js';
export { KINDS, renderCRDs, crdFor, crdFileName, crdName, structuralOf, type KindDefinition } from './crd.js';

