#!/bin/bash
# A provider script as users ship one: mounted from the chart's providerScripts
# ConfigMap and run by the controller inside its pod. It asks the test's machine
# service (machines.mjs, at $MACHINES_URL, set through the chart's extraEnv) to
# acquire or release a machine, and passes on what the service's sshd-machine.sh
# printed and its exit status. Uses the image's node: the image has no curl.
# A delay (seconds) makes acquire slow, like a cloud that takes its time.
#
#   netns-machine.sh acquire|release [delay]
set -euo pipefail
case "${1:-}" in acquire | release) ;; *) echo "usage: $0 acquire|release [delay]" >&2; exit 2 ;; esac
[[ "${2:-0}" =~ ^[0-9]{1,3}$ ]] || { echo "$0: delay \"$2\" is not a number of seconds" >&2; exit 2; }
exec node -e '
const verb = process.argv[1];
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("LEASEHOLD_LEASE_")));
fetch(`${process.env.MACHINES_URL}/${verb}`, { method: "POST", body: JSON.stringify({ env, delay: Number(process.argv[2]) }) })
  .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`machine service answered ${r.status}`))))
  .then((out) => { process.stderr.write(out.stderr); process.stdout.write(out.stdout); process.exitCode = out.code; })
  .catch((err) => { console.error(`leasehold: ${err.message}`); process.exitCode = 1; });
' "$1" "${2:-0}"
