// The emulator against the pinned Compute Engine discovery document
// (discovery.json; fetched by `make contracts`).
import { describe, it, expect } from '@jest/globals';
import { METHOD_QUERY_PARAMETERS, STANDARD_PARAMETERS } from './contract.js';
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

describe('the query parameters the emulator takes', () => {
  it('are, for each method it serves, exactly those the pinned document declares', () => {
    const doc = loadPinnedDocument();
    const methods = methodsOf(doc);
    expect([...STANDARD_PARAMETERS].sort()).toEqual(Object.keys(doc.parameters).sort());
    for (const [id, params] of Object.entries(METHOD_QUERY_PARAMETERS)) {
      const m = methods.get(id);
      expect(m).toBeDefined();
      const declared = Object.entries(m!.parameters ?? {}).filter(([, p]) => p.location === 'query').map(([k]) => k);
      expect({ [id]: Object.keys(params).sort() }).toEqual({ [id]: declared.sort() });
    }
  });

  it('leave out returnPartialSuccess for instances.aggregatedList, which revision 20261106 does not declare', () => {
    const m = methodsOf(loadPinnedDocument()).get('compute.instances.aggregatedList')!;
    expect(Object.keys(m.parameters ?? {})).not.toContain('returnPartialSuccess');
    expect(Object.keys(METHOD_QUERY_PARAMETERS['compute.instances.aggregatedList'])).not.toContain('returnPartialSuccess');
  });
});
