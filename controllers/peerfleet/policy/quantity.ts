// Kubernetes resource quantities ("500m", "1.5Gi", "2", "1e3") as exact
// integers of milli-units, the unit the scheduler compares in. client-node's
// quantityToScalar mixes number and bigint and throws on "1.5Gi", so requests
// that the API server accepts would break the fit.

const QUANTITY = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]{1,2}))?$/;

const BINARY_POWER: Record<string, bigint> = { Ki: 1n, Mi: 2n, Gi: 3n, Ti: 4n, Pi: 5n, Ei: 6n };
const DECIMAL_EXPONENT: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/**
 * The quantity in milli-units, rounded up as the API server rounds; undefined
 * when `s` is not a non-negative quantity.
 */
export function parseQuantity(s: string | undefined): bigint | undefined {
  const m = QUANTITY.exec((s ?? '').trim());
  if (!m) return undefined;
  const [, number = '', suffix, exponent] = m;
  const [whole = '', fraction = ''] = number.split('.');
  let num = BigInt(`${whole}${fraction}` || '0') * 1000n;
  let den = 10n ** BigInt(fraction.length);
  if (suffix && suffix in BINARY_POWER) {
    num *= 1024n ** BINARY_POWER[suffix]!;
  } else {
    const e = suffix ? DECIMAL_EXPONENT[suffix]! : Number(exponent ?? 0);
    if (e >= 0) num *= 10n ** BigInt(e);
    else den *= 10n ** BigInt(-e);
  }
  return (num + den - 1n) / den;
}

/** Milli-units as a short decimal for messages: 1500n -> "1.5". */
export function formatMilli(milli: bigint): string {
  const whole = milli / 1000n;
  const rest = milli % 1000n;
  return rest === 0n ? whole.toString() : `${whole}.${rest.toString().padStart(3, '0').replace(/0+$/, '')}`;
}

/** A quantity for messages in the unit people read it in: memory in Gi, everything else as a number. */
export function formatQuantity(resource: string, milli: bigint): string {
  if (resource === 'memory' || resource.endsWith('storage')) {
    const gib = Number(milli / 1000n) / 1024 ** 3;
    return `${Math.round(gib * 100) / 100}Gi`;
  }
  return formatMilli(milli);
}
