// The emulator against the pinned Compute Engine discovery document
// (discovery.json; fetched by `make contracts`).
import { describe, it, expect } from '@jest/globals';
import { DISCOVERY_PIN, loadPinnedDocument, methodForRequest, methodsOf, pinnedDocumentPath } from './discovery.js';

describe('the pinned discovery document', () => {
  it('is the revision discovery.json names, cached under the build cache', () => {
    const doc = loadPinnedDocument();
    expect(doc.revision).toBe(DISCOVERY_PIN.revision);
    expect(doc.version).toBe('v1');
    expect(pinnedDocumentPath({ LEASEHOLD_CACHE: '/c' })).toBe(`/c/specs/google.golang.org/api@${DISCOVERY_PIN.version}/compute/v1/compute-api.json`);
    expect(pinnedDocumentPath({ HOME: '/h', XDG_CACHE_HOME: '/x' })).toBe(`/x/leasehold/specs/google.golang.org/api@${DISCOVERY_PIN.version}/compute/v1/compute-api.json`);
  });

  it('finds the method of a request by its path template, one segment per parameter', () => {
    const doc = loadPinnedDocument();
    expect(methodsOf(doc).get('compute.instances.list')?.path).toBe('projects/{project}/zones/{zone}/instances');
    expect(methodForRequest(doc, 'GET', '/projects/p/zones/z/instances')?.id).toBe('compute.instances.list');
    expect(methodForRequest(doc, 'GET', 'projects/p/zones/z/instances/vm-1')?.id).toBe('compute.instances.get');
    expect(methodForRequest(doc, 'GET', 'projects/p/zones/z/instances/vm-1/getGuestAttributes')?.id).toBe('compute.instances.getGuestAttributes');
    expect(methodForRequest(doc, 'GET', 'projects/p/aggregated/instances')?.id).toBe('compute.instances.aggregatedList');
    expect(methodForRequest(doc, 'PATCH', 'projects/p/zones/z/instances/vm-1/nothing')).toBeUndefined();
  });
});
