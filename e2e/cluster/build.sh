#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd, kubectl,
# helm and kwok from the pinned Go modules in build/ and caches them outside the
# repository, keyed by a hash of the module files and the Go version, so a
# second run builds nothing.
#
# Prints the directory that holds the binaries on its last stdout line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${LEASEHOLD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}"

key="$( (go env GOVERSION GOOS GOARCH; cat "$here"/build/*/go.mod "$here"/build/*/go.sum \
  "$here"/build/*/tools.go "$here"/build/kube/cmd/*/main.go "$0") \
  | sha256sum | cut -c1-16)"
out="$cache_root/bin/k8s-v1.36.3-helm-v3.22.0-kwok-v0.8.0-$key"

kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kubelet)
complete=1
for bin in "${kube_bins[@]}" helm kwok; do
  [[ -x "$out/$bin" ]] || complete=0
done
if (( complete )); then
  echo "$out"
  exit 0
fi

mkdir -p "$out.partial"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath"

kube_ldflags="-s -w \
  -X k8s.io/component-base/version.gitVersion=v1.36.3 \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=36 \
  -X k8s.io/component-base/version.gitTreeState=clean \
  -X k8s.io/client-go/pkg/version.gitVersion=v1.36.3 \
  -X k8s.io/client-go/pkg/version.gitMajor=1 \
  -X k8s.io/client-go/pkg/version.gitMinor=36"

start=$(date +%s)
timed() {
  local name="$1" t0
  shift
  t0=$(date +%s)
  echo "building $name" >&2
  "$@"
  echo "built $name in $(( $(date +%s) - t0 ))s" >&2
}
(
  cd "$here/build/kube"
  for bin in "${kube_bins[@]}"; do
    timed "$bin" go build -ldflags "$kube_ldflags" -o "$out.partial/$bin" "./cmd/$bin"
  done
)
(
  cd "$here/build/helm"
  timed helm go build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0" \
    -o "$out.partial/helm" helm.sh/helm/v3/cmd/helm
)
(
  cd "$here/build/kwok"
  timed kwok go build -ldflags "-s -w" -o "$out.partial/kwok" sigs.k8s.io/kwok/cmd/kwok
)
rm -rf "$out"
mv "$out.partial" "$out"
echo "built control-plane binaries in $(( $(date +%s) - start ))s" >&2
echo "$out"
