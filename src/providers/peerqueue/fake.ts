// An in-memory peer queue for tests above the provider: Jobs kept by name
// with a resourceVersion bumped on every write, claims that are
// compare-and-swap on it (so two lenders racing for one Job see exactly one
// win), status writes checked against the API server's Job status rules,
// every call recorded, and the next calls of an operation failing with
// whatever error a test sets (a peer that went away, a revoked token).
import type { V1Job } from '@kubernetes/client-node';
import { PeerQueueError } from './errors.js';
import { jobStatusProblems } from './jobstatus.js';
import {
  CLAIMED_BY_ANNOTATION,
  LENDABLE_LABEL,
  PEER_LENDING_MANAGER,
  REFUSED_ANNOTATION,
  type ClaimResult,
  type PeerQueue,
  type StatusWrite,
} from './types.js';

export type FakePeerOperation = 'listQueued' | 'listClaimed' | 'get' | 'claim' | 'release' | 'refuse' | 'writeStatus';

const finished = (job: V1Job) => job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ?? false;
const copy = (job: V1Job): V1Job => structuredClone(job);

export class FakePeerQueue implements PeerQueue {
  readonly calls: { op: FakePeerOperation; name?: string }[] = [];
  private readonly jobs = new Map<string, V1Job>();
  private readonly failures = new Map<FakePeerOperation, PeerQueueError[]>();
  private version = 0;
  private created = 0;

  /** Adds a Job as the peer would create it: lendable, managed by lenders, with a uid and creation time. */
  add(job: V1Job): V1Job {
    const name = job.metadata?.name ?? `job-${this.created}`;
    const stored: V1Job = copy(job);
    stored.metadata = {
      namespace: 'queue',
      uid: `00000000-0000-4000-8000-${String(this.created).padStart(12, '0')}`,
      creationTimestamp: new Date(Date.UTC(2026, 11, 3, 9, 0, this.created)),
      ...stored.metadata,
      name,
      labels: { [LENDABLE_LABEL]: 'true', ...stored.metadata?.labels },
      resourceVersion: this.bump(),
    };
    stored.spec = { managedBy: PEER_LENDING_MANAGER, template: { spec: { containers: [] } }, ...stored.spec };
    this.created++;
    this.jobs.set(name, stored);
    return copy(stored);
  }

  /** The Job as stored now, without recording a call. */
  peek(name: string): V1Job | undefined {
    const job = this.jobs.get(name);
    return job && copy(job);
  }

  /** The next `times` calls of `op` fail with `err`. */
  failNext(op: FakePeerOperation, err: PeerQueueError, times = 1): void {
    this.failures.set(op, [...(this.failures.get(op) ?? []), ...Array<PeerQueueError>(times).fill(err)]);
  }

  /** How many calls wrote to the peer. */
  get writes(): number {
    return this.calls.filter((c) => ['claim', 'release', 'refuse', 'writeStatus'].includes(c.op)).length;
  }

  async listQueued(): Promise<V1Job[]> {
    this.enter('listQueued');
    return [...this.jobs.values()]
      .filter((j) => j.metadata?.labels?.[LENDABLE_LABEL] === 'true' && j.spec?.managedBy === PEER_LENDING_MANAGER)
      .filter((j) => !j.metadata?.annotations?.[CLAIMED_BY_ANNOTATION] && !j.metadata?.annotations?.[REFUSED_ANNOTATION] && !finished(j))
      .map(copy);
  }

  async listClaimed(prefix: string): Promise<V1Job[]> {
    this.enter('listClaimed');
    return [...this.jobs.values()].filter((j) => j.metadata?.annotations?.[CLAIMED_BY_ANNOTATION]?.startsWith(prefix)).map(copy);
  }

  async get(name: string): Promise<V1Job> {
    this.enter('get', name);
    return copy(this.find(name));
  }

  async claim(name: string, resourceVersion: string, by: string): Promise<ClaimResult> {
    this.enter('claim', name);
    return this.swap(name, resourceVersion, (a) => {
      if (a[CLAIMED_BY_ANNOTATION]) return `claimed by ${a[CLAIMED_BY_ANNOTATION]}`;
      a[CLAIMED_BY_ANNOTATION] = by;
      return undefined;
    });
  }

  async release(name: string, resourceVersion: string, by: string): Promise<ClaimResult> {
    this.enter('release', name);
    return this.swap(name, resourceVersion, (a) => {
      if (a[CLAIMED_BY_ANNOTATION] !== by) return `claimed by ${a[CLAIMED_BY_ANNOTATION] ?? 'no one'}, not ${by}`;
      delete a[CLAIMED_BY_ANNOTATION];
      return undefined;
    });
  }

  async refuse(name: string, resourceVersion: string, reason: string): Promise<ClaimResult> {
    this.enter('refuse', name);
    return this.swap(name, resourceVersion, (a) => {
      a[REFUSED_ANNOTATION] = reason;
      return undefined;
    });
  }

  async writeStatus(name: string, write: StatusWrite): Promise<V1Job> {
    this.enter('writeStatus', name);
    const job = this.find(name);
    const problems = jobStatusProblems(job, write.status);
    if (problems.length > 0) throw new PeerQueueError('Invalid', `Job.batch "${name}" is invalid: ${problems.join('; ')}`);
    job.status = structuredClone(write.status);
    job.metadata!.annotations = { ...job.metadata!.annotations, ...write.annotations };
    job.metadata!.resourceVersion = this.bump();
    return copy(job);
  }

  private swap(name: string, resourceVersion: string, change: (annotations: Record<string, string>) => string | undefined): ClaimResult {
    const job = this.find(name);
    if (job.metadata?.resourceVersion !== resourceVersion) {
      return { kind: 'conflict', message: `Job ${name} is at resourceVersion ${job.metadata?.resourceVersion}, not ${resourceVersion}` };
    }
    const annotations = { ...job.metadata.annotations };
    const refusal = change(annotations);
    if (refusal) return { kind: 'conflict', message: `Job ${name} is ${refusal}` };
    job.metadata.annotations = annotations;
    job.metadata.resourceVersion = this.bump();
    return { kind: 'claimed', job: copy(job) };
  }

  private enter(op: FakePeerOperation, name?: string): void {
    this.calls.push(name === undefined ? { op } : { op, name });
    const err = this.failures.get(op)?.shift();
    if (err) throw err;
  }

  private find(name: string): V1Job {
    const job = this.jobs.get(name);
    if (!job) throw new PeerQueueError('NotFound', `jobs.batch "${name}" not found`);
    return job;
  }

  private bump(): string {
    return String(++this.version);
  }
}
