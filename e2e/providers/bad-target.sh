#!/usr/bin/env bash
# A provider whose acquire breaks the output rules, for tests:
#   bad-target.sh acquire nojson|huge|socket     release: records the call
# Every release appends the lease ID to $LEASEHOLD_MACHINES_DIR/released.
set -euo pipefail
root="${LEASEHOLD_MACHINES_DIR:-/tmp/leasehold-machines}"
mkdir -p "$root"
case "${1:-}" in
  acquire)
    echo "leasehold: acquiring in mode ${2:-}" >&2
    case "${2:-}" in
      nojson) echo "machine is up at 10.1.2.3" ;;
      huge) head -c 20000 /dev/zero | tr '\0' 'x'; echo; echo '{"ssh":{"host":"10.1.2.3"}}' ;;
      socket) echo '{"url":"unix:///run/leasehold.sock"}' ;;
    esac
    ;;
  release) echo "${LEASEHOLD_LEASE_ID:-}" >> "$root/released" ;;
esac
