// The id of a target's runner group changes only when someone renames or
// removes the group in GitHub, so it is kept between checks instead of
// listing the org's groups at every check. A kept id is dropped when GitHub
// answers that the group is gone (a runner config for it is refused), and
// after ttlMs, so that a group renamed under the same id is looked up again.
/** What names a group: the API it lives behind, its org, and its name as the spec writes it. */
export interface RunnerGroupRef {
  apiURL?: string | undefined;
  org: string;
  runnerGroup: string;
}

/** How long a kept id is trusted without GitHub saying otherwise. */
export const RUNNER_GROUP_TTL_MS = 15 * 60_000;

export class RunnerGroupIds {
  private readonly kept = new Map<string, { id: number; at: number }>();

  constructor(private readonly opts: { ttlMs?: number; now?: () => number } = {}) {}

  private static key(ref: RunnerGroupRef): string {
    return JSON.stringify([ref.apiURL ?? '', ref.org, ref.runnerGroup]);
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** The kept id, or what `lookUp` answers (kept for later checks); lookUp's errors pass through and nothing is kept. */
  async resolve(ref: RunnerGroupRef, lookUp: () => Promise<number>): Promise<number> {
    const key = RunnerGroupIds.key(ref);
    const kept = this.kept.get(key);
    if (kept && this.now() - kept.at < (this.opts.ttlMs ?? RUNNER_GROUP_TTL_MS)) return kept.id;
    const id = await lookUp();
    this.kept.set(key, { id, at: this.now() });
    return id;
  }

  /** GitHub said group `id` is gone: the next check lists the groups again. An id kept since for another answer stays. */
  forget(ref: RunnerGroupRef, id: number): void {
    const key = RunnerGroupIds.key(ref);
    if (this.kept.get(key)?.id === id) this.kept.delete(key);
  }
}

/** The ref of a target's spec.github. */
export const groupRef = (github: { apiURL?: string | undefined; org: string; runnerGroup: string }): RunnerGroupRef => ({ apiURL: github.apiURL, org: github.org, runnerGroup: github.runnerGroup });
