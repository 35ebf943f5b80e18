#!/usr/bin/env bash
# Builds, with buildah and no registry, the images the real-node tests run:
#  - pause: the sandbox image containerd starts for every pod (a static Go program);
#  - a stand-in for node:20-bookworm(-slim), from Debian packages and this machine's
#    Node 20, so that the repository's Dockerfile builds unchanged without Docker Hub;
#  - the controller image, from the Dockerfile as it is;
#  - a small workload image (one static program) for peer Jobs.
# Each image is kept as a docker-archive under the cache, keyed by what it is built
# from (its inputs and the shell function that builds it, never this whole file, so
# an edit to one image's steps rebuilds that image only), so a second run builds
# nothing. Prints, on its last line, a JSON map of the
# archives and image names.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache_root="${LEASEHOLD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}"
images="$cache_root/images"
mkdir -p "$images"

# buildah keeps its layers under the cache too: the stand-in base is made once.
storage_root="$cache_root/buildah/storage"
runroot="${TMPDIR:-/tmp}/leasehold-buildah-run"
driver=overlay
probe="$(mktemp -d)"
mkdir -p "$probe"/{l,u,w,m}
if ! mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
  driver=vfs
else
  umount "$probe/m"
fi
rm -rf "$probe"
bh() { buildah --root "$storage_root" --runroot "$runroot" --storage-driver "$driver" "$@"; }

hash_of() { sha256sum | cut -c1-16; }
timed() {
  local name="$1" t0
  shift
  t0=$(date +%s)
  echo "building image $name" >&2
  "$@" >&2
  echo "built image $name in $(( $(date +%s) - t0 ))s" >&2
}

# --- pause -------------------------------------------------------------------
build_pause() {
  local work
  work="$(mktemp -d)"
  (cd "$repo/e2e/node/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/pause" main.go)
  local ctr
  ctr="$(bh from scratch)"
  bh copy --chmod 0755 "$ctr" "$work/pause" /pause
  bh config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
  bh commit --rm "$ctr" leasehold.local/pause:1
  rm -f "$pause_tar.partial"
  bh push leasehold.local/pause:1 "docker-archive:$pause_tar.partial:leasehold.local/pause:1"
  mv "$pause_tar.partial" "$pause_tar"
  rm -rf "$work"
}
pause_key="$( (go env GOVERSION; cat "$repo/e2e/node/pause/main.go"; declare -f build_pause) | hash_of)"
pause_tar="$images/pause-$pause_key.tar"
[[ -s "$pause_tar" ]] || timed pause build_pause

# --- stand-in for node:20-bookworm(-slim) -----------------------------------------
node_bin="$(command -v node)"
npm_dir="$(cd "$(dirname "$(readlink -f "$(command -v npm)")")/.." && pwd)"
mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)"
mirror="${mirror:-http://deb.debian.org/debian}"
base_ref=docker.io/library/node:20-bookworm-slim
build_base() {
  local rootfs
  rootfs="$(mktemp -d)/rootfs"
  # libstdc++ for node; ca-certificates and the rest are what the real image has.
  debootstrap --variant=minbase --include=ca-certificates,libstdc++6,procps bookworm "$rootfs" "$mirror"
  install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  mkdir -p "$rootfs/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  chroot "$rootfs" groupadd --gid 1000 node
  chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  local ctr mnt
  ctr="$(bh from scratch)"
  mnt="$(bh mount "$ctr")"
  cp -a "$rootfs/." "$mnt/"
  bh umount "$ctr"
  bh config --label "dev.leasehold.base-key=$base_key" --cmd '["node"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  bh commit --rm "$ctr" "$base_ref"
  bh tag "$base_ref" docker.io/library/node:20-bookworm
  rm -rf "$(dirname "$rootfs")"
}
base_key="$( (node --version; cat "$npm_dir/package.json"; echo "$mirror"; declare -f build_base) | hash_of)"
have_base="$(bh inspect --type image --format '{{index .OCIv1.Config.Labels "dev.leasehold.base-key"}}' "$base_ref" 2>/dev/null || true)"
[[ "$have_base" == "$base_key" ]] || timed "node:20-bookworm stand-in" build_base

# RUN steps of a build need the registries this machine reaches (its CA bundle and
# npm settings): mounted for RUN steps only, never copied into an image.
run_mounts=(-v /etc/ssl/certs:/etc/ssl/certs:ro)
npm_global_rc="$(npm config get globalconfig 2>/dev/null || true)"
[[ -f "$npm_global_rc" ]] && run_mounts+=(-v "$npm_global_rc:/usr/local/etc/npmrc:ro")

build_from() {
  local ref="$1" tar="$2" context="$3"
  shift 3
  # --layers: steps whose inputs did not change (npm ci on the same lockfile) come from the cache.
  bh bud --layers --isolation chroot --network host --pull-never "${run_mounts[@]}" -t "$ref" "$@" "$context"
  rm -f "$tar.partial"
  bh push "$ref" "docker-archive:$tar.partial:$ref"
  mv "$tar.partial" "$tar"
  bh rmi "$ref" >/dev/null 2>&1 || true
}

# --- the controller, from the Dockerfile unchanged -------------------------------
controller_key="$( (cd "$repo" && echo "$base_key" && declare -f build_from && cat Dockerfile .dockerignore package.json package-lock.json tsconfig*.json &&
  git ls-files -z src controllers cmd cli | xargs -0 cat) | hash_of)"
controller_ref="leasehold.local/leasehold:$controller_key"
controller_tar="$images/leasehold-$controller_key.tar"
[[ -s "$controller_tar" ]] || timed controller build_from "$controller_ref" "$controller_tar" "$repo" -f "$repo/Dockerfile"

# --- a workload image for peer Jobs --------------------------------------------------
build_workload() {
  local context
  context="$(mktemp -d)"
  cp "$repo/e2e/node/workload/Containerfile" "$context/"
  (cd "$repo/e2e/node/workload" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$context/job" main.go)
  build_from "$workload_ref" "$workload_tar" "$context" -f "$context/Containerfile"
  rm -rf "$context"
}
workload_key="$( (go env GOVERSION; cat "$repo/e2e/node/workload/Containerfile" "$repo/e2e/node/workload/main.go"; declare -f build_from build_workload) | hash_of)"
workload_ref="leasehold.local/workload:$workload_key"
workload_tar="$images/workload-$workload_key.tar"
[[ -s "$workload_tar" ]] || timed workload build_workload

# Older archives of the same image are of no further use.
for stem in pause leasehold workload; do
  ls -1t "$images/$stem"-*.tar 2>/dev/null | tail -n +3 | xargs -r rm -f
done

# The last line says which archive holds which image, for e2e/cluster/node.ts.
printf '{"pause":{"archive":"%s","ref":"%s"},"controller":{"archive":"%s","ref":"%s"},"workload":{"archive":"%s","ref":"%s"}}\n' \
  "$pause_tar" leasehold.local/pause:1 "$controller_tar" "$controller_ref" "$workload_tar" "$workload_ref"
