import { describe, expect, it } from '@jest/globals';
import type { PeerFleet } from '../../../src/api/index.js';
import { capRefusal } from './cap.js';

const fleet = (namespace: string, name: string, created: string) => ({ metadata: { namespace, name, creationTimestamp: created } }) as unknown as PeerFleet;

describe('capRefusal', () => {
  const all = [
    fleet('ml', 'late', '2026-12-01T03:00:00Z'),
    fleet('ml', 'first', '2026-12-01T01:00:00Z'),
    fleet('ml', 'b-same', '2026-12-01T02:00:00Z'),
    fleet('ml', 'a-same', '2026-12-01T02:00:00Z'),
    fleet('other', 'elsewhere', '2026-12-01T00:00:00Z'),
  ];
  const served = (max: number) => all.filter((f) => capRefusal(f, all, { max }) === undefined).map((f) => `${f.metadata!.namespace}/${f.metadata!.name}`).sort();

  it.each([
    [0, ['ml/a-same', 'ml/b-same', 'ml/first', 'ml/late', 'other/elsewhere']],
    [4, ['ml/a-same', 'ml/b-same', 'ml/first', 'ml/late', 'other/elsewhere']],
    [3, ['ml/a-same', 'ml/b-same', 'ml/first', 'other/elsewhere']],
    [2, ['ml/a-same', 'ml/first', 'other/elsewhere']],
    [1, ['ml/first', 'other/elsewhere']],
  ])('with a cap of %d per namespace the oldest are served (ties by name), counted per namespace: %j', (max, want) => {
    expect(served(max)).toEqual(want);
  });

  it('names the namespace, the cap, the served PeerFleets and both fixes', () => {
    expect(capRefusal(all[0]!, all, { max: 2 })).toBe(
      'namespace ml has 4 PeerFleets and at most 2 are served in one namespace (first, a-same are, being the oldest); this one is not: no Secret is read and its peer is not watched; delete a PeerFleet of this namespace that is no longer needed, or ask an admin to raise the cap (chart value peerFleet.maxPerNamespace, controller flag --max-peerfleets-per-namespace)',
    );
  });

  it('serves a newer PeerFleet once an older one is gone', () => {
    const rest = all.filter((f) => f.metadata!.name !== 'first');
    expect(capRefusal(all[0]!, all, { max: 3 })).toBeDefined();
    expect(capRefusal(all[0]!, rest, { max: 3 })).toBeUndefined();
  });
});
