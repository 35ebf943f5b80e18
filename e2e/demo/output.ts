// The demo's terminal output: every line stamped with the seconds since start.
export const started = Date.now();
export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

export function say(line: string): void {
  process.stdout.write(`[${seconds(Date.now() - started).padStart(6)}] ${line}\n`);
}

export function block(text: string, indent = '    '): void {
  for (const line of text.trimEnd().split('\n')) process.stdout.write(`${indent}${line}\n`);
}

/** Thrown by a demo step once Ctrl-C (or SIGTERM) has started the teardown. */
export class Stopping extends Error {}
