// JSON merge patch (RFC 7386) helpers: the smallest patch that turns one
// document into another, and deep equality that ignores key order.

export type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  // Dates from client-node deserialization compare by instant.
  if (a instanceof Date || b instanceof Date) return toJSON(a) === toJSON(b);
  return false;
}

function toJSON(v: unknown): unknown {
  return v instanceof Date ? v.toISOString() : v;
}

/**
 * The merge patch that turns `from` into `to`: changed keys carry their new
 * value, removed keys are null, arrays are replaced whole. Returns undefined
 * when the two are equal.
 */
export function mergePatch(from: unknown, to: unknown): unknown {
  if (deepEqual(from, to)) return undefined;
  if (!isPlainObject(from) || !isPlainObject(to)) return to === undefined ? null : to;
  const patch: Record<string, unknown> = {};
  for (const k of Object.keys(from)) {
    if (from[k] !== undefined && to[k] === undefined) patch[k] = null;
  }
  for (const k of Object.keys(to)) {
    if (to[k] === undefined) continue;
    const sub = mergePatch(from[k], to[k]);
    if (sub !== undefined) patch[k] = sub;
  }
  return patch;
}
