# Sourced: writes one-layer OCI images as OCI archives (an OCI image layout in a tarball, which
# skopeo copies to any registry), reproducibly: the layer is a directory tarred with sorted names,
# fixed times and numeric owners, so the same tree gives the same digest.

# busybox_root DIR: /bin/busybox (Debian's busybox-static) and a link per applet.
busybox_root() {
  mkdir -p "$1/bin" "$1/tmp" "$1/etc" "$1/proc" "$1/sys" "$1/dev" "$1/workspace"
  cp /bin/busybox "$1/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"; done
  printf 'root:x:0:0:root:/:/bin/sh\n' >"$1/etc/passwd"
  printf 'root:x:0:\n' >"$1/etc/group"
  chmod 1777 "$1/tmp"
}

# oci_archive ROOTFS ENTRYPOINT_JSON OUT: the image of ROOTFS as an OCI archive at OUT.
oci_archive() {
  local rootfs=$1 entrypoint=$2 out=$3 dir
  dir=$(mktemp -d)
  mkdir -p "$dir/blobs/sha256"
  tar -C "$rootfs" --sort=name --mtime=@0 --numeric-owner -cf "$dir/layer.tar" .
  local layer; layer=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  mv "$dir/layer.tar" "$dir/blobs/sha256/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entrypoint" "$layer" >"$dir/config.json"
  local config; config=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
  mv "$dir/config.json" "$dir/blobs/sha256/$config"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$(stat -c %s "$dir/blobs/sha256/$config")" "$layer" "$(stat -c %s "$dir/blobs/sha256/$layer")" >"$dir/manifest.json"
  local manifest; manifest=$(sha256sum "$dir/manifest.json" | cut -d' ' -f1)
  mv "$dir/manifest.json" "$dir/blobs/sha256/$manifest"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s}]}' \
    "$manifest" "$(stat -c %s "$dir/blobs/sha256/$manifest")" >"$dir/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
  tar -C "$dir" --sort=name --mtime=@0 --numeric-owner -cf "$out" oci-layout index.json blobs
  rm -rf "$dir"
}
