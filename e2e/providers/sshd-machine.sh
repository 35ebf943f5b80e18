#!/usr/bin/env bash
# A provider for tests and the demo: each "machine" is a real OpenSSH sshd on
# loopback with a fresh host key, admitting the controller's key.
#   sshd-machine.sh acquire   (LEASEHOLD_LEASE_ID, LEASEHOLD_LEASE_SSH_KEY)
#   sshd-machine.sh release   (LEASEHOLD_LEASE_ID, LEASEHOLD_LEASE_STATE)
# Test knobs: SSHD_MACHINE_WRONG_HOST_KEY=1 reports a host key sshd does not
# have; SSHD_MACHINE_FAIL_RELEASE_TIMES=N makes release fail N times first.
set -euo pipefail

root="${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}"
id="${LEASEHOLD_LEASE_ID:?LEASEHOLD_LEASE_ID is not set}"
case "$id" in *[!a-zA-Z0-9-]*) echo "unsafe lease id" >&2; exit 2 ;; esac
dir="$root/$id"

acquire() {
  mkdir -p "$dir/home"
  echo "making host key for $id" >&2
  ssh-keygen -q -t ed25519 -N '' -C "leasehold-$id" -f "$dir/host_key" </dev/null
  printf '%s\n' "${LEASEHOLD_LEASE_SSH_KEY:?LEASEHOLD_LEASE_SSH_KEY is not set}" > "$dir/authorized_keys"
  chmod 600 "$dir/authorized_keys"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$dir/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $port
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
SetEnv LEASEHOLD_HOME=$dir/home LEASEHOLD_AUTHORIZED_KEYS=$dir/authorized_keys
CONF
  mkdir -p /run/sshd 2>/dev/null || true
  echo "starting sshd on 127.0.0.1:$port" >&2
  /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
  for _ in $(seq 1 50); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then break; fi
    sleep 0.1
  done
  hostkey=$(cut -d' ' -f1,2 "$dir/host_key.pub")
  if [ "${SSHD_MACHINE_WRONG_HOST_KEY:-}" = 1 ]; then
    ssh-keygen -q -t ed25519 -N '' -f "$dir/other_key" </dev/null
    hostkey=$(cut -d' ' -f1,2 "$dir/other_key.pub")
  fi
  printf '{"ssh":{"host":"127.0.0.1","port":%d,"user":"%s","host_key":"%s"},"dir":"%s"}\n' "$port" "$(id -un)" "$hostkey" "$dir"
}

release() {
  fails="${SSHD_MACHINE_FAIL_RELEASE_TIMES:-0}"
  if [ "$fails" -gt 0 ]; then
    count_file="$root/.release-attempts-$id"
    n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$count_file"
    if [ "$n" -le "$fails" ]; then echo "simulated release failure $n of $fails" >&2; exit 1; fi
  fi
  # The state may be empty (an interrupted launch): the machine is found by lease ID.
  if [ -f "$dir/sshd.pid" ]; then
    pid=$(cat "$dir/sshd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  pkill -f -- "-f $dir/sshd_config" 2>/dev/null || true
  rm -rf "$dir"
  echo "released $id" >&2
}

case "${1:-}" in
  acquire) acquire ;;
  release) release ;;
  *) echo "usage: $0 acquire|release" >&2; exit 2 ;;
esac
