import { describe, expect, it } from '@jest/globals';
import type { Receipt } from '../../../src/api/index.js';
import { launchingHosts, openReceipts, receiptFor, receiptID, requestIdFor, settled, withReceipt } from './receipts.js';
import { NOW, times } from '../testing/pool.js';

const r = (id: string, phase: Receipt['phase'], action: Receipt['action'] = 'Launch', hosts = [id]): Receipt => ({ id, action, phase, at: '2026-12-03T12:00:00Z', hosts });

describe('receipt identity', () => {
  it('receiptID is stable for the same intent and instant, and different otherwise', () => {
    expect(receiptID('Launch', ['a'], NOW)).toBe(receiptID('Launch', ['a'], NOW));
    expect(receiptID('Launch', ['a'], NOW)).toMatch(/^launch-[0-9a-f]{12}$/);
    const others = [receiptID('Launch', ['b'], NOW), receiptID('Delete', ['a'], NOW), receiptID('Launch', ['a'], NOW + 1)];
    expect(new Set([receiptID('Launch', ['a'], NOW), ...others]).size).toBe(4);
  });

  it('requestIdFor is a version 5 UUID, the same for the same receipt', () => {
    const id = requestIdFor('uid-1', 'launch-abc');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(requestIdFor('uid-1', 'launch-abc')).toBe(id);
    expect(requestIdFor('uid-2', 'launch-abc')).not.toBe(id);
    expect(id).not.toBe('00000000-0000-0000-0000-000000000000');
  });

  it.each<[Receipt['action'], boolean]>([
    ['Launch', true],
    ['Delete', true],
    ['Deregister', false],
    ['Register', false],
    ['RemoveRunner', false],
  ])('receiptFor gives a %s a requestId: %s', (action, has) => {
    const receipt = receiptFor({ action, hosts: ['a'] }, NOW, 'uid-1');
    expect(receipt.requestId).toBe(has ? requestIdFor('uid-1', receipt.id) : undefined);
  });

  it('receiptFor records an Intended receipt at now', () => {
    expect(receiptFor({ action: 'Delete', hosts: ['a'], requestId: 'x' }, NOW)).toEqual({
      id: receiptID('Delete', ['a'], NOW),
      action: 'Delete',
      phase: 'Intended',
      at: '2026-12-03T12:00:00Z',
      hosts: ['a'],
      requestId: 'x',
    });
  });
});

describe('withReceipt', () => {
  it.each<[string, Receipt[], Receipt, number, string[]]>([
    ['appends newest last', [r('a', 'Done')], r('b', 'Intended'), 64, ['a', 'b']],
    ['replaces a receipt of the same id', [r('a', 'Intended'), r('b', 'Done')], r('a', 'Done'), 64, ['b', 'a']],
    ['drops the oldest finished first', [r('a', 'Intended'), r('b', 'Done'), r('c', 'Failed')], r('d', 'Intended'), 3, ['a', 'c', 'd']],
    ['drops as many as needed', [r('a', 'Done'), r('b', 'Done'), r('c', 'Intended')], r('d', 'Intended'), 2, ['c', 'd']],
    ['only intended receipts: the oldest go', [r('a', 'Intended'), r('b', 'Intended')], r('c', 'Intended'), 2, ['b', 'c']],
  ])('%s', (_name, list, receipt, keep, ids) => {
    expect(withReceipt(list, receipt, keep).map((x) => x.id)).toEqual(ids);
  });

  it('keeps at most 64 by default and every Intended one', () => {
    const list = [r('open', 'Intended'), ...times(70, (i) => r(`done-${i}`, 'Done'))];
    const next = withReceipt(list, r('new', 'Intended'));
    expect(next).toHaveLength(64);
    expect(next[0]!.id).toBe('open');
    expect(next.at(-1)!.id).toBe('new');
  });
});

describe('settled and open receipts', () => {
  const list = [r('a', 'Intended'), r('b', 'Intended', 'Delete', ['x']), r('c', 'Done')];
  it('finishes one receipt with a message', () => {
    expect(settled(list, 'a', 'Failed', 'QUOTA_EXCEEDED')?.[0]).toEqual({ ...list[0], phase: 'Failed', message: 'QUOTA_EXCEEDED' });
  });
  it('an unknown id is refused', () => expect(settled(list, 'zzz', 'Done')).toBeUndefined());
  it('open receipts are the Intended ones', () => expect(openReceipts(list).map((x) => x.id)).toEqual(['a', 'b']));
  it('launching hosts come from open Launch receipts only', () => expect([...launchingHosts(list)]).toEqual(['a']));
});
