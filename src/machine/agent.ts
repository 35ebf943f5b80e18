// The agent: a small POSIX sh script the controller installs over SSH. It
// keeps authorized_keys (the controller's key plus the Lease's device keys),
// measures the machine, and counts jobs.
//
// "Busy" is defined as: the number of jobs started through
// `$LEASEHOLD_HOME/bin/leasehold-run CMD...` that are still running. The
// wrapper records its PID under $LEASEHOLD_HOME/jobs and removes it on exit;
// the probe drops records whose process is gone. Clients that submit work
// another way mark activity with the leasehold.dev/activity annotation.
import type { SshSession } from './ssh.js';

export const AGENT_SCRIPT = `#!/bin/sh
set -u
H="\${LEASEHOLD_HOME:-$HOME/.leasehold}"
AK="\${LEASEHOLD_AUTHORIZED_KEYS:-$HOME/.ssh/authorized_keys}"
case "$(basename "$0")" in
leasehold-run)
  mkdir -p "$H/jobs"
  echo $$ > "$H/jobs/$$"
  trap 'rm -f "$H/jobs/$$"' EXIT
  "$@"
  exit $?
  ;;
esac
case "\${1:-}" in
keys)
  mkdir -p "$(dirname "$AK")"
  cat > "$AK.leasehold-tmp" && chmod 600 "$AK.leasehold-tmp" && mv "$AK.leasehold-tmp" "$AK"
  ;;
probe)
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  m=$(uname -m)
  case "$m" in x86_64|amd64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) arch="$m" ;; esac
  cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
  memkb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
  mem=$(( (memkb + 524288) / 1048576 ))
  gpus=0; model=""; vram=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    out=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null || true)
    if [ -n "$out" ]; then
      gpus=$(printf '%s\\n' "$out" | grep -c .)
      model=$(printf '%s\\n' "$out" | head -n1 | cut -d, -f1 | tr -d '"\\\\' | sed 's/^ *//;s/ *$//')
      mib=$(printf '%s\\n' "$out" | head -n1 | cut -d, -f2 | tr -dc '0-9')
      vram=$(( (\${mib:-0} + 512) / 1024 ))
    fi
  fi
  busy=0
  mkdir -p "$H/jobs"
  for f in "$H/jobs"/*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f")
    if kill -0 "$pid" 2>/dev/null; then busy=$((busy + 1)); else rm -f "$f"; fi
  done
  printf '{"os":"%s","arch":"%s","cpus":%d,"memoryGiB":%d,"gpus":%d,"gpuModel":"%s","vramGiB":%d,"busy":%d}\\n' \\
    "$os" "$arch" "$cpus" "$mem" "$gpus" "$model" "$vram" "$busy"
  ;;
*)
  echo "usage: leasehold-agent keys|probe" >&2
  exit 2
  ;;
esac
`;

const INSTALL = `H="\${LEASEHOLD_HOME:-$HOME/.leasehold}"; mkdir -p "$H/bin" "$H/jobs" && cat > "$H/bin/.agent.tmp" && chmod 755 "$H/bin/.agent.tmp" && mv "$H/bin/.agent.tmp" "$H/bin/leasehold-agent" && ln -sf leasehold-agent "$H/bin/leasehold-run"`;
const AGENT = `"\${LEASEHOLD_HOME:-$HOME/.leasehold}/bin/leasehold-agent"`;

export interface Probe {
  os: string;
  arch: string;
  cpus: number;
  memoryGiB: number;
  gpus: number;
  gpuModel?: string;
  vramGiB?: number;
  busy: number;
}

/** Installs (or reinstalls: it is idempotent) the agent and writes authorized_keys. */
export async function installAgent(session: SshSession, keys: { deviceKeys: string[]; controllerKey: string }): Promise<void> {
  const installed = await session.exec(INSTALL, { stdin: AGENT_SCRIPT, timeoutMs: 30_000 });
  if (installed.code !== 0) throw new Error(`installing the agent failed (exit ${installed.code}): ${installed.stderr.trim().slice(0, 300)}`);
  // The controller's key always stays, or the controller would lock itself out.
  const lines = [keys.controllerKey, ...keys.deviceKeys.filter((k) => k.trim() !== keys.controllerKey.trim())].map((k) => k.trim());
  const written = await session.exec(`${AGENT} keys`, { stdin: `${lines.join('\n')}\n`, timeoutMs: 30_000 });
  if (written.code !== 0) throw new Error(`writing authorized_keys failed (exit ${written.code}): ${written.stderr.trim().slice(0, 300)}`);
}

export async function probe(session: SshSession): Promise<Probe> {
  const r = await session.exec(`${AGENT} probe`, { timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(`the probe failed (exit ${r.code}): ${r.stderr.trim().slice(0, 300)}`);
  const line = r.stdout.trim().split('\n').pop() ?? '';
  const p = JSON.parse(line) as Probe;
  if (!p.gpus) {
    delete p.gpuModel;
    delete p.vramGiB;
  }
  return p;
}
