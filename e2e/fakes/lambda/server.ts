// An HTTP emulator of the Lambda Cloud public API v1 (base path /api/v1), for
// end-to-end tests of the controller's Lambda provider. Instances are real
// OpenSSH sshds on loopback addresses (see machine.ts). Tests steer it
// through the returned handle, or over HTTP under /_emulator/ (see README.md).
//
// The parts: state.ts (accounts, catalog, capacity), instances.ts (instance
// lifecycle), launch.ts and routes.ts (the API), conformance.ts (requests and
// answers held to Lambda's API description, spec/), control.ts (the control
// API); the HTTP pipeline, faults, rate limits and request log come from ../kit.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { ControlApi, RestApi, noSuchEndpoint } from '../kit/api.js';
import { FaultInjector } from '../kit/faults.js';
import { listen, type ListeningServer } from '../kit/http.js';
import { IntervalLimiter, RequestRateLimiter } from '../kit/limits.js';
import { RecordLog } from '../kit/log.js';
import type { Capacity } from './catalog.js';
import { Conformance } from './conformance.js';
import { lambdaContract } from './contract.js';
import { controlRoutes } from './control.js';
import { LAMBDA_ERRORS, errorBody } from './errors.js';
import { Fleet } from './instances.js';
import { Launcher, settleLaunch, traceLaunch } from './launch.js';
import { SSHD, freePort } from './machine.js';
import { lambdaRoutes } from './routes.js';
import { CloudState } from './state.js';
import type { AccountState, ApiOp, FaultSpec, InstanceStatus, LambdaEmulator, LambdaEmulatorOptions, LaunchRecord } from './types.js';

export type { Capacity, CatalogEntry, InstanceType, InstanceTypeSpecs, Region } from './catalog.js';
export { DEFAULT_CATALOG, DEFAULT_REGIONS } from './catalog.js';
export { hostKeysFromUserData } from './cloud-config.js';
export { RATE_LIMIT_BODY } from './errors.js';
export { DESCRIPTION_FILE, lambdaContract, type OperationContract } from './contract.js';
export type {
  Account,
  ApiInstance,
  ContractBreach,
  EmulatedInstance,
  Fault,
  FaultMode,
  FaultOp,
  FaultSpec,
  FileSystem,
  InstanceStatus,
  LambdaEmulator,
  LambdaEmulatorOptions,
  LaunchOutcome,
  LaunchRecord,
  RefusedRequest,
  RequestRecord,
  SshKey,
} from './types.js';

const API_BASE = '/api/v1';

export async function startLambdaEmulator(opts: LambdaEmulatorOptions = {}): Promise<LambdaEmulator> {
  const useSshd = opts.sshd ?? true;
  if (useSshd && !existsSync(SSHD)) throw new Error(`${SSHD} is missing: install openssh-server (make deps), or start the emulator with sshd: false`);
  const root = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), 'leasehold-lambda-')));
  if (/[\s"\\]/.test(root)) throw new Error(`emulator directory "${root}" must not hold spaces, quotes or backslashes`);
  const ownsRoot = opts.dir === undefined;
  const sshPort = opts.sshPort ?? (await freePort());
  const sshUser = userInfo().username;
  const addressPrefix = opts.addressPrefix ?? '127.77';
  if (!/^127\.\d{1,3}$/.test(addressPrefix)) throw new Error(`addressPrefix "${addressPrefix}" must be "127.N"`);

  const cloud = new CloudState(opts);
  const { settings } = cloud;
  const fleet = new Fleet(cloud, { root, sshPort, sshUser, useSshd, sshLagMs: opts.sshLagMs ?? 0, addressPrefix });
  const conformance = new Conformance(lambdaContract(), API_BASE);
  const launcher = new Launcher(cloud, fleet, new IntervalLimiter(() => settings.launchIntervalMs), opts.launchLimitCountsFailures ?? true, conformance);
  const launches = new RecordLog<LaunchRecord>();
  const api = new RestApi<ApiOp, AccountState, LaunchRecord | undefined>({
    basePath: API_BASE,
    routes: lambdaRoutes(cloud, fleet, launcher, root, conformance),
    errors: LAMBDA_ERRORS,
    callerOf: (key) => cloud.accountByKey(key),
    faults: new FaultInjector<ApiOp>(),
    requestLimit: new RequestRateLimiter(() => settings.requestsPerSecond),
    trace: (ex) => traceLaunch(launches, ex),
    settle: (ex, record) => {
      settleLaunch(ex, record);
      conformance.observe(ex);
    },
    // Lambda answers a known path with a wrong method as it answers an unknown path.
    unrouted: noSuchEndpoint,
  });

  let server: ListeningServer | undefined;
  let stopped = false;
  const handle: LambdaEmulator = {
    url: '',
    origin: '',
    apiKey: cloud.first.apiKey,
    sshPort,
    sshUser,
    dir: root,
    get bootMs() {
      return settings.bootMs;
    },
    set bootMs(v: number) {
      settings.bootMs = v;
    },
    get terminateMs() {
      return settings.terminateMs;
    },
    set terminateMs(v: number) {
      settings.terminateMs = v;
    },
    get launchIntervalMs() {
      return settings.launchIntervalMs;
    },
    set launchIntervalMs(v: number) {
      settings.launchIntervalMs = v;
    },
    get requestsPerSecond() {
      return settings.requestsPerSecond;
    },
    set requestsPerSecond(v: number) {
      settings.requestsPerSecond = v;
    },
    get forgetTerminatedMs() {
      return settings.forgetTerminatedMs;
    },
    set forgetTerminatedMs(v: number) {
      settings.forgetTerminatedMs = v;
    },
    get instanceQuota() {
      return settings.instanceQuota;
    },
    set instanceQuota(v: number) {
      settings.instanceQuota = v;
    },
    get accounts() {
      return cloud.accounts.map((a) => ({ id: a.id, name: a.name, apiKey: a.apiKey }));
    },
    addAccount: (name?: string) => cloud.addAccount(undefined, name).apiKey,
    get regions() {
      return cloud.regions.map((r) => ({ ...r }));
    },
    catalog: () => cloud.catalog(),
    setCatalog: (types) => cloud.setCatalog(types),
    setCapacity: (typeName: string, c: Capacity) => cloud.setCapacity(typeName, c),
    setPrice: (typeName: string, cents: number) => cloud.setPrice(typeName, cents),
    addFileSystem: (name: string, region: string, ref?: string) => cloud.addFileSystem(name, region, ref),
    fault: (spec: FaultSpec) => api.faults.add(spec),
    clearFaults: () => api.faults.clear(),
    get faults() {
      return api.faults.list;
    },
    get launches() {
      return launches.items.map((l) => ({ ...l, instanceIds: [...l.instanceIds] }));
    },
    get requests() {
      return api.requests.items.map((r) => ({ ...r }));
    },
    get refusedRequests() {
      return conformance.refused.items.map((r) => ({ ...r, problems: [...r.problems] }));
    },
    get contractBreaches() {
      return conformance.breaches.items.map((b) => ({ ...b, problems: [...b.problems] }));
    },
    instances: (ref?: string) => {
      const account = ref === undefined ? undefined : cloud.accountByRef(ref);
      if (ref !== undefined && !account) return [];
      return fleet.list().filter((i) => !account || i.account === account).map((i) => fleet.emulatedView(i));
    },
    instance: (id: string) => {
      const i = fleet.get(id);
      return i ? fleet.emulatedView(i) : undefined;
    },
    waitForStatus: (id: string, status: InstanceStatus, timeoutMs = 30_000) => fleet.waitForStatus(id, status, timeoutMs),
    sshdProcesses: () => fleet.sshdProcesses(),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      const closed = server?.close();
      await fleet.stop();
      if (ownsRoot) rmSync(root, { recursive: true, force: true });
      else for (const i of fleet.list()) rmSync(i.dir, { recursive: true, force: true });
      await closed;
      // Last, once everything is cleaned up: an emulator that answered outside
      // Lambda's description has tested its callers against something Lambda
      // would not send, so the run that used it must not pass quietly.
      const breach = conformance.breachError();
      if (breach) throw breach;
    },
  };

  server = await listen({
    host: opts.host,
    port: opts.port,
    mounts: [api, new ControlApi('/_emulator', controlRoutes(handle, cloud))],
    unmounted: { status: 404, body: errorBody('global/object-does-not-exist', `Not found; the API is under ${API_BASE}.`) },
  });
  Object.assign(handle, { url: `${server.origin}${API_BASE}`, origin: server.origin });
  return handle;
}
