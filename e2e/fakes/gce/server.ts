// An HTTP emulator of the Compute Engine API v1 (base path /compute/v1),
// Google's OAuth 2.0 token endpoint (/token) and the metadata server's
// credentials (/computeMetadata/v1), for tests of the controller's
// Compute Engine client and RunnerTarget. Tests steer it through the
// returned handle (see README.md).
//
// The parts: auth.ts (service accounts, keys, tokens), metadata.ts (the
// metadata server's token), compute.ts (instances
// and Operations), routes.ts and filter.ts (the API), errors.ts (Google's
// error shapes); the HTTP pipeline, faults, rate limits and request log come
// from ../kit.
import { RestApi } from '../kit/api.js';
import { listen } from '../kit/http.js';
import { RequestRateLimiter } from '../kit/limits.js';
import { RecordLog } from '../kit/log.js';
import { Accounts, TokenEndpoint } from './auth.js';
import { Compute, type Settings } from './compute.js';
import { GOOGLE_ERRORS } from './errors.js';
import { MetadataServer } from './metadata.js';
import { DEFAULT_ORG_POLICY } from './policy.js';
import { gceRoutes, type Caller } from './routes.js';
import type { EmulatedInstance, GceEmulator, GceEmulatorOptions, GceOp, RequestRecord } from './types.js';

export type * from './types.js';
export { GOOGLE_TOKEN_URL, JWT_BEARER } from './auth.js';

const API_BASE = '/compute/v1';
/** The public keys of an instance's ssh-keys metadata ("user:key" lines), which the guest agent admits for login. */
export function sshKeysOf(instance: EmulatedInstance): string[] {
  return instance.metadata
    .filter((m) => m.key === 'ssh-keys')
    .flatMap((m) => m.value.split('\n'))
    .map((l) => l.slice(l.indexOf(':') + 1))
    .filter(Boolean);
}

export const DEFAULT_ZONES = ['us-central1-a', 'us-central1-b', 'us-central1-c'];
export const DEFAULT_MACHINE_TYPES = ['e2-standard-2', 'e2-standard-4', 'e2-standard-8', 'n2-standard-4', 'n2-standard-8'];
const MUTATING: readonly GceOp[] = ['insert', 'delete'];

export async function startGceEmulator(opts: GceEmulatorOptions = {}): Promise<GceEmulator> {
  const project = opts.project ?? 'leasehold-test';
  const settings: Settings = {
    pendingMs: opts.pendingMs ?? 50,
    runningMs: opts.runningMs ?? 150,
    bootMs: opts.bootMs ?? 200,
    waitMaxMs: opts.waitMaxMs ?? 120_000,
    tokenTtlSeconds: opts.tokenTtlSeconds ?? 3600,
    requestsPerSecond: opts.requestsPerSecond ?? 0,
    refuseRegexAcrossFields: opts.refuseRegexAcrossFields ?? true,
    requestIdRetentionMs: opts.requestIdRetentionMs ?? 3_600_000,
    enforceMaxRunDuration: opts.enforceMaxRunDuration ?? true,
    maxRunDurationScale: opts.maxRunDurationScale ?? 1,
    orgPolicy: { ...DEFAULT_ORG_POLICY, ...opts.orgPolicy, deniedServiceAccounts: [...(opts.orgPolicy?.deniedServiceAccounts ?? [])] },
  };
  let origin = '';
  const accounts = new Accounts(project, () => `${origin}/token`, () => settings.tokenTtlSeconds);
  const compute = new Compute(project, opts.zones ?? DEFAULT_ZONES, opts.machineTypes ?? DEFAULT_MACHINE_TYPES, settings, opts);
  const requests = new RecordLog<RequestRecord>();
  const api = new RestApi<GceOp, Caller, undefined>({
    basePath: API_BASE,
    routes: gceRoutes(compute),
    errors: GOOGLE_ERRORS,
    callerOf: (token) => accounts.callerOf(token),
    requests,
    requestLimit: new RequestRateLimiter(() => settings.requestsPerSecond),
  });
  const server = await listen({
    host: opts.host,
    port: opts.port,
    mounts: [api, new TokenEndpoint('/token', accounts, requests, api.faults), new MetadataServer(accounts, () => handle.metadataServiceAccount, requests, api.faults)],
    unmounted: { status: 404, body: { error: { code: 404, message: `Not found; the API is under ${API_BASE}.` } } },
  });
  origin = server.origin;
  const firstKey = accounts.add('leasehold-controller');

  const setting = <K extends keyof Settings>(k: K) => ({
    get: () => settings[k],
    set: (v: Settings[K]) => {
      settings[k] = v;
    },
  });
  const handle: GceEmulator = {
    url: `${origin}${API_BASE}`,
    tokenUrl: `${origin}/token`,
    metadataHost: origin.replace(/^http:\/\//, ''),
    metadataServiceAccount: firstKey.client_email,
    origin,
    project,
    zones: compute.zones,
    serviceAccountKey: firstKey,
    addServiceAccount: (name) => accounts.add(name),
    revokeKey: (id) => accounts.revoke(id),
    pendingMs: 0,
    runningMs: 0,
    bootMs: 0,
    requestsPerSecond: 0,
    tokenTtlSeconds: 0,
    refuse: (spec) => compute.refuse(spec),
    clearRefusals: () => compute.clearRefusals(),
    preempt: (zone, name) => {
      const i = compute.instances.get(compute.key(zone, name));
      if (!i) throw new Error(`no instance ${name} in ${zone}`);
      compute.preempt(i);
    },
    setStatus: (zone, name, status) => {
      const i = compute.instances.get(compute.key(zone, name));
      if (!i) throw new Error(`no instance ${name} in ${zone}`);
      compute.setStatus(i, status);
    },
    unreachableZones: compute.unreachableZones,
    forgetRequestIds: () => compute.forgetRequestIds(),
    refuseRegexAcrossFields: true,
    requestIdRetentionMs: 0,
    enforceMaxRunDuration: true,
    maxRunDurationScale: 1,
    orgPolicy: settings.orgPolicy,
    fault: (spec) => api.faults.add(spec),
    clearFaults: () => api.faults.clear(),
    get requests() {
      return requests.items.map((r) => ({ ...r }));
    },
    get mutations() {
      return requests.items.filter((r) => MUTATING.includes(r.op as GceOp)).map((r) => ({ ...r }));
    },
    instances: (zone) => [...compute.instances.values()].filter((i) => zone === undefined || i.zone === zone).map((i) => structuredClone(i)),
    instance: (zone, name) => {
      const i = compute.instances.get(compute.key(zone, name));
      return i ? structuredClone(i) : undefined;
    },
    inserts: () => compute.inserts.map((r) => ({ ...r })),
    operations: (zone) => [...compute.operations.values()].filter((o) => zone === undefined || o.zone === compute.zoneLink(zone)).map((o) => compute.view(o)),
    waitForStatus: async (zone, name, status, timeoutMs = 30_000) => {
      const until = Date.now() + timeoutMs;
      while (compute.status(zone, name) !== status) {
        if (Date.now() > until) throw new Error(`instance ${zone}/${name} is ${compute.status(zone, name)}, not ${status}, after ${timeoutMs} ms`);
        await new Promise<void>((r) => setTimeout(r, 20));
      }
    },
    stop: async () => {
      compute.stop();
      await server.close();
    },
  };
  for (const k of ['pendingMs', 'runningMs', 'bootMs', 'requestsPerSecond', 'tokenTtlSeconds', 'refuseRegexAcrossFields', 'requestIdRetentionMs', 'enforceMaxRunDuration', 'maxRunDurationScale'] as const) Object.defineProperty(handle, k, { ...setting(k), enumerable: true });
  return handle;
}
