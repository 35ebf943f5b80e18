// The agent: a small POSIX sh script the controller installs on every
// machine over SSH. It replaces authorized_keys, measures the machine and
// counts the jobs running on it.
//
// Busy, precisely: the probe reports three kinds of work, and the Offer's
// spec.busyWhen says which of them keep the machine: jobs (below), open SSH
// sessions other than the controller's (ssh_sessions in the script), and
// processes holding a GPU (nvidia-smi --query-compute-apps).
//
// Jobs: the agent also installs `$LEASEHOLD_HOME/bin/leasehold-run`
// (LEASEHOLD_HOME defaults to ~/.leasehold). Running `leasehold-run CMD...`
// records the wrapper's PID (and its start time) in `$LEASEHOLD_HOME/jobs/<pid>`
// and removes the record when CMD ends. `busy` is the number of records whose
// process is still alive; the probe deletes the rest.
// `jobs` is how many jobs leasehold-run has
// started since the agent was first installed, so that a job that started and
// ended between two probes still shows as activity.
import { z } from 'zod';
import { MAX_SSH_KEYS } from '../api/lease.js';
import { parsePublicKey } from './keys.js';
import type { SshSession } from './ssh.js';
import { sh } from './job.js';

export { interruptJobCommand, jobCommand } from './job.js';

export const AGENT_SCRIPT = `#!/bin/sh
# leasehold-agent, installed and kept up to date by the Leasehold controller.
#   leasehold-agent probe       print this machine's facts as one JSON line
#   leasehold-agent keys        replace authorized_keys with the lines on stdin
#   leasehold-run CMD [ARG...]  run CMD as a job; the machine is busy while it runs
set -u
LC_ALL=C
export LC_ALL

bin=$(cd "$(dirname "$0")" && pwd)
home=$(dirname "$bin")
jobs="$home/jobs"
started_log="$home/jobs.log"

# The start time of a process, in clock ticks since boot (field 22 of
# /proc/PID/stat, after the command name, which may hold spaces); empty where
# there is no /proc.
start_time() {
  if [ -r "/proc/$1/stat" ]; then
    sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
  fi
}

# nvidia-smi, bounded: a driver that hangs must not hold the probe, and a
# check that cannot answer is reported as such, not taken for an idle machine.
smi() {
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 2 "\${LEASEHOLD_NVIDIA_SMI_TIMEOUT:-10}" nvidia-smi "$@"
  else
    nvidia-smi "$@"
  fi
}

# The evidence of a failed nvidia-smi call, fit for a JSON string: what was
# asked, how it ended, and the first line it printed.
smi_failure() {
  if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
    how="did not answer within \${LEASEHOLD_NVIDIA_SMI_TIMEOUT:-10}s"
  else
    how="exited $2"
  fi
  said=$({ cat "$smi_err" 2>/dev/null; printf '%s\\n' "$3"; } | grep -m1 '[^[:space:]]' | tr -d '\\000-\\037"\\\\' | cut -c1-200)
  printf 'nvidia-smi %s %s%s' "$1" "$how" "\${said:+: $said}"
}

# Open SSH sessions on this machine, other than the one this probe runs in
# (the controller's). A session is an authenticated connection: its sshd
# process is titled "sshd: USER" or "sshd: USER@TTY" (sshd-session on
# OpenSSH 9.8 and later); titles with a bracket ([priv], [net], [preauth],
# [listener]) are monitors, connections still logging in and listeners, so a
# port scan never counts. The controller opens one connection at a time to a
# machine and runs this probe inside it, so its own session is the sshd
# session this process descends from. Only sessions of the same listening
# sshd count (machines may share a host), and those left behind by a
# restarted sshd (no listener above them).
ssh_sessions() {
  ps -eo pid=,ppid=,comm=,args= 2>/dev/null | awk -v self="$$" '
    function authed(t) { return t ~ /^sshd(-session)?: [^ []+$/ }
    function perconn(t) { return t ~ /^sshd(-session)?: [^ []+( \\[[a-z]+\\])?$/ }
    function top(p,  n) { n = 0; while ((parent[p] in sshd) && sshd[parent[p]] && n++ < 64) p = parent[p]; return p }
    {
      args = $0
      sub(/^ *[0-9]+ +[0-9]+ +[^ ]+ +/, "", args)
      parent[$1] = $2; sshd[$1] = ($3 ~ /^sshd(-session)?$/); title[$1] = args; seen++
    }
    END {
      if (!seen) exit 1
      own = ""; p = self; n = 0
      while ((p in parent) && n++ < 64) {
        if (sshd[p] && authed(title[p])) { own = p; break }
        p = parent[p]
      }
      mine = own == "" ? "" : top(own)
      count = 0
      for (p in title) {
        if (!sshd[p] || !authed(title[p]) || p == own) continue
        t = top(p)
        if (mine == "" || t == mine || perconn(title[t])) count++
      }
      print count
    }'
}

run() {
  if [ $# -eq 0 ]; then
    echo "usage: leasehold-run CMD [ARG...]" >&2
    exit 2
  fi
  mkdir -p "$jobs"
  record="$jobs/$$"
  trap 'rm -f "$record" "$jobs/.$$"' EXIT
  # Stay alive until CMD ends even when signalled, so the record lasts as
  # long as the job does, and exit with CMD's status: a Ctrl-C forwarded to
  # the job's process group reaches CMD too, and its caller wants CMD's code.
  # (A no-op handler, not an ignored signal: CMD must still see it.)
  trap ':' HUP INT TERM
  # The record is written aside and renamed in: a probe must never see it
  # half written and take the job for a dead one.
  start_time $$ > "$jobs/.$$" && mv -f "$jobs/.$$" "$record"
  echo "$$ $(date +%s)" >> "$started_log"
  "$@"
}

probe() {
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  machine=$(uname -m)
  case "$machine" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) arch=$machine ;;
  esac
  # nproc would report OMP_NUM_THREADS instead of the CPUs, were it set.
  unset OMP_NUM_THREADS OMP_THREAD_LIMIT
  cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 0)
  if [ -r /proc/meminfo ]; then
    memory=$(awk '/^MemTotal:/ { printf "%d", $2 / 1048576 + 0.5 }' /proc/meminfo)
  else
    memory=$(sysctl -n hw.memsize 2>/dev/null | awk '{ printf "%d", $1 / 1073741824 + 0.5 }')
  fi

  gpu_json=',"gpus":0'
  gpu_procs=0
  gpu_error=''
  smi_err="$home/.nvidia-smi.err"
  if command -v nvidia-smi >/dev/null 2>&1; then
    # One "NAME, MIB" line per GPU; vramGiB is the smallest GPU's memory.
    # stderr is kept aside: when nvidia-smi fails, what it said is the evidence.
    smi_out=$(smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>"$smi_err")
    smi_code=$?
    if [ "$smi_code" -ne 0 ]; then
      gpu_error=$(smi_failure "--query-gpu" "$smi_code" "$smi_out")
    else
      gpu_json=$(printf '%s\\n' "$smi_out" | awk -F',' '
        NF >= 2 {
          name = $1; mib = $2
          gsub(/[^ -~]|["\\\\]/, "", name); sub(/^ +/, "", name); sub(/ +$/, "", name)
          gsub(/ /, "", mib)
          if (name == "") next
          n++
          if (n == 1) model = name
          if (mib ~ /^[0-9]+$/ && (min == "" || mib + 0 < min)) min = mib + 0
        }
        END {
          if (n == 0) { printf ",\\"gpus\\":0"; exit }
          printf ",\\"gpus\\":%d,\\"gpuModel\\":\\"%s\\"", n, model
          if (min != "") printf ",\\"vramGiB\\":%d", min / 1024 + 0.5
        }')
      [ -n "$gpu_json" ] || gpu_json=',"gpus":0'
      # Processes holding a GPU (a training run in a detached tmux): each PID
      # once, however many GPUs it holds.
      smi_out=$(smi --query-compute-apps=pid --format=csv,noheader 2>"$smi_err")
      smi_code=$?
      if [ "$smi_code" -ne 0 ]; then
        gpu_error=$(smi_failure "--query-compute-apps" "$smi_code" "$smi_out")
      else
        gpu_procs=$(printf '%s\\n' "$smi_out" | awk '$1 ~ /^[0-9]+$/ { print $1 }' | sort -u | awk 'END { print NR }')
      fi
    fi
  fi
  rm -f "$smi_err"
  if [ -n "$gpu_error" ]; then gpu_json="$gpu_json,\\"gpuError\\":\\"$gpu_error\\""; fi

  if ! sessions=$(ssh_sessions); then
    echo "leasehold-agent: cannot count SSH sessions: ps -eo pid,ppid,comm,args failed; install procps" >&2
    exit 3
  fi

  # busy: jobs started through leasehold-run that are still running. A record
  # whose process is gone (or whose PID now belongs to another process) is
  # stale and removed.
  busy=0
  if [ -d "$jobs" ]; then
    for record in "$jobs"/*; do
      [ -f "$record" ] || continue
      pid=\${record##*/}
      case "$pid" in
        '' | *[!0-9]*) rm -f "$record"; continue ;;
      esac
      if kill -0 "$pid" 2>/dev/null && [ "$(cat "$record" 2>/dev/null)" = "$(start_time "$pid")" ]; then
        busy=$((busy + 1))
      else
        rm -f "$record"
      fi
    done
  fi
  started=0
  if [ -f "$started_log" ]; then started=$(awk 'END { print NR }' "$started_log"); fi

  printf '{"os":"%s","arch":"%s","cpus":%d,"memoryGiB":%d%s,"busy":%d,"jobs":%d,"sessions":%d,"gpuProcesses":%d}\\n' \\
    "$os" "$arch" "\${cpus:-0}" "\${memory:-0}" "$gpu_json" "$busy" "$started" "\${sessions:-0}" "\${gpu_procs:-0}"
}

keys() {
  target="\${LEASEHOLD_AUTHORIZED_KEYS:-$HOME/.ssh/authorized_keys}"
  dir=$(dirname "$target")
  umask 077
  mkdir -p "$dir" || exit 1
  tmp="$dir/.leasehold-authorized_keys.$$"
  if ! cat > "$tmp"; then rm -f "$tmp"; exit 1; fi
  # An empty authorized_keys would lock everyone out, the controller too.
  if ! grep -q '[^[:space:]]' "$tmp"; then
    rm -f "$tmp"
    echo "refusing to write an empty authorized_keys" >&2
    exit 1
  fi
  # Renamed into place, so sshd never reads a half-written file.
  if ! { chmod 600 "$tmp" && mv -f "$tmp" "$target"; }; then rm -f "$tmp"; exit 1; fi
}

case "\${0##*/}" in
  leasehold-run)
    run "$@"
    exit $?
    ;;
esac
case "\${1:-}" in
  probe) probe ;;
  keys) keys ;;
  *)
    echo "usage: leasehold-agent probe|keys, or leasehold-run CMD [ARG...]" >&2
    exit 2
    ;;
esac
`;

// Commands run through the remote user's login shell, which may not be a
// POSIX one: each is handed to sh as one single-quoted line.
const AGENT = '"${LEASEHOLD_HOME:-$HOME/.leasehold}/bin/leasehold-agent"';
const INSTALL = [
  'set -eu',
  'umask 022',
  'home="${LEASEHOLD_HOME:-$HOME/.leasehold}"',
  'mkdir -p "$home/bin" "$home/jobs"',
  'tmp="$home/bin/.leasehold-agent.$$"',
  'cat > "$tmp"',
  'chmod 755 "$tmp"',
  // Replaced by rename, never rewritten in place: sh reads a script as it
  // runs it, and running leasehold-run jobs are reading the old one.
  'mv -f "$tmp" "$home/bin/leasehold-agent"',
  'ln -sf leasehold-agent "$home/bin/leasehold-run"',
].join('; ');

const TIMEOUT_MS = 30_000;

/** What the agent functions need of a session: SshSession, or anything that runs a command the same way. */
export type RemoteShell = Pick<SshSession, 'exec'>;

export interface Probe {
  /** uname -s, lower case: linux, darwin, ... */
  os: string;
  /** amd64 or arm64 (from uname -m x86_64 / aarch64); other machines as uname -m says. */
  arch: string;
  cpus: number;
  /** MemTotal rounded to the nearest GiB. */
  memoryGiB: number;
  gpus: number;
  /** The first GPU's name, as nvidia-smi reports it; only when gpus > 0. */
  gpuModel?: string;
  /** Memory of the smallest GPU, rounded to the nearest GiB; only when gpus > 0. */
  vramGiB?: number;
  /** Jobs started through leasehold-run that are still running. */
  busy: number;
  /** Jobs started through leasehold-run since the agent was first installed. */
  jobs: number;
  /** Open SSH sessions other than the one the probe ran in (the controller's). */
  sessions: number;
  /** Processes holding a GPU, by nvidia-smi --query-compute-apps; 0 without nvidia-smi. */
  gpuProcesses: number;
  /** Set when nvidia-smi is there but failed or did not answer in time: the evidence. */
  gpuError?: string;
}

const count = z.number().int().min(0);
const ProbeSchema = z.object({
  os: z.string().min(1).max(32),
  arch: z.string().min(1).max(32),
  cpus: count,
  memoryGiB: count,
  gpus: count,
  gpuModel: z.string().max(256).optional(),
  vramGiB: count.optional(),
  busy: count,
  jobs: count,
  sessions: count,
  gpuProcesses: count,
  gpuError: z.string().max(512).optional(),
});

/**
 * The authorized_keys a machine gets: the controller's key first, then each
 * device key once. Throws, naming the key, when one is not a valid OpenSSH
 * public key line or there are more than MAX_SSH_KEYS.
 */
export function authorizedKeys(controllerKey: string, deviceKeys: readonly string[]): string {
  if (deviceKeys.length > MAX_SSH_KEYS) {
    throw new Error(`a Lease admits at most ${MAX_SSH_KEYS} device keys, and spec.sshKeys has ${deviceKeys.length}; remove some`);
  }
  const own = parsePublicKey(controllerKey);
  if (!own.ok) throw new Error(`the controller's public key is not usable: ${own.error}`);
  const seen = new Set([own.blob.toString('base64')]);
  const lines = [line(own)];
  deviceKeys.forEach((key, i) => {
    const parsed = parsePublicKey(key);
    if (!parsed.ok) throw new Error(`spec.sshKeys[${i}] is not an OpenSSH public key: ${parsed.error}`);
    const id = parsed.blob.toString('base64');
    if (seen.has(id)) return;
    seen.add(id);
    lines.push(line(parsed));
  });
  return `${lines.join('\n')}\n`;
}

/**
 * Installs the agent (or reinstalls it: running this again is harmless) and
 * replaces authorized_keys with the controller's key plus the device keys.
 * With `deviceKeys` undefined, authorized_keys is left as it is (the keys
 * installed before are still the wanted ones).
 */
export async function installAgent(session: RemoteShell, keys: { deviceKeys: readonly string[] | undefined; controllerKey: string }): Promise<void> {
  // Built before anything touches the machine, so a bad key changes nothing there.
  const content = keys.deviceKeys === undefined ? undefined : authorizedKeys(keys.controllerKey, keys.deviceKeys);
  const installed = await session.exec(sh(INSTALL), { stdin: AGENT_SCRIPT, timeoutMs: TIMEOUT_MS });
  if (installed.code !== 0) throw new Error(`installing the agent failed (exit ${installed.code}): ${excerpt(installed.stderr)}`);
  if (content !== undefined) await writeAuthorizedKeys(session, content);
}

/** Replaces authorized_keys (written aside, then renamed in, mode 600). The agent must be installed. */
export async function writeAuthorizedKeys(session: RemoteShell, content: string): Promise<void> {
  const written = await session.exec(sh(`${AGENT} keys`), { stdin: content, timeoutMs: TIMEOUT_MS });
  if (written.code !== 0) throw new Error(`writing authorized_keys failed (exit ${written.code}): ${excerpt(written.stderr)}`);
}

/** Measures the machine and counts its jobs. The agent must be installed. */
export async function probe(session: RemoteShell): Promise<Probe> {
  const r = await session.exec(sh(`${AGENT} probe`), { timeoutMs: TIMEOUT_MS });
  if (r.code !== 0) throw new Error(`the agent's probe failed (exit ${r.code}): ${excerpt(r.stderr)}`);
  return parseProbe(r.stdout);
}

/** Reads the probe's output: its last non-empty line must be the facts as JSON. */
export function parseProbe(stdout: string): Probe {
  const last = stdout.split('\n').map((l) => l.trim()).filter(Boolean).pop() ?? '';
  let json: unknown;
  try {
    json = JSON.parse(last);
  } catch {
    throw new Error(`the agent's probe printed no JSON: ${excerpt(stdout) || 'nothing'}`);
  }
  const parsed = ProbeSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`the agent's probe printed unexpected facts (${issue?.path.join('.') || 'facts'}: ${issue?.message}): ${excerpt(last)}`);
  }
  const p = parsed.data;
  const out: Probe = { os: p.os, arch: p.arch, cpus: p.cpus, memoryGiB: p.memoryGiB, gpus: p.gpus, busy: p.busy, jobs: p.jobs, sessions: p.sessions, gpuProcesses: p.gpuProcesses };
  if (p.gpuError) out.gpuError = p.gpuError;
  if (p.gpus > 0 && p.gpuModel !== undefined) out.gpuModel = p.gpuModel;
  if (p.gpus > 0 && p.vramGiB !== undefined) out.vramGiB = p.vramGiB;
  return out;
}

function line(key: { type: string; blob: Buffer; comment: string }): string {
  return [key.type, key.blob.toString('base64'), key.comment].filter(Boolean).join(' ');
}

function excerpt(text: string): string {
  return text.trim().slice(0, 300);
}
