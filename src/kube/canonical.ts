// Values that went through the API server come back with their object keys
// sorted (it stores custom objects as maps): compare them in one key order.

/** JSON with object keys sorted and undefined left out. */
export function canonical(value: unknown): string {
  return (
    JSON.stringify(value, (_k, v: unknown) =>
      v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => a.localeCompare(b))) : v,
    ) ?? 'undefined'
  );
}
