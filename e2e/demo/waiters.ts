// Steps of a demo that wait on what a watch has seen: each check runs again
// whenever the watch sees something, until it settles or the time is up.

/** What a check found: `{ value }` settles, an Error rejects, undefined waits on. */
export type Outcome<T> = { value: T } | Error | undefined;

export class Waiters {
  private checks: Array<() => void> = [];

  wait<T>(timeoutMessage: string, timeoutMs: number, check: () => Outcome<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => done(new Error(timeoutMessage)), timeoutMs);
      const run = () => {
        const outcome = check();
        if (outcome) done(outcome);
      };
      const done = (outcome: Exclude<Outcome<T>, undefined>) => {
        clearTimeout(deadline);
        this.checks = this.checks.filter((c) => c !== run);
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome.value);
      };
      this.checks.push(run);
      run();
    });
  }

  wake(): void {
    for (const c of [...this.checks]) c();
  }
}
