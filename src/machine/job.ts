// The remote command lines of a job run through leasehold-run, apart from
// the agent's install and probe: the CLI sends them on every run and must
// not load zod to.

/**
 * The remote command that runs `command` (a shell command line, as ssh
 * takes one) as a job through leasehold-run, so that probes count the
 * machine busy while it runs. `tag` ([A-Za-z0-9-]) becomes the inner
 * shell's $0, so interruptJobCommand can find the job's process group.
 */
export function jobCommand(command: string, tag: string): string {
  return sh(`exec "\${LEASEHOLD_HOME:-$HOME/.leasehold}/bin/leasehold-run" sh -c ${quote(command)} ${quote(jobName(tag))}`);
}

/**
 * A command that sends SIGINT to the process group of the job `tag`, as
 * Ctrl-C in a terminal would. An SSH "signal" request cannot do it
 * everywhere: OpenSSH refuses it for root logins ("session signalling
 * requires privilege separation"), and says nothing back either way.
 */
export function interruptJobCommand(tag: string): string {
  // -o: the job's oldest process, never this command's own shell.
  return sh(`pid=$(pgrep -o -f ${quote(jobName(tag))}) && kill -INT -$(ps -o pgid= -p "$pid" | tr -d ' ')`);
}

function jobName(tag: string): string {
  if (!/^[A-Za-z0-9-]{1,64}$/.test(tag)) throw new Error(`a job tag is letters, digits and hyphens, not ${JSON.stringify(tag)}`);
  return `leasehold-job-${tag}`;
}

export function sh(script: string): string {
  return `sh -c ${quote(script)}`;
}

function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
