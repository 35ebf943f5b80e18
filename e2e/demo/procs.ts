// Finding processes by a directory their command line mentions: the demo
// checks it left nothing behind, and its test checks the same from outside.
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcInfo {
  pid: number;
  cmdline: string;
}

/** Live processes (zombies excluded) whose command line contains `needle`, this process excluded. */
export function processesMentioning(needle: string): ProcInfo[] {
  const found: ProcInfo[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      if (!cmdline.includes(needle)) continue;
      // "pid (comm) S ...": the state letter follows the last parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state === 'Z' || state === 'X') continue;
      found.push({ pid, cmdline });
    } catch {
      // gone while we looked
    }
  }
  return found;
}
