// What a platform admin allows each namespace, whatever its Leases or the
// Offers say: at most so many active Leases, none above a price per hour.
// Offers and Leases may be written by people the admin delegates to; these
// caps come from the Helm values (a controller flag) only.
import { z } from 'zod';

const limit = z.strictObject({
  maxLeases: z.number().int().min(0).optional(),
  maxPricePerHour: z.number().min(0).optional(),
});

const limits = z.strictObject({
  /** Every namespace's caps, unless it is named in `namespaces`. */
  perNamespace: limit.optional(),
  /** Caps of the named namespaces, in place of perNamespace's. */
  namespaces: z.record(z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/), limit).optional(),
});

export type NamespaceLeaseLimits = z.infer<typeof limits>;

/** One namespace's caps; 0 or absent: none. */
export interface NamespaceLimit {
  maxLeases: number;
  maxPricePerHour?: number | undefined;
  /** Where the caps are set, for messages: the Helm value to change. */
  source: string;
}

/** Parses the JSON the chart renders from leaseLimits; the error names `flag` and the field. */
export function parseNamespaceLeaseLimits(text: string, flag: string): NamespaceLeaseLimits {
  let raw: unknown;
  try {
    raw = JSON.parse(text || '{}');
  } catch (err) {
    throw new Error(`${flag} must be JSON ({"perNamespace": {"maxLeases": 2, "maxPricePerHour": 5}, "namespaces": {"team-a": {...}}}): ${(err as Error).message}`);
  }
  const parsed = limits.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${flag}: leaseLimits.${issue.path.join('.')}: ${issue.message}; maxLeases is a whole number, maxPricePerHour US dollars, both 0 or more`);
  }
  return parsed.data;
}

export function limitFor(all: NamespaceLeaseLimits | undefined, namespace: string): NamespaceLimit {
  const named = all?.namespaces?.[namespace];
  const l = named ?? all?.perNamespace ?? {};
  return {
    maxLeases: l.maxLeases ?? 0,
    ...(l.maxPricePerHour ? { maxPricePerHour: l.maxPricePerHour } : {}),
    source: named ? `leaseLimits.namespaces.${namespace}` : 'leaseLimits.perNamespace',
  };
}
