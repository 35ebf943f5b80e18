#!/usr/bin/env bash
# Fetches the pinned Compute Engine discovery document (discovery.json: the Go
# module google.golang.org/api at one version, checked against its go.sum hash)
# through the Go module proxy and keeps a copy in the cache the control-plane
# build uses, so tests read it without reaching the network. A second run
# fetches nothing.
#
# Prints the document's path on its last stdout line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${LEASEHOLD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}"

pin() { node -e 'process.stdout.write(String(require(process.argv[1])[process.argv[2]]))' "$here/discovery.json" "$1"; }
module="$(pin module)" version="$(pin version)" sum="$(pin sum)" file="$(pin file)" revision="$(pin revision)"
out="$cache_root/specs/$module@$version/$file"

if [[ -s "$out" ]]; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "discovery.sh: needs the Go toolchain (go) to fetch $module@$version" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# `go mod download` of a module path@version wants a main module to run in.
(cd "$work" && go mod init leasehold.dev/discovery >/dev/null 2>&1 && go mod download -json "$module@$version") >"$work/download.json"
read_download() { node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[process.argv[2]] ?? ""))' "$work/download.json" "$1"; }
err="$(read_download Error)"
[[ -z "$err" ]] || { echo "discovery.sh: go mod download $module@$version: $err" >&2; exit 1; }
got_sum="$(read_download Sum)"
[[ "$got_sum" == "$sum" ]] || { echo "discovery.sh: $module@$version has hash $got_sum, discovery.json pins $sum" >&2; exit 1; }
src="$(read_download Dir)/$file"
got_revision="$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).revision))' "$src")"
[[ "$got_revision" == "$revision" ]] || { echo "discovery.sh: $file of $module@$version is revision $got_revision, discovery.json pins $revision" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
cp "$src" "$out.partial"
chmod u+w "$out.partial"
mv "$out.partial" "$out"
echo "$out"
