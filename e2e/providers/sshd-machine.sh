#!/usr/bin/env bash
# A machine provider for tests and the demo. Each machine is a real OpenSSH
# sshd on 127.0.0.1 with a fresh host key, admitting the controller's key and
# logging in as whoever runs this script (root or not).
#
#   sshd-machine.sh acquire   uses LEASEHOLD_LEASE_ID, LEASEHOLD_LEASE_SSH_KEY
#   sshd-machine.sh release   uses LEASEHOLD_LEASE_ID, LEASEHOLD_LEASE_STATE
#
# A machine lives in ${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}/<lease id>/
# with its sshd_config, host key, authorized_keys, sshd.log and a home for the
# agent (sshd sets LEASEHOLD_HOME and LEASEHOLD_AUTHORIZED_KEYS there, so
# machines sharing one Unix user stay apart). acquire prints progress on
# stderr, each line for the Lease's user marked "leasehold: " (unmarked lines
# reach the controller's log only), and, last on stdout:
#   {"ssh":{"host":"127.0.0.1","port":N,"user":"U","host_key":"ssh-ed25519 ..."},"dir":"...","pid":N}
#
# Knobs for tests:
#   SSHD_MACHINE_WRONG_HOST_KEY=1      report a host key this sshd does not have
#   SSHD_MACHINE_FAIL_RELEASE_TIMES=N  release fails its first N runs for a lease
#                                      (counted in $LEASEHOLD_MACHINES_DIR/.release-failures-<id>)
#   SSHD_MACHINE_FAIL_ACQUIRE=1        acquire fails before starting anything
#   SSHD_MACHINE_ACQUIRE_DELAY=S       acquire sleeps S seconds first
#   SSHD_MACHINE_ADDRESS=IP            listen on IP instead of 127.0.0.1 (an address
#                                      inside a test's network namespace)
#   SSHD_MACHINE_GPUS=N                the machine has N GPUs: sessions find the
#                                      nvidia-smi stand-in (nvidia-smi-standin.sh) first on
#                                      PATH, reading <dir>/gpu/ (see there; tests write it)
#   SSHD_MACHINE_GPU_MODEL=NAME        their model (default "NVIDIA H100 80GB HBM3")
set -euo pipefail

SSHD=/usr/sbin/sshd
addr="${SSHD_MACHINE_ADDRESS:-127.0.0.1}"
[[ "$addr" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || { printf 'leasehold: SSHD_MACHINE_ADDRESS "%s" is not an IPv4 address\n' "$addr" >&2; exit 1; }
MARKER=.sshd-machine

log() { printf 'leasehold: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

id="${LEASEHOLD_LEASE_ID:-}"
# The ID names a directory that release deletes: nothing that could climb out.
[[ "$id" =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$ ]] || die "LEASEHOLD_LEASE_ID \"$id\" is missing or not a plain name"
mkdir -p "${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}"
root=$(cd "${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}" && pwd -P)
case "$root" in *[\"\\[:cntrl:][:space:]]*) die "LEASEHOLD_MACHINES_DIR \"$root\" must not hold quotes, backslashes or spaces" ;; esac

# Whether $1 is a directory this script made for lease $id.
is_machine_dir() {
  [ -d "$1" ] && [ "$(cat "$1/$MARKER" 2>/dev/null)" = "$id" ]
}

# Whether PID $1 is the sshd started with config $2 (checked before any kill,
# since a stale pidfile may name a PID that now belongs to something else).
is_our_sshd() {
  local args
  args=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ "$args" == *"$SSHD -f $2 "* ]]
}

# PID $1 and everything below it: the listener's per-connection children
# and their sessions, which outlive the listener otherwise.
process_tree() {
  local child
  echo "$1"
  for child in $(pgrep -P "$1" 2>/dev/null || true); do process_tree "$child"; done
}

# Every process a session on machine directory $1 started: sshd's SetEnv
# gives each one the machine's LEASEHOLD_HOME. A session whose client hung up
# (an agent install cancelled by a release) is no longer below the listener,
# yet a real release ends it with the machine.
session_processes() {
  local want="LEASEHOLD_HOME=$1/home" pid
  for pid in $(pgrep -u "$(id -u)" 2>/dev/null || true); do
    [ "$pid" = "$$" ] && continue
    if tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ" | grep -qxF -- "$want"; then echo "$pid"; fi
  done
  return 0
}

# Stops the sshd of machine directory $1, if one runs, and what its sessions left running.
stop_sshd() {
  local dir=$1 config=$1/sshd_config pid pids=() tree=() _
  pid=$(cat "$dir/sshd.pid" 2>/dev/null || true)
  if [[ "$pid" =~ ^[0-9]+$ ]] && is_our_sshd "$pid" "$config"; then pids+=("$pid"); fi
  # The pidfile may be missing (sshd died, or was still starting).
  for pid in $(pgrep -f -- "$config" 2>/dev/null || true); do
    if is_our_sshd "$pid" "$config"; then pids+=("$pid"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un); fi
  mapfile -t tree < <({ for pid in "${pids[@]}"; do process_tree "$pid"; done; session_processes "$dir"; } | sort -un)
  [ ${#tree[@]} -gt 0 ] || return 0
  log "stopping sshd ${pids[*]} of $dir"
  kill -TERM "${tree[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    any_alive "${tree[@]}" || return 0
    sleep 0.1
  done
  kill -KILL "${tree[@]}" 2>/dev/null || true
  # Gone before this returns: a replacement must never run beside it.
  for _ in $(seq 1 100); do
    any_alive "${tree[@]}" || return 0
    sleep 0.1
  done
}

# Whether any of the PIDs still runs (a zombie no longer counts).
any_alive() {
  local pid state
  for pid in "$@"; do
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1) || continue
    if [ -n "$state" ] && [ "$state" != Z ]; then return 0; fi
  done
  return 1
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("'"$addr"'", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    accepts "$port" || { echo "$port"; return; }
  done
}

accepts() {
  (exec 3<>"/dev/tcp/$addr/$1") 2>/dev/null
}

write_config() {
  local dir=$1 port=$2 path=""
  # The stand-in first; the rest is sshd's own default PATH.
  if [ -x "$dir/bin/nvidia-smi" ]; then path=" \"PATH=$dir/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\""; fi
  cat > "$dir/sshd_config" <<CONF
ListenAddress $addr
Port $port
HostKey "$dir/host_key"
PidFile "$dir/sshd.pid"
AuthorizedKeysFile "$dir/authorized_keys"
AllowUsers $(id -un)
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PrintMotd no
PrintLastLog no
SetEnv "LEASEHOLD_HOME=$dir/home" "LEASEHOLD_AUTHORIZED_KEYS=$dir/authorized_keys"$path
CONF
}

acquire() {
  local key="${LEASEHOLD_LEASE_SSH_KEY:-}" dir="$root/$id" port pid hostkey attempt gpus _
  if [ -n "${SSHD_MACHINE_ACQUIRE_DELAY:-}" ]; then sleep "$SSHD_MACHINE_ACQUIRE_DELAY"; fi
  if [ "${SSHD_MACHINE_FAIL_ACQUIRE:-}" = 1 ]; then die "acquire fails (SSHD_MACHINE_FAIL_ACQUIRE=1)"; fi
  [ -n "$key" ] || die "LEASEHOLD_LEASE_SSH_KEY is not set: no key to admit"
  [[ "$key" != *$'\n'* ]] || die "LEASEHOLD_LEASE_SSH_KEY must be one line"
  [ -x "$SSHD" ] || die "$SSHD is missing: install openssh-server"

  # Acquiring a lease ID again replaces its machine instead of leaking it.
  if is_machine_dir "$dir"; then
    log "replacing the existing machine for $id"
    stop_sshd "$dir"
    rm -rf "$dir"
  fi
  [ ! -e "$dir" ] || die "$dir exists and is not a machine of lease $id"
  umask 077
  mkdir -p "$dir/home"
  printf '%s\n' "$id" > "$dir/$MARKER"
  log "making a host key for leasehold-$id"
  ssh-keygen -q -t ed25519 -N '' -C "leasehold-$id" -f "$dir/host_key" < /dev/null
  printf '%s\n' "$key" > "$dir/authorized_keys"
  gpus="${SSHD_MACHINE_GPUS:-0}"
  [[ "$gpus" =~ ^[0-9]{1,2}$ ]] || die "SSHD_MACHINE_GPUS \"$gpus\" is not a small number"
  if [ "$gpus" -gt 0 ]; then
    log "giving the machine $gpus GPU(s) through the nvidia-smi stand-in"
    mkdir -p "$dir/bin" "$dir/gpu"
    cp "$(dirname "${BASH_SOURCE[0]}")/nvidia-smi-standin.sh" "$dir/bin/nvidia-smi"
    chmod 755 "$dir/bin/nvidia-smi" "$dir/bin" "$dir/gpu" "$dir"
    for _ in $(seq 1 "$gpus"); do printf '%s, 81559\n' "${SSHD_MACHINE_GPU_MODEL:-NVIDIA H100 80GB HBM3}"; done > "$dir/gpu/gpus"
  fi
  # Root's sshd wants its privilege separation directory.
  if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -m 755 /run/sshd; fi

  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    write_config "$dir" "$port"
    log "starting sshd on $addr:$port (attempt $attempt)"
    # sshd forks into the background once it listens.
    if "$SSHD" -f "$dir/sshd_config" -E "$dir/sshd.log"; then
      for _ in $(seq 1 100); do
        if accepts "$port"; then break 2; fi
        sleep 0.1
      done
    fi
    log "sshd did not come up on port $port: $(tail -n 3 "$dir/sshd.log" 2>/dev/null | tr '\n' ' ')"
    stop_sshd "$dir"
    port=""
  done
  [ -n "$port" ] || die "could not start sshd for $id; see $dir/sshd.log"
  pid=$(cat "$dir/sshd.pid")

  hostkey=$(cut -d' ' -f1,2 "$dir/host_key.pub")
  if [ "${SSHD_MACHINE_WRONG_HOST_KEY:-}" = 1 ]; then
    log "reporting a host key this sshd does not have (SSHD_MACHINE_WRONG_HOST_KEY=1)"
    ssh-keygen -q -t ed25519 -N '' -f "$dir/other_key" < /dev/null
    hostkey=$(cut -d' ' -f1,2 "$dir/other_key.pub")
  fi
  log "machine $id is up: $(id -un)@$addr:$port"
  printf '{"ssh":{"host":"%s","port":%d,"user":"%s","host_key":"%s"},"dir":"%s","pid":%d}\n' \
    "$addr" "$port" "$(id -un)" "$hostkey" "$dir" "$pid"
}

state_dir() {
  local state="${LEASEHOLD_LEASE_STATE:-}"
  [ -n "$state" ] || return 0
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys
try:
    d = json.loads(sys.argv[1]).get("dir")
except Exception:
    d = None
print(d if isinstance(d, str) else "")' "$state"
  else
    printf '%s' "$state" | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p'
  fi
}

release() {
  local fails="${SSHD_MACHINE_FAIL_RELEASE_TIMES:-0}" counter n dir from_state
  if [ "$fails" -gt 0 ]; then
    counter="$root/.release-failures-$id"
    n=$(( $(cat "$counter" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$counter"
    [ "$n" -gt "$fails" ] || die "simulated release failure $n of $fails (SSHD_MACHINE_FAIL_RELEASE_TIMES)"
  fi
  dir="$root/$id"
  from_state=$(state_dir)
  # The state is only a hint: a directory is removed only if this script made
  # it for this lease, whatever the state says.
  if [ -n "$from_state" ] && [ "$from_state" != "$dir" ]; then
    if is_machine_dir "$from_state"; then dir=$from_state; else log "ignoring state dir $from_state: not a machine of lease $id"; fi
  fi
  if ! is_machine_dir "$dir"; then
    log "no machine for $id; nothing to release"
    return 0
  fi
  stop_sshd "$dir"
  rm -rf "$dir"
  log "released $id"
}

case "${1:-}" in
  acquire) acquire ;;
  release) release ;;
  *) die "usage: $0 acquire|release" ;;
esac
