import { describe, expect, it } from '@jest/globals';
import type { Lease, Offer } from '../../../src/api/index.js';
import { Refusals, schedule, Slots, type Slot } from './pending.js';
import { slotsByScan } from '../testing/slots-scan.js';
import { at, leaseWith, NOW } from '../testing/phase-input.js';

const box = {
  metadata: { name: 'box', generation: 3 },
  spec: { command: { acquire: ['/a'], release: ['/r'], shape: { os: 'linux', arch: 'amd64', cpus: 4 } }, pricePerHour: 1.5, idleTimeout: '10m', maxLifetime: '2h' },
} as unknown as Offer;
const pending = (where = 'cpus>=2', extra: Partial<Lease['spec']> = {}, meta = {}) => ({ ...leaseWith({}, meta), spec: { where, sshKeys: [], ...extra } }) as Lease;

describe('schedule', () => {
  it.each([
    ['deleted before anything was rented', pending('cpus>=2', {}, { deletionTimestamp: at(0) }), [box], 0, { event: { type: 'DELETE_REQUESTED' } }],
    ['where that cannot parse', pending('gpus>=lots'), [box], 0, { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: expect.stringContaining('spec.where') } }],
    ['a device key that is no key', pending('cpus>=2', { sshKeys: ['ssh-ed25519 AAAA'] }), [box], 0, { event: { type: 'UNSCHEDULABLE', reason: 'InvalidSpec', message: expect.stringContaining('spec.sshKeys[0]') } }],
    ['no Offer can serve it', pending('cpus>=64'), [box], 0, { event: { type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer' }, status: { parsedWhere: expect.anything() } }],
    ['maxLeases reached', pending(), [box], 2, { event: { type: 'UNSCHEDULABLE', reason: 'MaxLeases', message: expect.stringContaining('maxLeases is 2') } }],
  ])('%s', (_name, lease, offers, active, want) => {
    expect(schedule({ lease, offers, active, maxLeases: 2, installationID: 'inst0001', now: NOW, random: () => 0 })).toMatchObject(want);
  });

  it('chooses the Offer and records the launch intent, maxLifetime counted from now', () => {
    const obs = schedule({ lease: pending(), offers: [box], active: 1, maxLeases: 2, installationID: 'inst0001', now: NOW, random: () => 0 });
    expect(obs.event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'box', message: 'leasing box at $1.50/h' });
    expect(obs.status).toMatchObject({
      offer: 'box',
      pricePerHour: 1.5,
      leaseID: '0123abcd',
      machineName: 'leasehold-inst0001-0123abcd',
      launch: { attempt: 1, startedAt: at(0), offerGeneration: 3 },
      release: { provider: 'command', command: ['/r'] },
      idleTimeout: '10m',
      expiresAt: at(2 * 3600_000),
      parsedWhere: expect.anything(),
    });
  });

  it('names the machine after the installation and the lease, so another installation on the same account never takes it for its own', () => {
    const mine = schedule({ lease: pending(), offers: [box], active: 0, maxLeases: 2, installationID: 'inst0001', now: NOW, random: () => 0 });
    const theirs = schedule({ lease: pending(), offers: [box], active: 0, maxLeases: 2, installationID: 'other002', now: NOW, random: () => 0 });
    expect(mine.status?.machineName).toBe('leasehold-inst0001-0123abcd');
    expect(theirs.status?.machineName).toBe('leasehold-other002-0123abcd');
    expect(mine.status!.machineName!.length).toBeLessThanOrEqual(64);
  });
});

describe('schedule: namespaces', () => {
  const offer = (name: string, price: number, extra: Partial<Offer['spec']> = {}) => ({ ...box, metadata: { name, generation: 1 }, spec: { ...box.spec, pricePerHour: price, ...extra } }) as Offer;
  type Here = { labels: Record<string, string>; activeOffers: string[] };
  const ml: Here = { labels: { team: 'ml' }, activeOffers: [] };
  const run = (offers: Offer[], namespace = ml, extra: { maxLeasesPerNamespace?: number; lease?: Lease } = {}) =>
    schedule({ lease: extra.lease ?? pending(), offers, active: 0, maxLeases: 10, installationID: 'inst0001', namespace, maxLeasesPerNamespace: extra.maxLeasesPerNamespace, now: NOW, random: () => 0 });

  it.each<[string, Offer[], Here, number | undefined, Record<string, unknown>]>([
    ['an empty selector selects every namespace', [offer('any', 1, { namespaceSelector: {} })], ml, undefined, { event: { type: 'OFFER_CHOSEN', offer: 'any' } }],
    ['a selector that selects the namespace', [offer('mine', 1, { namespaceSelector: { matchLabels: { team: 'ml' } } })], ml, undefined, { event: { type: 'OFFER_CHOSEN', offer: 'mine' } }],
    [
      'a selector that does not',
      [offer('theirs', 1, { namespaceSelector: { matchLabels: { team: 'web' } } })],
      ml,
      undefined,
      { event: { type: 'UNSCHEDULABLE', reason: 'NamespaceNotAllowed', message: expect.stringContaining('spec.namespaceSelector of Offer theirs does not select namespace ns') } },
    ],
    ['a cheaper Offer the namespace may not use is passed over', [offer('theirs', 0.1, { namespaceSelector: { matchLabels: { team: 'web' } } }), offer('mine', 1)], ml, undefined, { event: { type: 'OFFER_CHOSEN', offer: 'mine' } }],
    [
      "the Offer's cap for the namespace reached",
      [offer('box', 1, { maxLeasesPerNamespace: 1 })],
      { labels: {}, activeOffers: ['box'] },
      undefined,
      { event: { type: 'UNSCHEDULABLE', reason: 'MaxLeasesPerNamespace', message: expect.stringContaining('spec.maxLeasesPerNamespace is 1') } },
    ],
    ["the Offer's cap counts only its own Leases", [offer('box', 1, { maxLeasesPerNamespace: 1 })], { labels: {}, activeOffers: ['other'] }, undefined, { event: { type: 'OFFER_CHOSEN' } }],
    [
      "the controller's cap for the namespace reached",
      [offer('box', 1)],
      { labels: {}, activeOffers: ['a', 'b'] },
      2,
      { event: { type: 'UNSCHEDULABLE', reason: 'MaxLeasesPerNamespace', message: expect.stringContaining("the controller's maxLeasesPerNamespace is 2") } },
    ],
    ["the controller's cap not reached", [offer('box', 1)], { labels: {}, activeOffers: ['a'] }, 2, { event: { type: 'OFFER_CHOSEN' } }],
    ["0 is no cap", [offer('box', 1)], { labels: {}, activeOffers: ['a', 'b'] }, 0, { event: { type: 'OFFER_CHOSEN' } }],
  ])('%s', (_name, offers, namespace, perNamespace, want) => {
    expect(run(offers, namespace, { maxLeasesPerNamespace: perNamespace })).toMatchObject(want);
  });

  it('a Lease naming an Offer its namespace may not use waits, naming the field', () => {
    const obs = run([offer('theirs', 1, { namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['web'] }] } }), offer('mine', 1)], ml, { lease: pending('cpus>=2', { offer: 'theirs' }) });
    expect(obs.event).toMatchObject({ type: 'UNSCHEDULABLE', reason: 'NamespaceNotAllowed' });
  });
});

describe('Refusals', () => {
  const input = (lease: Lease, offers: Offer[], refusals: Refusals, labels: Record<string, string> = {}) =>
    ({ lease, offers, active: 0, maxLeases: 2, namespace: { labels, activeOffers: [] }, installationID: 'inst0001', now: NOW, random: () => 0, refusals });
  const big = { ...box, metadata: { name: 'big', generation: 1 }, spec: { ...box.spec, command: { ...box.spec.command!, shape: { os: 'linux', arch: 'amd64', cpus: 64 } } } } as unknown as Offer;

  it('gives a Lease the refusal already decided for the same where and namespace state, until cleared', () => {
    const refusals = new Refusals();
    expect(schedule(input(pending('cpus>=32'), [box], refusals)).event).toMatchObject({ type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer' });
    // The same question with an Offer that could serve it: the kept refusal stands until the owner clears it on the Offer's arrival.
    expect(schedule(input(pending('cpus>=32'), [box, big], refusals)).event).toMatchObject({ type: 'UNSCHEDULABLE', reason: 'NoMatchingOffer' });
    refusals.clear();
    expect(schedule(input(pending('cpus>=32'), [box, big], refusals)).event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'big' });
  });

  it('never shares a refusal across where-expressions or namespace states, and never keeps a choice', () => {
    const refusals = new Refusals();
    const limited = { ...big, spec: { ...big.spec, namespaceSelector: { matchLabels: { team: 'gpu' } } } } as unknown as Offer;
    expect(schedule(input(pending('cpus>=32'), [box, limited], refusals)).event).toMatchObject({ type: 'UNSCHEDULABLE', reason: 'NamespaceNotAllowed' });
    expect(schedule(input(pending('cpus>=32'), [box, limited], refusals, { team: 'gpu' })).event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'big' });
    expect(schedule(input(pending('cpus>=2'), [box], refusals)).event).toMatchObject({ type: 'OFFER_CHOSEN', offer: 'box' });
    let asked = 0;
    refusals.decide('k', () => (asked++, { ok: true, candidate: { name: 'box', offer: 'box', shape: { os: 'linux', arch: 'amd64', gpus: 0 } } }));
    refusals.decide('k', () => (asked++, { ok: false, message: 'no' }));
    refusals.decide('k', () => (asked++, { ok: false, message: 'no' }));
    expect(asked).toBe(2);
  });
});

describe('Slots', () => {
  const lease = (uid: string, phase?: string) => ({ metadata: { uid }, status: phase ? { phase } : undefined }) as unknown as Lease;
  const fed = (cache: Lease[]) => {
    const slots = new Slots('inst0001');
    cache.forEach((l) => slots.observe(l));
    return slots;
  };
  const sorted = (s: Slot[]) => [...s].sort((a, b) => `${a.namespace}/${a.offer}`.localeCompare(`${b.namespace}/${b.offer}`));

  it('counts active Leases and claims the cache does not show yet, never the one asking', () => {
    const slots = fed([lease('a', 'Ready'), lease('b', 'Pending'), lease('c', 'Released'), lease('d', 'Launching')]);
    expect(slots.activeExcept('x')).toBe(2);
    slots.claim('b', { namespace: 'ns', offer: 'box' });
    expect(slots.activeExcept('x')).toBe(3);
    expect(slots.activeExcept('b')).toBe(2);
    // A claim on a Lease the cache shows ended is no slot.
    slots.claim('c', { namespace: 'ns', offer: 'box' });
    expect(slots.activeExcept('x')).toBe(3);
    slots.free('b');
    expect(slots.activeExcept('x')).toBe(2);
  });

  it('says where each slot is held: namespace and Offer', () => {
    const slots = fed([{ metadata: { uid: 'a', namespace: 'x' }, status: { phase: 'Ready', offer: 'box' } }] as unknown as Lease[]);
    slots.claim('b', { namespace: 'y', offer: 'cloud' });
    expect(sorted(slots.holders('z'))).toEqual([{ namespace: 'x', offer: 'box' }, { namespace: 'y', offer: 'cloud' }]);
  });

  it("never counts a Lease another installation stamped against this installation's maxLeases", () => {
    const stamped = (uid: string, id: string) => ({ metadata: { uid, annotations: { 'leasehold.dev/installation': id } }, status: { phase: 'Ready' } }) as unknown as Lease;
    expect(fed([stamped('a', 'inst0001'), stamped('b', 'other001'), lease('c', 'Ready')]).activeExcept('x')).toBe(2);
  });

  it('a Lease gone from the cache holds no slot unless it is still claimed', () => {
    const slots = fed([lease('a', 'Ready'), lease('b', 'Idle')]);
    slots.gone(lease('a', 'Ready'));
    expect(slots.activeExcept('x')).toBe(1);
    slots.claim('c', { namespace: '', offer: 'box' });
    slots.gone(lease('c'));
    expect(slots.activeExcept('x')).toBe(2);
  });

  it('the ledger kept from changes equals a full scan of the cache, over random add, update, delete, claim and free sequences', () => {
    const phases = [undefined, 'Pending', 'Launching', 'Ready', 'Idle', 'Releasing', 'Released', 'Failed'];
    const stamps = [undefined, 'inst0001', 'other001'];
    for (let seed = 1; seed <= 200; seed++) {
      let state = seed;
      // A small deterministic generator, so that a failing sequence can be replayed from its seed.
      const rand = (n: number) => {
        state = (state * 1103515245 + 12345) % 2147483648;
        return Math.floor((state / 2147483648) * n);
      };
      const slots = new Slots('inst0001');
      const cache = new Map<string, Lease>();
      const claimed = new Map<string, Slot>();
      for (let step = 0; step < 60; step++) {
        const uid = `u${rand(8)}`;
        const op = rand(5);
        if (op <= 1) {
          const stamp = stamps[rand(stamps.length)];
          const l = {
            metadata: { uid, namespace: `ns${rand(3)}`, ...(stamp ? { annotations: { 'leasehold.dev/installation': stamp } } : {}) },
            status: { phase: phases[rand(phases.length)], offer: `o${rand(3)}` },
          } as unknown as Lease;
          cache.set(uid, l);
          slots.observe(l);
        } else if (op === 2 && cache.has(uid)) {
          slots.gone(cache.get(uid)!);
          cache.delete(uid);
        } else if (op === 3) {
          const slot = { namespace: `ns${rand(3)}`, offer: `o${rand(3)}` };
          claimed.set(uid, slot);
          slots.claim(uid, slot);
        } else {
          claimed.delete(uid);
          slots.free(uid);
        }
        const except = `u${rand(9)}`;
        const want = slotsByScan([...cache.values()], claimed, 'inst0001', except);
        expect({ seed, step, active: slots.activeExcept(except) }).toEqual({ seed, step, active: want.size });
        expect({ seed, step, holders: sorted(slots.holders(except)) }).toEqual({ seed, step, holders: sorted([...want.values()]) });
      }
    }
  });
});
