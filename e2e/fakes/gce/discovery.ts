// The pinned Compute Engine discovery document (discovery.json), read from the
// cache discovery.sh fills (`make contracts`, which `make test` runs before the
// tests): tests never fetch it themselves, as they never reach the network.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface DiscoveryPin {
  module: string;
  version: string;
  /** The module's go.sum hash (h1:), checked by discovery.sh. */
  sum: string;
  /** The document's path inside the module. */
  file: string;
  /** The document's own `revision`. */
  revision: string;
}

export interface DiscoveryParameter {
  location?: string;
  type?: string;
  description?: string;
  required?: boolean;
}

export interface DiscoveryMethod {
  id: string;
  httpMethod: string;
  path: string;
  description?: string;
  parameters?: Record<string, DiscoveryParameter>;
}

interface DiscoveryResource {
  methods?: Record<string, DiscoveryMethod>;
  resources?: Record<string, DiscoveryResource>;
}

export interface DiscoveryDocument {
  revision: string;
  version: string;
  rootUrl: string;
  servicePath: string;
  /** Parameters every method takes (alt, fields, key, prettyPrint, ...). */
  parameters: Record<string, DiscoveryParameter>;
  resources: Record<string, DiscoveryResource>;
  schemas: Record<string, unknown>;
}

const here = dirname(fileURLToPath(import.meta.url));

export const DISCOVERY_PIN: DiscoveryPin = JSON.parse(readFileSync(join(here, 'discovery.json'), 'utf8'));

/** Where discovery.sh keeps the document: the same cache root as the control-plane build. */
export function pinnedDocumentPath(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.LEASEHOLD_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'leasehold');
  return join(root, 'specs', `${DISCOVERY_PIN.module}@${DISCOVERY_PIN.version}`, DISCOVERY_PIN.file);
}

let loaded: DiscoveryDocument | undefined;

export function loadPinnedDocument(): DiscoveryDocument {
  if (loaded) return loaded;
  const path = pinnedDocumentPath();
  if (!existsSync(path)) {
    throw new Error(`The pinned Compute Engine discovery document is not at ${path}; fetch it with \`make contracts\` (bash e2e/fakes/gce/discovery.sh)`);
  }
  const doc = JSON.parse(readFileSync(path, 'utf8')) as DiscoveryDocument;
  if (doc.revision !== DISCOVERY_PIN.revision) throw new Error(`${path} is revision ${doc.revision}, discovery.json pins ${DISCOVERY_PIN.revision}; delete it and run \`make contracts\``);
  loaded = doc;
  return doc;
}

/** Every method of the document, by id (compute.instances.list, ...). */
export function methodsOf(doc: DiscoveryDocument): Map<string, DiscoveryMethod> {
  const out = new Map<string, DiscoveryMethod>();
  const walk = (r: DiscoveryResource) => {
    for (const m of Object.values(r.methods ?? {})) out.set(m.id, m);
    for (const sub of Object.values(r.resources ?? {})) walk(sub);
  };
  for (const r of Object.values(doc.resources)) walk(r);
  return out;
}

/** The query parameters a method declares, its own and those every method takes. */
export function queryParametersOf(doc: DiscoveryDocument, method: DiscoveryMethod): Set<string> {
  const own = Object.entries(method.parameters ?? {}).filter(([, p]) => p.location === 'query').map(([k]) => k);
  return new Set([...own, ...Object.keys(doc.parameters)]);
}

/**
 * The method a request is for: the one whose HTTP method and path template
 * ({project}, {zone}, ... each one path segment) match the URL below the
 * service's root.
 */
export function methodForRequest(doc: DiscoveryDocument, httpMethod: string, pathBelowRoot: string): DiscoveryMethod | undefined {
  const path = pathBelowRoot.replace(/^\/+/, '');
  for (const m of methodsOf(doc).values()) {
    if (m.httpMethod !== httpMethod) continue;
    const pattern = m.path.split(/\{\+?[^}]+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^/]+');
    if (new RegExp(`^${pattern}$`).test(path)) return m;
  }
  return undefined;
}
