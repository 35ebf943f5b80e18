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

describe('the filter grammar the emulator reads (filter.ts)', () => {
  // If a new pin words the grammar differently, filter.ts and the client's filterExpression need a look.
  it.each(['compute.instances.list', 'compute.instances.aggregatedList'])('is the one the filter parameter of %s describes', (id) => {
    const text = methodsOf(loadPinnedDocument()).get(id)!.parameters!.filter!.description!.replace(/\s+/g, ' ');
    for (const sentence of [
      'These two types of filter expressions cannot be mixed in one request.',
      'The value must be a string, a number, or a boolean. The operator must be either `=`, `!=`, `>`, `<`, `<=`, `>=` or `:`.',
      'The `:*` comparison can be used to test whether a key has been defined.',
      'To filter on multiple expressions, provide each separate expression within parentheses.',
      'By default, each expression is an `AND` expression. However, you can include `AND` and `OR` expressions explicitly.',
      'use the `eq` (equal) or `ne` (not equal) operator against a single un-parenthesized expression with or without quotes or against multiple parenthesized expressions.',
      'The literal value must match the entire field.',
      'You cannot combine constraints on multiple fields using regular expressions.',
    ]) {
      expect(text).toContain(sentence);
    }
  });
});
