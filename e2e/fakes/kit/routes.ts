// A routes table: "METHOD /path/:param" patterns matched against a request.

export interface RoutePattern {
  method: string;
  /** "/instances/:id": a ":name" segment matches one path segment, percent-decoded into params.name. */
  path: string;
}

export type RouteMatch<R> =
  | { route: R; params: Record<string, string> }
  /** No route: `allowed` lists the methods the path has (empty when the path is unknown). */
  | { route: undefined; allowed: string[] };

interface Compiled<R> {
  route: R;
  segments: string[];
}

export class RouteTable<R extends RoutePattern> {
  private readonly compiled: Compiled<R>[];

  constructor(routes: readonly R[]) {
    this.compiled = routes.map((route) => ({ route, segments: split(route.path) }));
  }

  match(method: string, path: string): RouteMatch<R> {
    const segments = split(path);
    const allowed: string[] = [];
    for (const c of this.compiled) {
      const params = matchSegments(c.segments, segments);
      if (!params) continue;
      if (c.route.method === method) return { route: c.route, params };
      if (!allowed.includes(c.route.method)) allowed.push(c.route.method);
    }
    return { route: undefined, allowed };
  }
}

function split(path: string): string[] {
  return path.split('/').slice(1);
}

function matchSegments(pattern: string[], segments: string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (let n = 0; n < pattern.length; n++) {
    const want = pattern[n]!;
    const got = segments[n]!;
    if (want.startsWith(':')) {
      if (got === '') return undefined;
      try {
        params[want.slice(1)] = decodeURIComponent(got);
      } catch {
        // Malformed percent-encoding names nothing a route knows.
        return undefined;
      }
    } else if (want !== got) return undefined;
  }
  return params;
}
