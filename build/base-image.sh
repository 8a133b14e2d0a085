#!/usr/bin/env bash
# Builds `base`, a sandbox's own image like E2B's template of that name, as a Debian bookworm
# userland: an OCI image layout in a tarball (an OCI archive, as skopeo reads them), made without
# a registry or a container engine. Usage: base-image.sh   (prints the tarball's path as its last
# line of stdout)
#
# The tarball is $CUBEPOD_CACHE/base-image/<key>.tar, <key> a hash of this script (the recipe)
# and of the mirrors: it is built only when one of them changes, otherwise the run is instant.
# Beside it, <key>.digest holds the manifest's digest.
#
# How: mmdebstrap makes the root filesystem as a tarball, which is the image's single layer, gzipped
# as is; the config, manifest, index.json and oci-layout are written here, as oci-image.sh does for
# other images (build/oci-image.sh; a one-layer image is a few lines of JSON).
# mmdebstrap runs in mode `unshare`: run as root it does not use a user namespace (so owners in
# the tarball are real) but does unshare the mount, pid, uts and ipc namespaces, so the /proc, /sys
# and /dev it mounts into the chroot, and the maintainer scripts' processes, never reach the host,
# even if the build is killed. Needs root (for apt-get and for chroot).
set -euo pipefail
. "$(dirname "$0")/../local-cluster/env.sh"

# Packages come only from Debian's mirror, the one this machine's apt uses.
mirror=${CUBEPOD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${CUBEPOD_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
name=base
# Every file's mtime is clamped to this (2025-05-20), and tools that honour it (dpkg, useradd, the
# byte compilation of Python modules, which then checks hashes instead of mtimes) use it: two builds
# of this recipe from the same mirror content give the same bytes.
export SOURCE_DATE_EPOCH=1747699200

# The packages on top of the `apt` variant (the Essential:yes set, which has bash, coreutils,
# findutils, grep, sed, tar, gzip, diffutils..., and apt, so that `sudo apt-get update && sudo
# apt-get install` works for whatever else a task needs). No Recommends (mmdebstrap's default), so
# no build-essential or python3-dev via pip: those are 200+ MB that most tasks never use.
packages=(
  python3 python3-pip python3-venv # pip and venvs (system pip is PEP 668 "externally managed")
  python-is-python3                 # `python`, which E2B's images have and agents' code calls
  git curl ca-certificates          # fetching code over https
  sudo passwd                       # `user` may become root; useradd makes `user`
  procps                            # ps, top, kill, free: seeing and ending one's processes
  less                              # the pager git log and git diff use
  netbase                           # /etc/services and /etc/protocols, which socket libraries read
  xz-utils unzip                    # the archives tar and gzip do not open
)
# Left out, to stay lean: iproute2, openssh-client, editors, locales (C.UTF-8 is built into libc),
# tzdata (pip's tzdata serves Python), man pages.

here=$(cd "$(dirname "$0")" && pwd)
dir=$CUBEPOD_CACHE/base-image
key=$( (cat "$here/base-image.sh"; echo "$mirror $security") | sha256sum | cut -c1-16)
out=$dir/$key.tar
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "base-image.sh needs root (apt-get, and mmdebstrap's chroot)"
mkdir -p "$dir"
# One build at a time; a second run waits for the first, then finds its tarball.
exec 9>"$dir/.lock"
flock 9
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi

# The tools, from Debian, if missing.
missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v gzip >/dev/null || missing+=(gzip)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      "${missing[@]}"; }; } </dev/null >&2 ||
    die "apt-get install ${missing[*]} failed"
fi

work=$(mktemp -d "$dir/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Run on the chroot (its path is $1) after all packages are installed, before mmdebstrap's cleanup
# (which drops the apt lists and the .deb cache, logs, /tmp and /run, and empties /etc/machine-id).
cat >"$work/customize" <<'EOF'
#!/bin/sh
set -eu
root=$1
# A login shell starts without running a program: each one costs an exec, which is dear under
# gVisor, and E2B's terminals are login shells. /etc/profile asks bash's own EUID before `id`, and
# .bashrc reads the colours `dircolors` gives a colour terminal from a file made here.
sed -i 's/"$(id -u)" -eq 0/"${EUID:-$(id -u)}" -eq 0/' "$root/etc/profile"
grep -q 'EUID:-' "$root/etc/profile"
TERM=xterm-256color chroot "$root" dircolors -b >"$root/etc/dircolors.sh"
sed -i 's|^    test -r ~/.dircolors && eval "$(dircolors -b ~/.dircolors)" [|][|] eval "$(dircolors -b)"$|    if test -r ~/.dircolors; then eval "$(dircolors -b ~/.dircolors)"; else . /etc/dircolors.sh; fi|' \
  "$root/etc/skel/.bashrc"
grep -q '/etc/dircolors.sh' "$root/etc/skel/.bashrc"
chroot "$root" groupadd --gid 1000 user
chroot "$root" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/user --shell /bin/bash user
chmod 0755 "$root/home/user"
install -d -o 1000 -g 1000 -m 0755 "$root/workspace"
printf "user ALL=(ALL:ALL) NOPASSWD: ALL\n" >"$root/etc/sudoers.d/user"
chmod 0440 "$root/etc/sudoers.d/user"
# The runtime provides these (the kubelet mounts them); the copies of the build host go.
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
printf "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" >"$root/etc/hosts"
# What the dpkg path filters (below) keep out of later installs, out of the first ones too.
find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root/usr/share/man/"* "$root/usr/share/info/"* "$root/usr/share/lintian" "$root/usr/share/linda"
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
rm -f "$root/var/cache/debconf/"*-old "$root/var/lib/dpkg/"*-old
EOF
chmod 0755 "$work/customize"

log "building $name (Debian $suite) into $out" >&2
# A clean environment: nothing of the caller's (PYTHONPATH, PIP_*, ...) reaches the maintainer
# scripts, and the result does not depend on who ran it.
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
  mmdebstrap --mode=unshare --variant=apt --format=tar \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook="$work/customize" \
  --skip=output/dev \
  "$suite" "$work/rootfs.tar" \
  "deb $mirror $suite main" \
  "deb $mirror $suite-updates main" \
  "deb $security $suite-security main" >&2 ||
  die "mmdebstrap failed"
# (--skip=output/dev: no device nodes in the layer; the runtime mounts its own /dev.)

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
blobs=$work/layout/blobs/sha256
mkdir -p "$blobs"

diff_id=$(sha "$work/rootfs.tar")
gzip -n -6 -c "$work/rootfs.tar" >"$work/layer.tar.gz"
layer=$(sha "$work/layer.tar.gz")
mv "$work/layer.tar.gz" "$blobs/$layer"
uncompressed=$(size "$work/rootfs.tar")
rm -f "$work/rootfs.tar"

arch=$(dpkg --print-architecture) # amd64 and arm64 are also the OCI names
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
# No User: podd decides whom a sandbox's processes run as.
printf '{"created":"%s","architecture":"%s","os":"linux","config":{"Entrypoint":["/bin/bash"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],"WorkingDir":"/home/user"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"build/base-image.sh (mmdebstrap %s)"}]}' \
  "$created" "$arch" "$diff_id" "$created" "$suite" >"$work/config.json"
config=$(sha "$work/config.json")
mv "$work/config.json" "$blobs/$config"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$(size "$blobs/$config")" "$layer" "$(size "$blobs/$layer")" >"$work/manifest.json"
manifest=$(sha "$work/manifest.json")
mv "$work/manifest.json" "$blobs/$manifest"
# One image in the layout: skopeo copies it without naming a reference.
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"}}]}' \
  "$manifest" "$(size "$blobs/$manifest")" "$arch" >"$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
tar -C "$work/layout" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -cf "$work/image.tar" oci-layout index.json blobs

mv "$work/image.tar" "$out.tmp"
echo "sha256:$manifest" >"$dir/$key.digest"
mv "$out.tmp" "$out"
# Only this recipe's image is kept.
find "$dir" -maxdepth 1 -name '*.tar' ! -name "$key.tar" -delete
find "$dir" -maxdepth 1 -name '*.digest' ! -name "$key.digest" -delete
log "built $name: layer $(size "$blobs/$layer") bytes gzipped, $uncompressed uncompressed" >&2
echo "$out"
