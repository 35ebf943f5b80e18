// The provider side of a RunnerTarget check: clients made from the
// target's Secrets (kept while the credentials stay the same, so their token
// caches live across checks), the observation read from Compute Engine and
// GitHub (the runner group's id among them, kept between checks), and
// the calls a Change makes. No credential leaves this file
// except inside the clients; errors carry the field and the fix, never a value.
import { createHash } from 'node:crypto';
import { isProviderError } from '../../../src/providers/errors.js';
import type { RunnerTarget } from '../../../src/api/index.js';
import { readSecretKey, SecretKeyError, type SecretDataReader } from '../../../src/kube/secrets.js';
import { GOOGLE_TOKEN_URL, parseServiceAccountKey, type AccessTokens } from '../../../src/providers/gce/auth.js';
import { GceClient } from '../../../src/providers/gce/client.js';
import type { ComputeInstances, GceInstance } from '../../../src/providers/gce/types.js';
import type { GitHubCredentials } from '../../../src/providers/github/auth.js';
import { GitHubClient } from '../../../src/providers/github/client.js';
import type { GitHubActions, RunnerGroup } from '../../../src/providers/github/types.js';
import { isPoolRunner, namePrefix, ownerLabels, ownsRunner } from '../policy/naming.js';
import { VM_STATUSES, type Observation, type PoolRunner, type PoolVM, type VMStatus, type WorkflowJob } from '../observation.js';
import { groupRef, type RunnerGroupIds } from './runnergroupids.js';
import { endpointRefusal, TargetSpecError, tokenEndpointRefusal, type TargetEndpointPolicy } from '../policy/endpoints.js';

export { TargetSpecError };

/** Labels every VM of a target carries: the target's UID (names may repeat across namespaces) and the installation. */
export const TARGET_UID_LABEL = 'leasehold-runnertarget-uid';
export const TARGET_NAME_LABEL = 'leasehold-runnertarget';
export const INSTALLATION_LABEL = 'leasehold-installation';
export const DEFAULT_IMAGE = 'projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64';

export interface TargetClients {
  gce: ComputeInstances;
  github: GitHubActions;
}

/** A credential problem. */
export class CredentialsError extends TargetSpecError {
  override readonly name = 'CredentialsError';

  constructor(message: string, reason: 'CredentialsInvalid' | 'OwnIdentityDisabled' = 'CredentialsInvalid') {
    super(message, reason);
  }
}

export const OWN_IDENTITY_DISABLED =
  'spec.gce.credentialsSecretRef is not set, and this controller does not call Compute Engine as its own identity for RunnerTargets (off by default, since anyone who may write a RunnerTarget could then spend as the controller): set spec.gce.credentialsSecretRef to a Secret with a service account key (key key.json), or have the platform admin install the controller with runnerTarget.gceOwnIdentity=true (--runner-gce-own-identity)';

export interface ProviderFactoryOptions {
  secrets: SecretDataReader;
  /** The endpoints an admin allowed the targets' credentials to go to. */
  endpoints: TargetEndpointPolicy;
  /**
   * The controller's own Compute Engine identity (--runner-gce-own-identity), for
   * targets without credentialsSecretRef, and the one endpoint its tokens may be
   * sent to; absent: such targets are refused.
   */
  ownIdentity?: { tokens: AccessTokens; endpoint: string } | undefined;
  onResult?: (provider: 'gce' | 'github', operation: string, code: string) => void;
}

/** Makes (and keeps) the clients of each target from its Secrets. */
export class TargetProviders {
  private readonly kept = new Map<string, { fingerprint: string; clients: TargetClients }>();

  constructor(private readonly opts: ProviderFactoryOptions) {}

  async clients(target: RunnerTarget): Promise<TargetClients> {
    const ns = target.metadata!.namespace!;
    const key = `${ns}/${target.metadata!.name}`;
    const { spec } = target;
    // Before any Secret is read: a credential never leaves for an endpoint the admin did not list.
    const refused = endpointRefusal(spec, this.opts.endpoints);
    if (refused) throw refused;
    const github = await this.githubCredentials(target);
    const gceRef = spec.gce.credentialsSecretRef;
    const own = this.opts.ownIdentity;
    if (!gceRef && !own) throw new CredentialsError(OWN_IDENTITY_DISABLED, 'OwnIdentityDisabled');
    // spec.gce.endpoint is the target writer's to choose: the controller's own token goes nowhere else than its own endpoint.
    if (!gceRef && !sameEndpoint(spec.gce.endpoint, own!.endpoint)) throw new CredentialsError(`spec.gce.endpoint ${spec.gce.endpoint} is not ${own!.endpoint}, and the controller sends its own Compute Engine token nowhere else: remove spec.gce.endpoint, or set spec.gce.credentialsSecretRef`);
    const keyJson = gceRef ? await this.read(gceRef, ns, { field: 'spec.gce.credentialsSecretRef', what: 'the Compute Engine service account key (JSON)', defaultKey: 'key.json' }) : undefined;
    // Asked at every check (from its cache), so that a lost identity ends the check as a credentials problem, before any call.
    if (keyJson === undefined) await ownToken(own!.tokens);
    const fingerprint = createHash('sha256').update(JSON.stringify([github, keyJson ?? null, spec.gce.endpoint, spec.gce.project, spec.github.apiURL, spec.github.org])).digest('hex');
    const kept = this.kept.get(key);
    if (kept?.fingerprint === fingerprint) return kept.clients;
    const onResult = (op: string, code: string) => this.opts.onResult?.('gce', op, code);
    const clients: TargetClients = {
      gce: keyJson === undefined ? new GceClient({ tokens: own!.tokens, project: spec.gce.project, endpoint: own!.endpoint, onResult }) : keyClient(keyJson, spec.gce.project, spec.gce.endpoint, this.opts.endpoints, onResult),
      github: new GitHubClient({ org: spec.github.org, credentials: github, api: spec.github.apiURL, onResult: (op, code) => this.opts.onResult?.('github', op, code) }),
    };
    this.kept.set(key, { fingerprint, clients });
    return clients;
  }

  forget(key: string): void {
    this.kept.delete(key);
  }

  private async githubCredentials(target: RunnerTarget): Promise<GitHubCredentials> {
    const ns = target.metadata!.namespace!;
    const g = target.spec.github;
    if (g.tokenSecretRef) return { token: await this.read(g.tokenSecretRef, ns, { field: 'spec.github.tokenSecretRef', what: 'the GitHub token', defaultKey: 'token' }) };
    const ref = g.appSecretRef!;
    const app = (key: string, what: string) => this.read({ name: ref.name, key }, ns, { field: 'spec.github.appSecretRef', what, defaultKey: key });
    return { appId: await app('appID', 'the GitHub App ID'), installationId: await app('installationID', 'the GitHub App installation ID'), privateKey: await app('privateKey', 'the GitHub App private key (PEM)') };
  }

  // Always the target's own namespace, whatever the reference says: a team that
  // may write a RunnerTarget must not reach another namespace's Secrets.
  private async read(ref: { name: string; key?: string | undefined }, ns: string, use: { field: string; what: string; defaultKey: string }): Promise<string> {
    try {
      return await readSecretKey(this.opts.secrets, { name: ref.name, key: ref.key, namespace: ns }, use);
    } catch (err) {
      if (err instanceof SecretKeyError) throw new CredentialsError(err.message);
      throw err;
    }
  }
}

function sameEndpoint(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}

async function ownToken(tokens: AccessTokens): Promise<void> {
  try {
    await tokens.token();
  } catch (err) {
    throw new CredentialsError((err as Error).message);
  }
}

function keyClient(keyJson: string, project: string, endpoint: string, endpoints: TargetEndpointPolicy, onResult: (op: string, code: string) => void): GceClient {
  let parsed;
  try {
    parsed = parseServiceAccountKey(keyJson);
  } catch (err) {
    throw new CredentialsError(`spec.gce.credentialsSecretRef: ${(err as Error).message}`);
  }
  // The key file names its token endpoint (token_uri), as google-auth-library
  // reads it; whoever wrote the Secret chose it, so it is held to the admin's list.
  const tokenUrl = tokenUriOf(keyJson) ?? GOOGLE_TOKEN_URL;
  const refused = tokenEndpointRefusal(tokenUrl, endpoints);
  if (refused) throw refused;
  return new GceClient({ key: parsed, project, endpoint, tokenUrl, onResult });
}

function tokenUriOf(json: string): string | undefined {
  try {
    const uri = (JSON.parse(json) as { token_uri?: unknown }).token_uri;
    return typeof uri === 'string' && uri !== '' ? uri : undefined;
  } catch {
    return undefined;
  }
}

export function vmLabels(target: RunnerTarget, installationID: string): Record<string, string> {
  const value = (s: string) => s.toLowerCase().replace(/[^a-z0-9_-]/g, '_').slice(0, 63);
  return { [TARGET_UID_LABEL]: value(target.metadata!.uid!), [TARGET_NAME_LABEL]: value(target.metadata!.name!), [INSTALLATION_LABEL]: value(installationID) };
}

/**
 * Where the controller reaches a host: its internal address when the spec
 * gives hosts no external IP (the controller then runs in their VPC), else
 * its external one, or the internal one while it has none.
 */
export function hostAddress(i: Pick<GceInstance, 'address' | 'internalAddress' | 'externalAddress'>, externalIP: boolean): string | undefined {
  if (!externalIP) return i.internalAddress ?? i.address;
  return i.externalAddress ?? i.internalAddress ?? i.address;
}

/** An instance as the pool sees it: a status not in VM_PHASES is UNKNOWN (never capacity), with what Compute Engine said kept for the report. */
export function poolVM(i: GceInstance, externalIP = true): PoolVM {
  const known = (VM_STATUSES as readonly string[]).includes(i.status) && i.status !== 'UNKNOWN';
  const status: VMStatus = known ? (i.status as VMStatus) : 'UNKNOWN';
  return {
    name: i.name,
    zone: i.zone,
    machineType: i.machineType,
    status,
    createdAt: i.creationTimestamp ?? new Date().toISOString(),
    provisioningModel: i.spot ? 'SPOT' : 'STANDARD',
    address: hostAddress(i, externalIP),
    ...(known ? {} : { reportedStatus: i.status.replace(/[^A-Za-z0-9_-]/g, '?').slice(0, 40) || '(empty)' }),
  };
}

// spec.github.runnerGroup names the org's runner group the runners join;
// generate-jitconfig takes its id, so the name is looked up
// (GET /orgs/{org}/actions/runner-groups) when no id is kept for it
// (runnergroupids.ts), and every runner config of the check uses the answer.
/** The id of the group named `name` (exactly as GitHub shows it), or why there is none. */
export function findRunnerGroup(groups: readonly RunnerGroup[], name: string, org: string): { id: number } | { problem: string } {
  const found = groups.find((g) => g.name === name);
  if (found) return { id: found.id };
  const near = groups.find((g) => g.name.toLowerCase() === name.toLowerCase());
  const names = groups.map((g) => g.name).slice(0, 20).join(', ') || 'none';
  const hint = near ? `did you mean "${near.name}"? Names are compared exactly` : `the org has: ${names}`;
  return { problem: `spec.github.runnerGroup "${name}" is not a runner group of the GitHub org ${org} (${hint}); create the group in the org's Actions settings, or set spec.github.runnerGroup to an existing one` };
}

/** Looks the target's runner group up; TargetSpecError (reason RunnerGroupUnknown) when the org has none of that name. */
export async function resolveRunnerGroup(github: GitHubActions, name: string, org: string, signal?: AbortSignal): Promise<number> {
  const found = findRunnerGroup(await github.listRunnerGroups(signal), name, org);
  if ('problem' in found) throw new TargetSpecError(found.problem, 'RunnerGroupUnknown');
  return found.id;
}

/** Everything a check reads from the providers: the target's VMs in every zone, the pool's runners, the jobs of the followed repositories. */
export async function observePool(target: RunnerTarget, clients: TargetClients, installationID: string, signal?: AbortSignal, groups?: RunnerGroupIds): Promise<Observation> {
  const { spec } = target;
  const labels = vmLabels(target, installationID);
  const filter = { labels: { [TARGET_UID_LABEL]: labels[TARGET_UID_LABEL]!, [INSTALLATION_LABEL]: labels[INSTALLATION_LABEL]! } };
  // One aggregatedList for every zone; a zone it could not read is reported, and the policies treat its VMs as unseen, not gone.
  const listing = await clients.gce.listAll(filter, signal);
  const vms = listing.instances.map((i) => poolVM(i, spec.gce.externalIP !== false));
  const unreachableZones = listing.unreachable.map((u) => u.zone);
  const prefix = namePrefix(target.metadata!.name!, spec.gce.namePrefix);
  // Orphans, ghosts, scale-down and teardown all start from this list: a runner of the same name but another target or installation is never in it.
  const owner = ownerLabels(target.metadata!.uid!, installationID);
  // A pool being deleted registers no runner: an unknown group must not hold its teardown.
  const deleting = !!target.metadata?.deletionTimestamp;
  let runnerGroupId: number | undefined;
  try {
    const lookUp = () => resolveRunnerGroup(clients.github, spec.github.runnerGroup, spec.github.org, signal);
    runnerGroupId = groups ? await groups.resolve(groupRef(spec.github), lookUp) : await lookUp();
  } catch (err) {
    if (!deleting) throw err;
  }
  const runners: PoolRunner[] = (await clients.github.listRunners(signal))
    .filter((r) => isPoolRunner(r.name, prefix) && ownsRunner(r.labels, owner))
    .map((r) => ({ id: r.id, name: r.name, status: r.status === 'online' ? 'online' : 'offline', busy: r.busy, labels: r.labels }));
  const jobs: WorkflowJob[] = [];
  // A repository GitHub answers 404 for is left out, not the whole check: the others' jobs are still served.
  const missingRepositories: string[] = [];
  for (const repo of spec.github.repositories) {
    try {
      jobs.push(...(await repositoryJobs(clients.github, repo, signal)));
    } catch (err) {
      if (!isProviderError(err, 'NotFound')) throw err;
      missingRepositories.push(repo);
    }
  }
  // A job seen in both lists (it started between them) counts once.
  const unique = [...new Map(jobs.map((j) => [j.id, j])).values()];
  return { at: Date.now(), jobs: unique, runners, vms, probes: new Map(), ...(runnerGroupId === undefined ? {} : { runnerGroupId }), ...(missingRepositories.length ? { missingRepositories } : {}), ...(unreachableZones.length ? { unreachableZones } : {}) };
}

async function repositoryJobs(github: GitHubActions, repo: string, signal?: AbortSignal): Promise<WorkflowJob[]> {
  const jobs: WorkflowJob[] = [];
  for (const status of ['queued', 'in_progress'] as const) {
    for (const run of await github.listRuns(repo, status, signal)) {
      let listed;
      try {
        listed = await github.listJobs(repo, run.id, signal);
      } catch (err) {
        // A run deleted between the two listings has no jobs to serve.
        if (isProviderError(err, 'NotFound')) continue;
        throw err;
      }
      for (const j of listed) {
        if (j.status !== 'queued' && j.status !== 'in_progress') continue;
        jobs.push({ id: j.id, repository: repo, status: j.status, labels: j.labels, runId: j.runId, runAttempt: j.runAttempt, ...(j.runnerName ? { runnerName: j.runnerName } : {}) });
      }
    }
  }
  return jobs;
}
