// Lambda Cloud as a MachineProvider. One launch:
//   1. the account key (the controller's public key) is registered once;
//   2. wait for this account's launch turn (one every 12 s);
//   3. list the types again and check capacity and price as the request goes out;
//   4. launch, named after the lease, with a fresh host key in cloud-init;
//      an answer that is lost is sent once more, only once the lost request
//      can no longer land (the settle period, watching the name meanwhile),
//      and if that one is lost too the instance is looked up by name;
//   5. wait for it to be active with an address.
// Release terminates by ID (or by name when the launch never answered) and
// succeeds once Lambda lists the instance as terminated, or no longer lists
// it after a terminate request; after a lost launch answer it also watches
// the name until that request can no longer land. list and get find
// instances by name, which is how an instance is tied to its lease.
import { generateControllerKey } from '../../machine/keys.js';
import { ignoreNotFound, isProviderError, ProviderError } from '../errors.js';
import { MACHINE_NAME_PREFIX, type Launched, type LaunchRequest, type Machine, type MachineInventory, type MachineProvider, type ReleaseRequest } from '../types.js';
import type { LambdaAccount } from './accounts.js';
import { dearerWithCapacity, overCap, pickRegion, priceOf } from './catalog.js';
import { retryAfterMs, type LambdaClient, type LambdaInstance } from './client.js';
import { abortableSleep, type LaunchPacer } from './pacer.js';
import { accountKeyName, DEFAULT_LAUNCH_SETTLE_MS, hostKeyUserData, LIVE, parseLambdaState, restore, toMachine, type LambdaState } from './state.js';

export { accountKeyName, parseLambdaState, type LambdaState };

export interface LambdaLaunchSettings {
  instanceType: string;
  /** spec.lambda.instanceTypes: what else the Offer may rent (named when the cap is all that keeps one out). */
  instanceTypes?: readonly string[] | undefined;
  regions?: readonly string[] | undefined;
  fileSystems?: readonly string[] | undefined;
  maxPricePerHour: number;
  login: string;
  sshPort: number;
}

export interface LambdaProviderOptions {
  client: LambdaClient;
  pacer: LaunchPacer;
  /** Only for launch: what to rent. */
  launch?: LambdaLaunchSettings;
  /** Accounts whose key is known to be registered (shared across launches). */
  registeredKeys?: Set<string>;
  /** How often to look at a booting or terminating instance. */
  pollMs?: number;
  /** How long one release call waits for Lambda to list the instance as terminated. */
  confirmWithinMs?: number;
  /** How long after a twice-lost launch the instance is looked for by name. */
  lookupWithinMs?: number;
  /** How long after a launch request whose answer never came an instance may still appear under its name. */
  launchSettleMs?: number;
  /** The account this provider speaks for (LambdaAccount.id); recorded at launch, so a release can tell a gone instance from another account's. */
  accountID?: string;
  /** list shows instances whose name starts with this; MACHINE_NAME_PREFIX unless set. */
  namePrefix?: string;
}

/** What a provider made for an account takes besides the account itself. */
export type LambdaAccountProviderOptions = Omit<LambdaProviderOptions, 'client' | 'pacer' | 'registeredKeys'>;

export class LambdaProvider implements MachineProvider, MachineInventory {
  private readonly pollMs: number;
  private readonly settleMs: number;

  constructor(private readonly opts: LambdaProviderOptions) {
    this.pollMs = opts.pollMs ?? 2000;
    this.settleMs = opts.launchSettleMs ?? DEFAULT_LAUNCH_SETTLE_MS;
  }

  /** A provider for one account: its client, its launch queue (shared by every Offer and Lease of it), its known keys. */
  static forAccount(account: LambdaAccount, opts: LambdaAccountProviderOptions = {}): LambdaProvider {
    return new LambdaProvider({ client: account.client, pacer: account.pacer, registeredKeys: account.registeredKeys, accountID: account.id, ...opts });
  }

  async list(signal?: AbortSignal): Promise<Machine[]> {
    const prefix = this.opts.namePrefix ?? MACHINE_NAME_PREFIX;
    const instances = await this.opts.client.listInstances(signal);
    return instances.filter((i): i is LambdaInstance & { name: string } => Boolean(i.name?.startsWith(prefix)) && LIVE(i)).map(toMachine);
  }

  async get(machineName: string, signal?: AbortSignal): Promise<Machine> {
    const found = (await this.opts.client.listInstances(signal)).find((i): i is LambdaInstance & { name: string } => i.name === machineName && LIVE(i));
    if (!found) throw new ProviderError('NotFound', `Lambda lists no instance named ${machineName}`);
    return toMachine(found);
  }

  async launch(req: LaunchRequest): Promise<Launched> {
    const s = this.opts.launch;
    if (!s) throw new ProviderError('InvalidRequest', 'this Lambda provider was made for release only');
    const { client } = this.opts;
    const state: LambdaState = { name: req.machineName, instanceType: s.instanceType, ...(this.opts.accountID ? { account: this.opts.accountID } : {}) };
    const fail = (err: unknown): never => {
      if (isProviderError(err)) throw new ProviderError(err.kind, err.message, { retryable: err.retryable, nothingMade: err.nothingMade, state: JSON.stringify(state), cause: err });
      throw new ProviderError('Unknown', err instanceof Error ? err.message : String(err), { state: JSON.stringify(state), cause: err });
    };
    try {
      const keyName = await this.retrying(() => this.ensureAccountKey(req.controllerPublicKey, req.signal), req.signal);
      const onlyRegion = s.fileSystems?.length ? await this.fileSystemRegion(s.fileSystems, req.signal) : undefined;
      const hostKey = generateControllerKey(`${req.machineName}-host`);
      state.hostKey = hostKey.publicKey;
      const userData = hostKeyUserData(hostKey);

      let lostBefore = false;
      let id: string | undefined;
      const tried = new Set<string>();
      for (let round = 0; round < 8 && !id; round++) {
        if (lostBefore) {
          // Sending it again while the lost one may still land would make two
          // instances: watch the name until it no longer can (outside the turn).
          const until = (state.unansweredLaunchAt ?? 0) + this.settleMs;
          if (until > Date.now()) req.onProgress(`the launch answer was lost; watching for ${req.machineName} until ${new Date(until).toISOString()} before asking again`);
          const found = await this.findByName(req.machineName, req.signal, Math.max(0, until - Date.now()));
          if (found) {
            id = found.id;
            // The one unanswered request has landed: nothing is left in flight.
            delete state.unansweredLaunchAt;
            req.onProgress(`the launch answer was lost; adopted instance ${found.id} by its name ${req.machineName}`);
            break;
          }
          delete state.unansweredLaunchAt;
        }
        if (this.opts.pacer.waiting > 0) req.onProgress(`waiting for a Lambda launch turn (${this.opts.pacer.waiting} ahead; one launch per 12s per account)`);
        const turn = await this.opts.pacer.turn(req.signal, round > 0);
        try {
          // Capacity and price as the request goes out, not as they were listed.
          const types = await this.retrying(() => client.listInstanceTypes(req.signal), req.signal);
          const t = types.find((x) => x.name === s.instanceType);
          if (!t) throw new ProviderError('InvalidRequest', `Lambda no longer lists instance type ${s.instanceType}`);
          const price = priceOf(t);
          const capped = overCap(price, s.maxPricePerHour);
          // Every launch sent so far was answered "no": nothing exists unless an answer was lost.
          if (capped) throw new ProviderError('OverPriceCap', `${s.instanceType} is ${capped}`, { nothingMade: !lostBefore });
          const region = pickRegion(t.regions.filter((r) => !tried.has(r)), s.regions, onlyRegion);
          if (!region) {
            const where = onlyRegion ? onlyRegion : s.regions?.length ? s.regions.join(', ') : 'any region';
            const dearer = dearerWithCapacity(types, { instanceTypes: s.instanceTypes, regions: s.regions, onlyRegion, maxPricePerHour: s.maxPricePerHour }, req.where);
            if (dearer) {
              throw new ProviderError('OverPriceCap', `Lambda has no capacity for ${s.instanceType} in ${where} now; ${dearer.instanceType} has capacity but is ${dearer.reason}`, { nothingMade: !lostBefore });
            }
            throw new ProviderError('InsufficientCapacity', `Lambda has no capacity for ${s.instanceType} in ${where} now; Leasehold does not wait for capacity, create the Lease again later or widen spec.lambda.regions`, { retryable: false });
          }
          state.region = region;
          req.onProgress(`launching ${s.instanceType} in ${region} at $${price.toFixed(2)}/h`);
          // Until the answer comes, the request may land at any time: a release
          // from the state recorded meanwhile waits for it.
          const answered = state.unansweredLaunchAt;
          try {
            const ids = await client.launch(
              { region, instanceType: s.instanceType, sshKeyNames: [keyName], fileSystemNames: s.fileSystems ? [...s.fileSystems] : undefined, name: req.machineName, userData },
              req.signal,
              () => {
                turn.sent();
                state.unansweredLaunchAt = Date.now();
              },
            );
            id = ids[0];
            if (!id) throw new ProviderError('Unknown', 'Lambda answered the launch without an instance ID', { answerLost: true });
            restore(state, answered);
          } catch (err) {
            // A refusal (429, no capacity, a 4xx) is an answer: nothing was launched.
            if (isProviderError(err) && !err.answerLost) restore(state, answered);
            if (isProviderError(err, 'RateLimited')) {
              this.opts.pacer.backOff(retryAfterMs(err) ?? 12_000);
              req.onProgress('Lambda asked to slow down (429); waiting for the next launch turn');
              continue;
            }
            if (isProviderError(err, 'InsufficientCapacity')) {
              tried.add(region);
              req.onProgress(`no capacity for ${s.instanceType} in ${region} after all; trying the next wanted region`);
              continue;
            }
            if (!isProviderError(err) || !err.answerLost) throw err;
            if (lostBefore) {
              // Lost twice: the instance is either there under its name, or nowhere.
              const found = await this.findByName(req.machineName, req.signal, this.opts.lookupWithinMs ?? 15_000);
              if (found) {
                id = found.id;
                req.onProgress(`two launch answers were lost; adopted instance ${found.id} by its name ${req.machineName}`);
                break;
              }
              throw new ProviderError('Unknown', `two launch answers from Lambda were lost and no instance named ${req.machineName} exists: ${err.message}`, { retryable: false });
            }
            lostBefore = true;
            req.onProgress(`the launch answer was lost (${err.message}); asking once more`);
          }
        } finally {
          turn.done();
        }
      }
      if (!id) throw new ProviderError('RateLimited', 'Lambda kept refusing the launch; giving up on this attempt');
      state.instanceID = id;
      const ready = await this.waitActive(id, req);
      return {
        target: { ssh: { host: ready.ip!, port: s.sshPort, user: s.login, hostKey: hostKey.publicKey } },
        state: JSON.stringify(state),
      };
    } catch (err) {
      return fail(err);
    }
  }

  async release(req: ReleaseRequest): Promise<void> {
    const { client } = this.opts;
    const st = parseLambdaState(req.state);
    const name = st.name || req.machineName;
    const started = Date.now();
    const settleUntil = this.settleUntil(st, req, started);
    const deadline = Math.max(started, settleUntil) + (this.opts.confirmWithinMs ?? 30_000);
    // The recorded ID, and whatever else lives under the lease's name: a
    // launch whose answer was lost may have landed late, and it is ours too.
    const ids = new Set(st.instanceID ? [st.instanceID] : []);
    const asked = new Set<string>();
    let requestedAt = Number.NEGATIVE_INFINITY;
    for (;;) {
      const at = Date.now();
      const listed = await this.retrying(() => client.listInstances(req.signal), req.signal);
      for (const i of listed) if (name && i.name === name && LIVE(i)) ids.add(i.id);
      const live: LambdaInstance[] = [];
      for (const id of ids) {
        const inst = listed.find((i) => i.id === id) ?? (await this.lookUp(id, st, asked, req.signal));
        if (inst && LIVE(inst)) live.push(inst);
      }
      if (live.length === 0 && at >= settleUntil) return;
      const toTerminate = live.filter((i) => i.status !== 'terminating');
      // Ask again if an earlier request seems not to have taken (its answer may have been lost).
      if (toTerminate.length && Date.now() - requestedAt > 5000) {
        requestedAt = Date.now();
        for (const i of toTerminate) asked.add(i.id);
        await client.terminate(toTerminate.map((i) => i.id), req.signal);
        continue;
      }
      if (Date.now() >= deadline) {
        throw new ProviderError('Unknown', `termination requested; Lambda still lists ${live.map((i) => `${i.id} as ${i.status}`).join(', ')}; checking again at the next check`);
      }
      // Waiting out a lost launch with nothing to end: look now and then, not at every poll.
      const wait = live.length ? Math.min(this.pollMs, 1000) : Math.max(this.pollMs, Math.min(5000, settleUntil - Date.now()));
      await abortableSleep(wait, req.signal);
    }
  }

  /** Until when a release must watch the name for a launch that may still land; 0 when none can. */
  private settleUntil(st: Partial<LambdaState>, req: ReleaseRequest, now: number): number {
    if (st.unansweredLaunchAt !== undefined) return st.unansweredLaunchAt + this.settleMs;
    // Nothing recorded although an acquire began (the controller stopped
    // mid-launch): a request may have gone out at any time before now, but
    // not after the acquire's own deadline. Counting from that deadline, and
    // not from each restart's now, lets a release end under repeated restarts.
    if (!req.state && req.acquireStarted) return Math.min(now, req.lastLaunchBy ?? now) + this.settleMs;
    return 0;
  }

  /**
   * An instance Lambda no longer lists. Lambda drops terminated instances and
   * then answers 404 for them: after a terminate request, or when this
   * account launched it, that means gone. Otherwise the key may be another
   * account's, and the instance still running there.
   */
  private async lookUp(id: string, st: Partial<LambdaState>, asked: ReadonlySet<string>, signal: AbortSignal): Promise<LambdaInstance | undefined> {
    const inst = await ignoreNotFound(this.opts.client.getInstance(id, signal));
    if (inst || asked.has(id) || (st.account !== undefined && st.account === this.opts.accountID)) return inst;
    throw new ProviderError('NotFound', `the API key cannot see instance ${id}; it may belong to another account, so keep the Secret and key this Lease was made with until it is released`);
  }

  /** A read that a transient error (5xx, lost answer, 429) should not fail outright: three tries. */
  private async retrying<T>(call: () => Promise<T>, signal: AbortSignal): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (attempt >= 3 || !isProviderError(err) || !err.retryable || signal.aborted) throw err;
        await abortableSleep(Math.min(this.pollMs * attempt, 2000), signal);
      }
    }
  }

  private async ensureAccountKey(publicKey: string, signal: AbortSignal): Promise<string> {
    const name = accountKeyName(publicKey);
    if (this.opts.registeredKeys?.has(name)) return name;
    const keys = await this.opts.client.listSshKeys(signal);
    if (!keys.some((k) => k.name === name)) {
      try {
        await this.opts.client.addSshKey(name, publicKey.trim(), signal);
      } catch (err) {
        // Another replica or launch may have registered it first.
        const again = await this.opts.client.listSshKeys(signal);
        if (!again.some((k) => k.name === name)) throw err;
      }
    }
    this.opts.registeredKeys?.add(name);
    return name;
  }

  private async fileSystemRegion(names: readonly string[], signal: AbortSignal): Promise<string> {
    const all = await this.opts.client.listFileSystems(signal);
    const regions = new Set<string>();
    for (const n of names) {
      const fs = all.find((f) => f.name === n);
      if (!fs) throw new ProviderError('InvalidRequest', `spec.lambda.fileSystems names ${n}, which this Lambda account does not have`);
      regions.add(fs.region);
    }
    if (regions.size !== 1) {
      throw new ProviderError('InvalidRequest', `spec.lambda.fileSystems are in ${[...regions].join(' and ')}; an instance can attach file systems of one region only`);
    }
    return [...regions][0]!;
  }

  private async findByName(name: string, signal: AbortSignal, withinMs = 0): Promise<LambdaInstance | undefined> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      try {
        const found = (await this.opts.client.listInstances(signal)).filter((i) => i.name === name && LIVE(i));
        if (found.length > 1) {
          // Should never happen; if it does, keep one and end the rest rather than pay for them.
          await this.opts.client.terminate(found.slice(1).map((i) => i.id), signal);
        }
        if (found[0]) return found[0];
      } catch (err) {
        if (!isProviderError(err) || !err.retryable || Date.now() >= deadline) throw err;
      }
      if (Date.now() >= deadline) return undefined;
      await abortableSleep(this.pollMs, signal);
    }
  }

  private async waitActive(id: string, req: LaunchRequest): Promise<LambdaInstance> {
    let said = '';
    for (;;) {
      let inst: LambdaInstance | undefined;
      try {
        inst = await this.opts.client.getInstance(id, req.signal);
      } catch (err) {
        // Right after a launch the instance may not be visible yet; transient errors are retried until the acquire timeout.
        if (!isProviderError(err) || (!err.retryable && err.kind !== 'NotFound')) throw err;
      }
      if (inst) {
        if (inst.status === 'active' && inst.ip) return inst;
        if (inst.status === 'terminated' || inst.status === 'terminating') {
          throw new ProviderError('Unknown', `instance ${id} went ${inst.status} while booting`);
        }
        if (inst.status !== said) {
          said = inst.status;
          req.onProgress(`instance ${id} is ${inst.status}`);
        }
      }
      await abortableSleep(this.pollMs, req.signal);
    }
  }
}
