#!/usr/bin/env bash
# Builds the local real node's images without a registry and imports them into its containerd:
# each is an OCI image layout made by hand (one layer: a directory tarred), tagged by the
# `io.containerd.image.name` annotation. Usage: images.sh CONTAINERD_SOCKET
#   registry.k8s.io/pause:3.10   the Pod sandbox: sleeps (containerd kills it with SIGKILL)
#   cubepod.local/busybox:1      a static userland (Debian's busybox-static), for Pods that run for real
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

# oci_image NAME ROOTFS ENTRYPOINT_JSON: imports the image, unless containerd has it already.
oci_image() {
  local name=$1 rootfs=$2 entrypoint=$3 dir
  if ctr -a "$sock" -n k8s.io images ls -q | grep -qx "$name"; then return; fi
  dir=$work/$(echo "$name" | tr '/:' '__')
  mkdir -p "$dir/blobs/sha256"
  tar -C "$rootfs" --sort=name --mtime=@0 --numeric-owner --owner=0 --group=0 -cf "$dir/layer.tar" .
  local layer; layer=$(sha "$dir/layer.tar")
  mv "$dir/layer.tar" "$dir/blobs/sha256/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entrypoint" "$layer" >"$dir/config.json"
  local config; config=$(sha "$dir/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$(size "$dir/config.json")" "$layer" "$(size "$dir/blobs/sha256/$layer")" >"$dir/manifest.json"
  local manifest; manifest=$(sha "$dir/manifest.json")
  mv "$dir/config.json" "$dir/blobs/sha256/$config"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s"}}]}' \
    "$manifest" "$(size "$dir/manifest.json")" "$name" >"$dir/index.json"
  mv "$dir/manifest.json" "$dir/blobs/sha256/$manifest"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
  tar -C "$dir" -cf "$dir.tar" oci-layout index.json blobs
  ctr -a "$sock" -n k8s.io images import "$dir.tar" >/dev/null
  log "imported $name"
}

busybox_root "$work/busybox"
oci_image registry.k8s.io/pause:3.10 "$work/busybox" '["/bin/sleep","2147483647"]'
oci_image cubepod.local/busybox:1 "$work/busybox" '["/bin/sh"]'
