// Lambda Offers: the listing the Offer shows (every 2 minutes, sooner after
// a failure, always fresh when the Offer changed) and the orphan sweep that
// runs after each listing.
import type { Logger } from 'pino';
import type { Offer, OfferCandidate } from '../../src/api/index.js';
import type { EventRecorder } from '../../src/kube/events.js';
import { CredentialError, type LambdaAccounts } from '../../src/providers/lambda/accounts.js';
import { buildCandidates } from '../../src/providers/lambda/catalog.js';
import { LambdaProvider } from '../../src/providers/lambda/provider.js';
import { installationPrefix } from '../../src/providers/types.js';
import { ARCHES } from '../../src/api/where.js';
import { OrphanSweep } from './orphans.js';

export type Listing =
  | { ok: true; at: number; generation: number | undefined; candidates: OfferCandidate[] }
  | { ok: false; at: number; generation: number | undefined; reason: string; message: string; failures: number };

export interface LambdaOffersOptions {
  accounts: LambdaAccounts;
  events: EventRecorder;
  log: Logger;
  listIntervalMs: number;
  /** First retry after a failed listing; doubles up to listIntervalMs. */
  retryMs?: number;
  orphanGraceMs: number;
  /** This installation's ID: only machines named under it are swept. */
  installationID: string;
  /** terminate: orphans are reported and terminated; report: only reported. */
  orphans: 'terminate' | 'report';
  now?: () => number;
}

export class LambdaOffers {
  private readonly listings = new Map<string, Listing>();
  private readonly orphans: OrphanSweep;
  private readonly now: () => number;

  constructor(private readonly opts: LambdaOffersOptions) {
    this.now = opts.now ?? Date.now;
    this.orphans = new OrphanSweep({
      events: opts.events,
      log: opts.log,
      graceMs: opts.orphanGraceMs,
      namePrefix: installationPrefix(opts.installationID),
      mode: opts.orphans,
      provider: 'Lambda',
      now: this.now,
    });
  }

  /** The last listing, refreshed first when it is due. */
  async listing(offer: Offer): Promise<{ listing: Listing; fresh: boolean }> {
    const name = offer.metadata!.name!;
    const prev = this.listings.get(name);
    const now = this.now();
    const generation = offer.metadata?.generation;
    if (prev && prev.generation === generation && now < this.dueAt(prev)) return { listing: prev, fresh: false };
    const spec = offer.spec.lambda!;
    let next: Listing;
    try {
      const account = await this.opts.accounts.account(spec.apiKeySecretRef, spec.endpoint);
      const types = await account.client.listInstanceTypes();
      let onlyRegion: string | undefined;
      if (spec.fileSystems?.length) {
        const fs = await account.client.listFileSystems();
        const regions = new Set(spec.fileSystems.map((n) => fs.find((f) => f.name === n)?.region ?? `missing:${n}`));
        const missing = [...regions].filter((r) => r.startsWith('missing:')).map((r) => r.slice(8));
        if (missing.length) throw new CredentialLess('FileSystemNotFound', `spec.lambda.fileSystems names ${missing.join(', ')}, which the account does not have`);
        if (regions.size > 1) throw new CredentialLess('FileSystemsInManyRegions', `spec.lambda.fileSystems are in ${[...regions].join(' and ')}; they must all be in one region`);
        onlyRegion = [...regions][0];
      }
      const candidates = buildCandidates(types, {
        instanceTypes: spec.instanceTypes,
        regions: spec.regions,
        onlyRegion,
        maxPricePerHour: spec.maxPricePerHour ?? 10,
        arches: ARCHES,
      });
      next = { ok: true, at: now, generation, candidates };
      const provider = LambdaProvider.forAccount(account, { namePrefix: installationPrefix(this.opts.installationID) });
      void this.ownedMachines()
        .then((owned) => this.orphans.sweep(offer, provider, owned))
        .catch((err) => this.opts.log.warn({ offer: name, err: String(err) }, 'orphan sweep failed'));
    } catch (err) {
      const failures = prev && !prev.ok ? prev.failures + 1 : 1;
      const reason = err instanceof CredentialError || err instanceof CredentialLess ? err.reason : 'ListingFailed';
      const message = err instanceof Error ? err.message : String(err);
      next = { ok: false, at: now, generation, reason, message, failures };
      this.opts.log.warn({ offer: name, reason, message }, 'Lambda listing failed');
    }
    this.listings.set(name, next);
    return { listing: next, fresh: true };
  }

  dueAt(l: Listing): number {
    if (l.ok) return l.at + this.opts.listIntervalMs;
    const retry = Math.min(this.opts.listIntervalMs, (this.opts.retryMs ?? 5000) * 2 ** Math.min(10, l.failures - 1));
    return l.at + retry;
  }

  forget(offerName: string): void {
    this.listings.delete(offerName);
    this.orphans.forget(offerName);
  }

  /**
   * The machine names this installation's Lease records hold, to tell whose
   * instance is whose. Set by the controller wiring; until then nothing is
   * known to be owned, so nothing is swept.
   */
  ownedMachines: () => Promise<ReadonlySet<string>> = () => Promise.reject(new Error('Lease records are not wired to the orphan sweep'));
}

/** A listing failure caused by the Offer's own settings. */
class CredentialLess extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
