// The caps a platform admin sets per namespace (Helm leaseLimits, the
// controller's --namespace-lease-limits) hold whatever a namespace user
// writes: a user with every right on leasehold.dev in their namespace leases
// no more machines than the cap, and none above its price, and cannot
// change an Offer to get around it.
import { describe, it, expect, beforeAll } from '@jest/globals';
import { getJSON } from './support/kube.js';
import { sshdCommands } from './support/leases.js';
import { leaseSuite } from './support/suite.js';
import { namespaceUser } from './support/tenancy.js';
import { leaseManifest, offerManifest } from './support/builders.js';

const fx = leaseSuite('caps', {
  maxLeases: 5,
  controllerArgs: ['--namespace-lease-limits', JSON.stringify({ perNamespace: { maxLeases: 1, maxPricePerHour: 2 } })],
});
const tenant = (args: string[], input?: string) => fx.kubectl(['--as=dana', '--as-group=tenants', '-n', fx.ns, ...args], input);
async function lease(name: string, spec: Record<string, unknown>): Promise<void> {
  const r = await tenant(['create', '-f', '-'], JSON.stringify(leaseManifest(name, fx.ns, spec)));
  if (r.code !== 0) throw new Error(`the user's Lease ${name} was refused: ${r.stderr}`);
}

beforeAll(async () => {
  await namespaceUser(fx.kubectl, fx.ns, 'dana');
});

describe('a namespace user against the admin caps for their namespace', () => {
  it('gets one machine, waits for a second, and never gets one above the price cap', async () => {
    const cheap = await fx.offer('cheap', { ...sshdCommands(), pricePerHour: 1, idleTimeout: '10m', maxLifetime: '1h' });
    const dear = await fx.offer('dear', { ...sshdCommands(), pricePerHour: 9, idleTimeout: '10m', maxLifetime: '1h' });
    await lease('first', { where: 'cpus>=1', offer: cheap });
    const first = await fx.waitPhase('first', 'Ready');
    expect(first.offer).toBe(cheap);

    await lease('second', { where: 'cpus>=1', offer: cheap });
    await lease('pricey', { where: 'cpus>=1', offer: dear });
    const waiting = async (name: string, reason: string) => {
      for (let i = 0; i < 120; i++) {
        const st = await fx.status(name);
        if (st?.reason === reason) return st;
        expect(st?.phase ?? 'Pending').toBe('Pending');
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`${name} never waited with reason ${reason}: ${JSON.stringify(await fx.status(name))}`);
    };
    expect((await waiting('second', 'MaxLeasesPerNamespace')).message).toContain("the platform admin's leaseLimits.perNamespace.maxLeases is 1");
    expect((await waiting('pricey', 'NamespacePriceCap')).message).toContain("above the platform admin's leaseLimits.perNamespace.maxPricePerHour 2");

    // Offers are the admin's: the user can neither cheapen one nor make one.
    expect((await tenant(['patch', 'offers.leasehold.dev', dear, '--type=merge', '-p', '{"spec":{"pricePerHour":1}}'])).code).not.toBe(0);
    expect((await tenant(['create', '-f', '-'], JSON.stringify(offerManifest(`mine-${fx.suffix}`, { command: { ...sshdCommands(), shape: { os: 'linux', arch: 'amd64', cpus: 1 } } })))).code).not.toBe(0);

    // The slot frees when the first ends: the second goes on, the pricey one still waits.
    expect((await tenant(['delete', 'leases.leasehold.dev', 'first', '--wait=false'])).code).toBe(0);
    await fx.waitPhase('second', 'Ready');
    expect((await fx.status('pricey'))).toMatchObject({ phase: 'Pending', reason: 'NamespacePriceCap' });
    expect(fx.sshdFor((await fx.status('pricey'))?.leaseID ?? 'none')).toBe('');
    for (const name of ['second', 'pricey']) expect((await tenant(['delete', 'leases.leasehold.dev', name, '--wait=false'])).code).toBe(0);
    for (const name of ['second', 'pricey']) {
      for (let i = 0; i < 240 && (await getJSON(fx.kubectl, ['-n', fx.ns, 'leases.leasehold.dev', name])) !== undefined; i++) await new Promise((r) => setTimeout(r, 250));
    }
  }, 90_000);
});
