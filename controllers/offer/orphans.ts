// The orphan sweep of an Offer's account: a machine under this installation's
// name prefix that no record of this controller holds is reported once it has
// been seen for the grace period, and released only when the controller was
// told to terminate orphans. It asks the provider, never the provider's API.
import type { Logger } from 'pino';
import type { Offer } from '../../src/api/index.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { MachineInventory, MachineProvider } from '../../src/providers/types.js';

/** What the sweep needs of a provider: its machines, and a way to end one. */
export type SweptProvider = MachineInventory & Pick<MachineProvider, 'release'>;

export interface OrphanSweepOptions {
  events: Pick<EventRecorder, 'record'>;
  log: Logger;
  graceMs: number;
  /** This installation's machine name prefix (installationPrefix): a machine under another is never touched. */
  namePrefix: string;
  /** terminate: orphans are reported and released; report: only reported. */
  mode: 'terminate' | 'report';
  /** Whose console an admin ends an orphan in when the controller only reports ("Lambda"). */
  provider: string;
  now?: () => number;
}

export class OrphanSweep {
  /** Offer name → machine ID → when an orphan was first seen there. */
  private readonly seen = new Map<string, Map<string, number>>();
  /** Offers whose sweep is under way. */
  private readonly sweeping = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly opts: OrphanSweepOptions) {
    this.now = opts.now ?? Date.now;
  }

  /**
   * Sweeps the machines `provider` lists for `offer`; `owned` are the machine
   * names this installation's Lease records hold (a record outlives its
   * machine's release, and a Lease's status is not the controller's to trust).
   */
  async sweep(offer: Offer, provider: SweptProvider, owned: ReadonlySet<string>): Promise<void> {
    const name = offer.metadata!.name!;
    // A release waits until the machine is gone; a listing that comes due meanwhile must not report it again.
    if (this.sweeping.has(name)) return;
    this.sweeping.add(name);
    try {
      await this.sweepOnce(offer, name, provider, owned);
    } finally {
      this.sweeping.delete(name);
    }
  }

  private async sweepOnce(offer: Offer, name: string, provider: SweptProvider, owned: ReadonlySet<string>): Promise<void> {
    const now = this.now();
    const machines = await provider.list();
    this.opts.log.debug({ offer: name, machines: machines.length, owned: owned.size }, 'orphan sweep');
    // Per Offer: each sweeps its own account, and must not forget what another one saw.
    const seen = this.seen.get(name) ?? new Map<string, number>();
    this.seen.set(name, seen);
    const live = new Set<string>();
    for (const m of machines) {
      // Another installation on the same account owns its machines, whatever the provider lists.
      if (!m.name.startsWith(this.opts.namePrefix)) continue;
      if (m.state === 'Terminating' || owned.has(m.name)) continue;
      live.add(m.id);
      const first = seen.get(m.id) ?? now;
      seen.set(m.id, first);
      if (now - first < this.opts.graceMs) continue;
      const act = this.opts.mode === 'terminate';
      await this.opts.events.record(
        offer,
        'Warning',
        'OrphanInstance',
        `instance ${m.id} (${m.name}) belongs to no Lease record of this installation and has run for ${Math.round((now - first) / 1000)}s since first seen; ${act ? 'terminating it' : `reporting only (--orphans=report); terminate it in the ${this.opts.provider} console`}`,
      );
      if (!act) continue;
      try {
        await provider.release({ leaseID: m.name.slice(this.opts.namePrefix.length), machineName: m.name, offer: name, state: '', signal: new AbortController().signal });
      } catch (err) {
        // The next sweep finds it still listed and tries again; the other orphans need not wait for that.
        this.opts.log.warn({ offer: name, machine: m.name, err: String(err) }, 'releasing an orphan failed');
      }
    }
    for (const id of seen.keys()) if (!live.has(id)) seen.delete(id);
  }

  forget(offerName: string): void {
    this.seen.delete(offerName);
  }
}
