#!/usr/bin/env bash
# Builds kube-apiserver, etcd, kubectl and helm from the pinned Go modules in
# build/ and caches them outside the repository, keyed by a hash of the module
# files and the Go version, so a second run builds nothing.
#
# Prints the directory that holds the four binaries on its last stdout line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${LEASEHOLD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}"

key="$( (go env GOVERSION GOOS GOARCH; cat "$here"/build/kube/go.mod "$here"/build/kube/go.sum \
  "$here"/build/helm/go.mod "$here"/build/helm/go.sum "$here"/build/kube/cmd/*/main.go "$0") \
  | sha256sum | cut -c1-16)"
out="$cache_root/bin/k8s-v1.36.3-helm-v3.22.0-$key"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kubectl" && -x "$out/helm" ]]; then
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
(
  cd "$here/build/kube"
  for bin in kube-apiserver kubectl etcd; do
    echo "building $bin" >&2
    go build -ldflags "$kube_ldflags" -o "$out.partial/$bin" "./cmd/$bin"
  done
)
(
  cd "$here/build/helm"
  echo "building helm" >&2
  go build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0" \
    -o "$out.partial/helm" helm.sh/helm/v3/cmd/helm
)
rm -rf "$out"
mv "$out.partial" "$out"
echo "built control-plane binaries in $(( $(date +%s) - start ))s" >&2
echo "$out"
