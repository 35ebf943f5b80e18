#!/usr/bin/env bash
# Everything a real node needs on this machine, installed by the project itself:
# containerd, runc, the CNI plugins, buildah, debootstrap and iptables from the
# Debian packages, then the images (images.sh, cached). The kubelet comes with the
# other cluster binaries (e2e/cluster/build.sh).
#
# Prints, on its last line, the JSON map of image archives that images.sh prints.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)
if (( ${#need[@]} > 0 )); then
  if [[ $(id -u) != 0 ]]; then
    echo "a real node needs root and the packages: ${need[*]}" >&2
    exit 1
  fi
  t0=$(date +%s)
  echo "installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  echo "installed packages in $(( $(date +%s) - t0 ))s" >&2
fi

bash "$here/images.sh" | tail -n 1
