// The API group and version, apart from the schemas: the CLI names them in
// every request and must not load zod to.
export const GROUP = 'leasehold.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;
/** `kubectl get leasehold` lists every kind. */
export const CATEGORY = 'leasehold';
