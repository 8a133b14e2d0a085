#!/usr/bin/env bash
# Builds the local real node's images without a registry and imports them into its containerd:
# each is an OCI image layout made by hand (one layer: a directory tarred), tagged by the
# `io.containerd.image.name` annotation. Usage: images.sh CONTAINERD_SOCKET
#   registry.k8s.io/pause:3.10   the Pod sandbox: sleeps (containerd kills it with SIGKILL)
#   cubepod.local/busybox:1      a static userland (Debian's busybox-static), for Pods that run for real
#   cubepod.local/podd-injector:dev  podd-init, podd and cubepod-egress (podd/, static Go programs) in
#                                /opt/cubepod/bin, the copy program of `forkStrategy: Copy`, mke2fs
#                                (Block mode) and busybox for `cp`
#   cubepod.local/sandbox:dev    a sandbox's own image: Debian with bash, Python, git, curl and sudo,
#                                the unprivileged user `user` (uid 1000, home /home/user), from
#                                sandbox-image.sh (Debian's packages, mmdebstrap)
#   ghcr.io/defenseunicorns/pepr/controller:v<pepr>  the image the module's (and the gateway's)
#                                Deployments name, built here: see controller_image
# An image is imported again when its content changed (the project's own programs do).
set -euo pipefail
. "$(dirname "$0")/env.sh"
sock=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# busybox_root DIR: /bin/busybox and a link per applet.
busybox_root() {
  mkdir -p "$1/bin" "$1/tmp" "$1/etc" "$1/proc" "$1/sys" "$1/dev" "$1/workspace"
  cp /bin/busybox "$1/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"; done
  printf 'root:x:0:0:root:/:/bin/sh\n' >"$1/etc/passwd"
  printf 'root:x:0:\n' >"$1/etc/group"
  chmod 1777 "$1/tmp"
}

# oci_image NAME ROOTFS ENTRYPOINT_JSON: imports the image, unless containerd has it already with
# the same manifest (the layer tar is reproducible: sorted, fixed times, the owners given here).
oci_image() {
  local name=$1 rootfs=$2 entrypoint=$3 dir
  dir=$work/$(echo "$name" | tr '/:' '__')
  mkdir -p "$dir/blobs/sha256"
  tar -C "$rootfs" --sort=name --mtime=@0 --numeric-owner -cf "$dir/layer.tar" .
  local layer; layer=$(sha "$dir/layer.tar")
  mv "$dir/layer.tar" "$dir/blobs/sha256/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entrypoint" "$layer" >"$dir/config.json"
  local config; config=$(sha "$dir/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$(size "$dir/config.json")" "$layer" "$(size "$dir/blobs/sha256/$layer")" >"$dir/manifest.json"
  local manifest; manifest=$(sha "$dir/manifest.json")
  if ctr -a "$sock" -n k8s.io images ls | awk -v n="$name" '$1 == n {print $3}' | grep -qx "sha256:$manifest"; then
    return
  fi
  mv "$dir/config.json" "$dir/blobs/sha256/$config"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s"}}]}' \
    "$manifest" "$(size "$dir/manifest.json")" "$name" >"$dir/index.json"
  mv "$dir/manifest.json" "$dir/blobs/sha256/$manifest"
  echo "sha256:$manifest" >"$dir.digest"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
  tar -C "$dir" -cf "$dir.tar" oci-layout index.json blobs
  ctr -a "$sock" -n k8s.io images import "$dir.tar" >/dev/null
  log "imported $name"
}

busybox_root "$work/busybox"
oci_image registry.k8s.io/pause:3.10 "$work/busybox" '["/bin/sleep","2147483647"]'
oci_image cubepod.local/busybox:1 "$work/busybox" '["/bin/sh"]'

# podd-init and podd, static, from podd/ with the control plane's Go caches.
bin=$work/injector/opt/cubepod/bin
mkdir -p "$bin"
(cd "$ROOT/podd" && GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
  GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build \
  go build -trimpath -ldflags "-s -w" -o "$bin/" ./cmd/podd ./cmd/podd-init ./cmd/cubepod-egress) || die "building podd failed"
install -m 0755 "$ROOT/podd/podd-copy" "$bin/podd-copy"
# Debian's mke2fs for podd-init in Block mode, with the libraries it links and their loader, so
# that it runs on whatever userland the sandbox image has.
mke2fs=$(command -v mke2fs || echo /sbin/mke2fs)
mkdir -p "$bin/mke2fs"
cp -L "$mke2fs" "$bin/mke2fs/mke2fs"
for lib in $(ldd "$mke2fs" | grep -o '/[^ ]*'); do cp -L "$lib" "$bin/mke2fs/"; done
[ -x "$bin/mke2fs/ld-linux-x86-64.so.2" ] || die "mke2fs's loader is not ld-linux-x86-64.so.2: $(ldd "$mke2fs")"
busybox_root "$work/injector"
oci_image cubepod.local/podd-injector:dev "$work/injector" '["/bin/sh"]'
# The sandbox image: a Debian userland (sandbox-image.sh), built once per recipe into the cache.
sandbox=$(bash "$here/sandbox-image.sh" | tail -1) || die "building the sandbox image failed"
if ! ctr -a "$sock" -n k8s.io images ls | awk '$1 == "cubepod.local/sandbox:dev" {print $3}' |
  grep -qx "$(cat "${sandbox%.tar}.digest")"; then
  ctr -a "$sock" -n k8s.io images import "$sandbox" >/dev/null
  log "imported cubepod.local/sandbox:dev"
fi

# The Pepr controller image, as the published one is laid out (`node` as the entrypoint, the
# module's runtime in /app/node_modules), from what this machine has: its own Node binary with the
# shared libraries it links, on the busybox userland, and the production dependencies of this
# project's lockfile (pepr at the pinned version, and what the gateway bundle's loader needs),
# installed once per lockfile and Node version into the cache.
controller_image() {
  local pepr name key app node
  pepr=$(node -p "require('$ROOT/package.json').dependencies.pepr")
  name=ghcr.io/defenseunicorns/pepr/controller:v$pepr
  key=$( (cat "$ROOT/package-lock.json"; node --version) | sha256sum | cut -c1-16)
  app=$CUBEPOD_CACHE/controller-app/$key
  # The image made from this app and this script, once imported.
  local stamp; stamp=$app.$(sha256sum "$here/images.sh" | cut -c1-12).digest
  if [ -f "$stamp" ] && ctr -a "$sock" -n k8s.io images ls | awk -v n="$name" '$1 == n {print $3}' |
    grep -qx "$(cat "$stamp")"; then
    return
  fi
  if [ ! -d "$app/node_modules" ]; then
    log "installing the controller image's node_modules (pepr $pepr)"
    rm -rf "$app.tmp" && mkdir -p "$app.tmp"
    cp "$ROOT/package.json" "$ROOT/package-lock.json" "$app.tmp/"
    (cd "$app.tmp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null) ||
      die "npm ci for the controller image failed"
    mv "$app.tmp" "$app"
  fi
  local root=$work/controller
  busybox_root "$root"
  node=$(readlink -f "$(command -v node)")
  mkdir -p "$root/usr/local/bin" "$root/app"
  cp "$node" "$root/usr/local/bin/node"
  ln -sf /usr/local/bin/node "$root/bin/node"
  for lib in $(ldd "$node" | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  printf 'nonroot:x:65532:65532::/home/nonroot:/bin/sh\n' >>"$root/etc/passwd"
  cp -a "$app/node_modules" "$root/app/node_modules"
  # The controller writes the module's code into /app, as the user its Deployments run as.
  chown 65532:65532 "$root/app"
  oci_image "$name" "$root" '["node"]'
  cp "$work/$(echo "$name" | tr '/:' '__').digest" "$stamp" 2>/dev/null ||
    ctr -a "$sock" -n k8s.io images ls | awk -v n="$name" '$1 == n {print $3}' >"$stamp"
}
controller_image
