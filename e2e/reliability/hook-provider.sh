#!/usr/bin/env bash
# The sshd machine provider (e2e/providers/sshd-machine.sh) with a call log
# and holds, so reliability tests can count acquires per lease and stop the
# controller at a chosen step. Everything lives in $LEASEHOLD_MACHINES_DIR:
#   .calls                  one line per event: <ms> <verb> <event> <lease id> <pid>
#                           events: start, made rc=N (acquire), end rc=N
#   .hold-acquire-before    seconds acquire waits before doing anything
#   .hold-acquire-after     seconds acquire waits after the machine exists, before printing its target
#   .hold-install           seconds the new machine's sshd is frozen (SIGSTOP) once acquire prints,
#                           so the controller's agent install hangs mid-connection
#   .hold-release-before    seconds release waits before doing anything
# Hold files are read at each call, so a test switches them on and off while it runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
provider="$here/../providers/sshd-machine.sh"
verb="${1:-}"
id="${LEASEHOLD_LEASE_ID:-}"
dir="${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}"
mkdir -p "$dir"
note() { printf '%s %s %s %s %s\n' "$(date +%s%3N)" "$verb" "$1" "$id" "$$" >> "$dir/.calls"; }
hold() { local f="$dir/.hold-$1" s; s=$(cat "$f" 2>/dev/null) || return 0; [ -n "$s" ] && sleep "$s"; return 0; }

note start
case "$verb" in
  acquire)
    hold acquire-before
    out=$("$provider" acquire)
    rc=$?
    note "made rc=$rc"
    hold acquire-after
    if [ "$rc" = 0 ] && [ -f "$dir/.hold-install" ]; then
      pid=$(cat "$dir/$id/sshd.pid" 2>/dev/null || true)
      if [[ "$pid" =~ ^[0-9]+$ ]]; then
        kill -STOP "$pid"
        # In a session of its own: the controller stops this command's process
        # group once it exits, which would leave sshd frozen for good.
        setsid bash -c 'sleep "$1"; kill -CONT "$2"' unfreeze "$(cat "$dir/.hold-install")" "$pid" </dev/null >/dev/null 2>&1 &
        printf '%s %s %s %s %s\n' "$(date +%s%3N)" "$verb" "frozen" "$id" "$pid" >> "$dir/.calls"
      fi
    fi
    printf '%s\n' "$out"
    note "end rc=$rc"
    exit "$rc"
    ;;
  release)
    hold release-before
    "$provider" release
    rc=$?
    note "end rc=$rc"
    exit "$rc"
    ;;
  *) echo "usage: $0 acquire|release" >&2; exit 2 ;;
esac
