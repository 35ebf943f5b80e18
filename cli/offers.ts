// leasehold offers [--json]: each Offer, and for Lambda Offers each
// candidate instance type, with its price and whether it can be rented now.
import type { Offer } from '../src/api/offer.js';
import { commonFlags, parseCommand, positionals } from './flags.js';
import { connect } from './kube.js';
import type { Out } from './leases.js';
import { price, table } from './output.js';

export const OFFERS_USAGE = 'usage: leasehold offers [--json]';

export function offerRows(offer: Offer): string[][] {
  const name = offer.metadata?.name ?? '';
  const ready = offer.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'Unknown';
  if (offer.spec.command) {
    const s = offer.spec.command.shape;
    const gpu = s.gpu ? `, ${s.gpus ?? 1}x ${s.gpu}` : '';
    return [[name, 'command', `${s.os ?? 'linux'}/${s.arch ?? 'amd64'}, ${s.cpus ?? '?'} cpu${gpu}`, price(offer.spec.pricePerHour), ready === 'True' ? 'yes' : `no (Ready ${ready})`]];
  }
  const candidates = offer.status?.candidates ?? [];
  if (!candidates.length) return [[name, 'lambda', offer.status?.lastListError ? `listing failed: ${offer.status.lastListError}` : 'not listed yet', '-', 'no']];
  return candidates.map((c) => [
    name,
    c.name + (c.region ? ` in ${c.region}` : ''),
    `${c.arch}, ${c.cpus} cpu${c.gpus ? `, ${c.gpus}x ${c.gpuModel ?? c.gpuDescription ?? 'GPU'}` : ''}`,
    price(c.pricePerHour),
    c.available ? 'yes' : `no (${c.reason ?? 'unavailable'})`,
  ]);
}

export function offersTable(offers: readonly Offer[]): string {
  const sorted = [...offers].sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  return table(['OFFER', 'CANDIDATE', 'SHAPE', 'PRICE/H', 'AVAILABLE'], sorted.flatMap(offerRows));
}

export async function offers(args: string[], out: Out, env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals: pos } = parseCommand(args, { json: { type: 'boolean' } }, OFFERS_USAGE);
  if (values.help) return void out.write(`${OFFERS_USAGE}\n`), 0;
  positionals(pos, [], OFFERS_USAGE);
  const items = await (await connect(commonFlags(values), env)).leases.offers();
  if (values.json) out.write(`${JSON.stringify(items.map((o) => ({ name: o.metadata?.name, spec: o.spec, status: o.status ?? {} })), null, 2)}\n`);
  else out.write(items.length ? offersTable(items) : 'No Offers.\n');
  return 0;
}
