// Which endpoints a credential may be sent to. A namespaced object (a
// RunnerTarget's GitHub or Compute Engine endpoint, a PeerFleet's origin) may
// be written by a team; the URL it names is only honoured when an admin listed
// it, so a team cannot have the controller carry a token to a server of its
// choosing. This is decided before any Secret is read.

/** An admin's allow-list: base URLs, each allowing itself and the paths below it. */
export interface EndpointPolicy {
  allowed: readonly string[];
  /** Plain http to a loopback address; only for tests that run emulators on this machine. */
  allowLoopbackHTTP: boolean;
}

export type EndpointVerdict = { allowed: true } | { allowed: false; reason: string };

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

function parse(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

const trimSlash = (path: string) => path.replace(/\/+$/, '');

/** Whether `base` (an allow-list entry) covers `url`: same scheme, host and port, and a path at or below its path. */
function covers(base: URL, url: URL): boolean {
  if (base.protocol !== url.protocol || base.host !== url.host) return false;
  const root = trimSlash(base.pathname);
  const path = trimSlash(url.pathname);
  return path === root || path.startsWith(`${root}/`);
}

/**
 * Decides whether a credential may go to `url`. `field` names the spec field
 * for the message, `setting` the chart value an admin changes to allow it.
 */
export function checkEndpoint(url: string, policy: EndpointPolicy, field: string, setting: string): EndpointVerdict {
  const u = parse(url);
  if (!u) return { allowed: false, reason: `${field} ${url} is not a URL` };
  if (u.username || u.password) return { allowed: false, reason: `${field} must not carry a user or password in the URL` };
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && policy.allowLoopbackHTTP && LOOPBACK_HOST.test(u.hostname))) {
    return { allowed: false, reason: `${field} ${url} is not https; credentials are sent over https only` };
  }
  const bases = policy.allowed.map(parse).filter((b): b is URL => b !== undefined);
  if (bases.some((b) => covers(b, u))) return { allowed: true };
  const listed = policy.allowed.length > 0 ? policy.allowed.join(', ') : 'none';
  return {
    allowed: false,
    reason: `${field} ${u.origin}${trimSlash(u.pathname)} is not an endpoint the admin allowed (allowed: ${listed}); use an allowed endpoint, or ask the platform admin to add it to the chart value ${setting}`,
  };
}

/** Parses a comma-separated list of base URLs (a flag's value), refusing anything that is not an http(s) URL without credentials. */
export function parseEndpointList(text: string, flag: string): string[] {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const entry of entries) {
    const u = parse(entry);
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:') || u.username || u.password || u.search || u.hash) {
      throw new Error(`${flag}: ${entry} must be an http(s) base URL without user, query or fragment`);
    }
  }
  return entries;
}
