#!/usr/bin/env bash
# `make test`: the control-plane build (e2e/cluster/build.sh; on a cold machine
# about 20 minutes, much of it downloading Go modules) and the real node's
# packages and images (e2e/node/setup.sh; about 6 minutes cold) run in the
# background while typecheck and the unit tests, which need neither, run in the
# foreground. The build's log is printed once they are done, so the two never
# interleave. The e2e tests start only when all three passed; the exit status
# is non-zero when any part failed.
set -uo pipefail

log="$(mktemp "${TMPDIR:-/tmp}/leasehold-binaries-XXXXXX.log")"
# Its own session (and so its own process group), so that the whole build,
# go and its compilers included, can be stopped if this script is.
# The two builds run side by side: the Go build is CPU-bound, the image build mostly
# waits on package downloads.
setsid bash -c 'bash e2e/node/setup.sh >/dev/null & images=$!; bash e2e/cluster/build.sh; built=$?; wait $images && exit $built' >"$log" 2>&1 &
build=$!
stop_build() { kill -- "-$build" 2>/dev/null; }
trap 'stop_build; rm -f "$log"' EXIT
trap 'stop_build; exit 130' INT
trap 'stop_build; exit 143' TERM

failed=()
echo "make test: building the control-plane binaries and the real node's images in the background (log: $log)"
echo "make test: typecheck"
npx tsc --noEmit -p . || failed+=(typecheck)
echo "make test: unit and emulator tests"
npx jest --selectProjects unit emulators || failed+=(unit)

echo "make test: waiting for the control-plane binaries and images"
wait "$build" || failed+=(binaries)
sed 's/^/  binaries: /' "$log"

if (( ${#failed[@]} )); then
  echo "make test: failed: ${failed[*]} (e2e tests not run)" >&2
  exit 1
fi

# The e2e files run as E2E_SHARDS jest processes side by side (default 2), each with a
# control plane of its own (jest's global setup), dealt out by recorded file time
# (e2e/setup/sequencer.mjs). Most files wait on timers, so two share 2 cores well.
shards="${E2E_SHARDS:-2}"
if [[ "$shards" == 1 ]]; then
  npx jest --selectProjects e2e || { echo "make test: failed: e2e" >&2; exit 1; }
  exit 0
fi
pids=()
for ((i = 1; i <= shards; i++)); do
  ( set -o pipefail; npx jest --selectProjects e2e --shard="$i/$shards" 2>&1 | sed -u "s/^/[e2e $i\/$shards] /" ) &
  pids+=($!)
done
e2e_failed=()
for ((i = 1; i <= shards; i++)); do
  wait "${pids[i-1]}" || e2e_failed+=("$i/$shards")
done
if (( ${#e2e_failed[@]} )); then
  echo "make test: failed: e2e shard ${e2e_failed[*]}" >&2
  exit 1
fi
