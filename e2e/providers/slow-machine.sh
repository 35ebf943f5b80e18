#!/usr/bin/env bash
# A provider for timing tests: sshd-machine.sh with knobs around its acquire.
#
#   SLOW_MACHINE_SAY=TEXT       acquire prints TEXT on stderr first, marked for users ("leasehold: TEXT")
#   SLOW_MACHINE_WHISPER=TEXT   acquire prints TEXT on stderr unmarked (the controller's log only)
#   SLOW_MACHINE_BEFORE=S       then sleeps S seconds before the machine is made
#   SLOW_MACHINE_AFTER=S        sleeps S seconds once the machine is up, before printing its target
#                               (the sshd runs already: a stopped acquire leaves a machine to release)
#   SLOW_MACHINE_WRONG_PORT=1   prints port 1, where nothing listens: the machine exists,
#                               its agent never becomes reachable
#
# release appends LEASEHOLD_LEASE_ID to $LEASEHOLD_MACHINES_DIR/released, then
# runs sshd-machine.sh release.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root="${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}"

case "${1:-}" in
  acquire)
    if [ -n "${SLOW_MACHINE_WHISPER:-}" ]; then printf '%s\n' "$SLOW_MACHINE_WHISPER" >&2; fi
    if [ -n "${SLOW_MACHINE_SAY:-}" ]; then printf 'leasehold: %s\n' "$SLOW_MACHINE_SAY" >&2; fi
    if [ -n "${SLOW_MACHINE_BEFORE:-}" ]; then sleep "$SLOW_MACHINE_BEFORE"; fi
    out=$("$here/sshd-machine.sh" acquire)
    if [ -n "${SLOW_MACHINE_AFTER:-}" ]; then
      printf 'leasehold: machine is up; waiting %ss before reporting it\n' "$SLOW_MACHINE_AFTER" >&2
      sleep "$SLOW_MACHINE_AFTER"
    fi
    if [ "${SLOW_MACHINE_WRONG_PORT:-}" = 1 ]; then
      out=$(printf '%s' "$out" | sed -E 's/"port":[0-9]+/"port":1/')
    fi
    printf '%s\n' "$out"
    ;;
  release)
    mkdir -p "$root"
    printf '%s\n' "${LEASEHOLD_LEASE_ID:-}" >> "$root/released"
    exec "$here/sshd-machine.sh" release
    ;;
  *)
    echo "usage: $0 acquire|release" >&2
    exit 2
    ;;
esac
