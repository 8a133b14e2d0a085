#!/usr/bin/env bash
# Puts the local real node's images into the local registry (registry.sh), from which its
# containerd pulls them as a cluster's nodes pull theirs (real-node.sh points the registries the
# names give, registry.k8s.io, ghcr.io and cubepod.local, at it): nothing is imported by hand.
#   registry.k8s.io/pause:3.10   the Pod sandbox: sleeps (containerd kills it with SIGKILL)
#   cubepod.local/busybox:1      a static userland (Debian's busybox-static), for Pods that run for real
#   cubepod.local/podd-injector:dev, cubepod.local/base:dev  the release's images (build/images.sh),
#                                pushed as a user pushes them (build/push-images.sh)
#   ghcr.io/defenseunicorns/pepr/controller:v<pepr>  the image the module's (and the gateway's)
#                                Deployments name, built here: see controller_image
# Usage: images.sh
set -euo pipefail
. "$(dirname "$0")/env.sh"
. "$ROOT/build/oci-image.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# push ARCHIVE REPOSITORY:TAG: into the local registry (skopeo sends only the blobs it lacks).
push() {
  skopeo copy --quiet --dest-tls-verify=false "oci-archive:$1" "docker://$REGISTRY/$2" ||
    die "pushing $2 to the local registry failed"
}

busybox_root "$work/busybox"
oci_archive "$work/busybox" '["/bin/sleep","2147483647"]' "$work/pause.tar"
push "$work/pause.tar" pause:3.10
oci_archive "$work/busybox" '["/bin/sh"]' "$work/busybox.tar"
push "$work/busybox.tar" busybox:1

bash "$ROOT/build/images.sh" >/dev/null || die "building the release's images failed"
bash "$ROOT/build/push-images.sh" --plain-http "$REGISTRY" dev >/dev/null ||
  die "pushing the release's images failed"

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
  if [ ! -d "$app/node_modules" ]; then
    log "installing the controller image's node_modules (pepr $pepr)"
    rm -rf "$app.tmp" && mkdir -p "$app.tmp"
    cp "$ROOT/package.json" "$ROOT/package-lock.json" "$app.tmp/"
    (cd "$app.tmp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null) ||
      die "npm ci for the controller image failed"
    mv "$app.tmp" "$app"
  fi
  # The archive made from this app and this script, kept beside it.
  local archive; archive=$app.$(sha256sum "$here/images.sh" "$ROOT/build/oci-image.sh" | sha256sum | cut -c1-12).tar
  if [ -s "$archive" ]; then
    push "$archive" "${name#*/}"
    return
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
  oci_archive "$root" '["node"]' "$archive.tmp"
  mv "$archive.tmp" "$archive"
  push "$archive" "${name#*/}"
}
controller_image
log "images pushed to the local registry ($REGISTRY)"
