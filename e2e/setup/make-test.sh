#!/usr/bin/env bash
# `make test`: the control-plane build (e2e/cluster/build.sh; on a cold machine
# about 15-18 minutes) and the real node's packages and images
# (e2e/node/setup.sh; about 6 minutes cold) run in the background while the
# Node packages are installed, typecheck and the unit tests run in the
# foreground. The builds' logs are printed once those are done, so nothing
# interleaves. The e2e tests start only when every part passed; the exit
# status is non-zero when any part failed.
set -uo pipefail

log="$(mktemp "${TMPDIR:-/tmp}/leasehold-binaries-XXXXXX.log")"
node_log="$(mktemp "${TMPDIR:-/tmp}/leasehold-node-XXXXXX.log")"
# Each in its own session (and so its own process group), so that a whole
# build, go and its compilers included, can be stopped if this script is.
# The Go build needs nothing from npm, so it starts before the Node packages
# are installed; the node's setup installs Debian packages, so it waits until
# `make deps` (which may run apt-get too) is done.
setsid bash e2e/cluster/build.sh >"$log" 2>&1 &
build=$!
node_setup=
stop_build() { kill -- "-$build" 2>/dev/null; [[ -n "$node_setup" ]] && kill -- "-$node_setup" 2>/dev/null; }
trap 'stop_build; rm -f "$log" "$node_log"' EXIT
trap 'stop_build; exit 130' INT
trap 'stop_build; exit 143' TERM

echo "make test: building the control-plane binaries in the background (log: $log)"
make --no-print-directory deps || { echo "make test: failed: deps" >&2; exit 1; }
# The Go build is CPU-bound, the image build mostly waits on package downloads.
setsid bash -c 'bash e2e/node/setup.sh >/dev/null' >"$node_log" 2>&1 &
node_setup=$!
echo "make test: building the real node's images in the background (log: $node_log)"

failed=()
echo "make test: the pinned service descriptions"
make --no-print-directory contracts || failed+=(contracts)
echo "make test: typecheck"
npx tsc --noEmit -p . || failed+=(typecheck)
echo "make test: unit and emulator tests"
npx jest --selectProjects unit emulators || failed+=(unit)

echo "make test: waiting for the control-plane binaries and images"
wait "$build" || failed+=(binaries)
wait "$node_setup" || failed+=(node-images)
sed 's/^/  binaries: /' "$log"
sed 's/^/  node: /' "$node_log"

if (( ${#failed[@]} )); then
  echo "make test: failed: ${failed[*]} (e2e tests not run)" >&2
  exit 1
fi

# The e2e files run as E2E_SHARDS jest processes side by side (default 3), each with a
# control plane of its own (jest's global setup), dealt out by recorded file time
# (e2e/setup/sequencer.mjs). Most files wait on timers, so three share 2 cores:
# on 2 cores the e2e part took 26 min as three shards, 34 min as two.
shards="${E2E_SHARDS:-3}"
if [[ "$shards" == 1 ]]; then
  npx jest --selectProjects e2e || { echo "make test: failed: e2e" >&2; exit 1; }
  exit 0
fi
# Each shard's output is also kept in a file: the shards' lines interleave, and a
# CI log shows only its tail, so a failing shard's failures are printed again last.
shard_dir="$(mktemp -d "${TMPDIR:-/tmp}/leasehold-e2e-XXXXXX")"
pids=()
for ((i = 1; i <= shards; i++)); do
  ( set -o pipefail; npx jest --selectProjects e2e --shard="$i/$shards" 2>&1 | tee "$shard_dir/$i.log" | sed -u "s/^/[e2e $i\/$shards] /" ) &
  pids+=($!)
done
e2e_failed=()
for ((i = 1; i <= shards; i++)); do
  wait "${pids[i-1]}" || e2e_failed+=("$i")
done
if (( ${#e2e_failed[@]} )); then
  for i in "${e2e_failed[@]}"; do
    echo "make test: e2e shard $i/$shards failed; its failing files and tests:" >&2
    grep -E '^(FAIL|  ● )' "$shard_dir/$i.log" | grep -v '● Console' | head -40 | sed 's/^/  /' >&2 || true
    echo "make test: shard $i/$shards's failure summary (or the end of its output):" >&2
    if grep -q 'Summary of all failing tests' "$shard_dir/$i.log"; then
      sed -n '/Summary of all failing tests/,$p' "$shard_dir/$i.log" | head -n 200
    else
      tail -n 80 "$shard_dir/$i.log"
    fi | sed 's/^/  /' >&2
  done
  echo "make test: failed: e2e shard $(printf '%s/'"$shards"' ' "${e2e_failed[@]}")" >&2
  exit 1
fi
rm -rf "$shard_dir"
