#!/usr/bin/env bash
# Builds the images a sandbox needs, as OCI archives under dist/images/, with Debian's tools and
# reproducibly (the same sources give the same digests); `npm run images:push` puts them into a
# registry. Usage: images.sh   (prints each archive's path)
#   podd-injector.tar  podd-init, podd and cubepod-egress (podd/, static Go programs) in
#                      /opt/cubepod/bin, the copy program of `forkStrategy: Copy`, Debian's mke2fs
#                      (Block mode) with its libraries, and busybox for `cp`
#   egress-agent.tar   the node egress agent (podd/cmd/cubepod-egress-agent), for the chart's
#                      DaemonSet
#   base.tar           a sandbox's own image like E2B's `base`: Debian with bash, Python, git,
#                      curl and sudo, the user `user` (base-image.sh)
set -euo pipefail
. "$(dirname "$0")/../local-cluster/env.sh"
. "$(dirname "$0")/oci-image.sh"
out=$ROOT/dist/images
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bin=$work/injector/opt/cubepod/bin
mkdir -p "$bin"
(cd "$ROOT/podd" && GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
  GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build \
  go build -trimpath -ldflags "-s -w" -o "$bin/" ./cmd/podd ./cmd/podd-init ./cmd/cubepod-egress) ||
  die "building podd failed"
install -m 0755 "$ROOT/podd/podd-copy" "$bin/podd-copy"
# Debian's mke2fs for podd-init in Block mode, with the libraries it links and their loader, so
# that it runs on whatever userland the sandbox image has.
mke2fs=$(command -v mke2fs || echo /sbin/mke2fs)
mkdir -p "$bin/mke2fs"
cp -L "$mke2fs" "$bin/mke2fs/mke2fs"
for lib in $(ldd "$mke2fs" | grep -o '/[^ ]*'); do cp -L "$lib" "$bin/mke2fs/"; done
[ -x "$bin/mke2fs/ld-linux-x86-64.so.2" ] || die "mke2fs's loader is not ld-linux-x86-64.so.2: $(ldd "$mke2fs")"
busybox_root "$work/injector"
oci_archive "$work/injector" '["/bin/sh"]' "$out/podd-injector.tar"
echo "$out/podd-injector.tar"

# The node egress agent (podd/egressagent): its static program alone, run by the chart's
# DaemonSet in each node's network namespace.
agent=$work/egress-agent
mkdir -p "$agent/usr/local/bin"
(cd "$ROOT/podd" && GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
  GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build \
  go build -trimpath -ldflags "-s -w" -o "$agent/usr/local/bin/" ./cmd/cubepod-egress-agent) ||
  die "building the egress agent failed"
oci_archive "$agent" '["/usr/local/bin/cubepod-egress-agent"]' "$out/egress-agent.tar"
echo "$out/egress-agent.tar"

base=$(bash "$ROOT/build/base-image.sh" | tail -1) || die "building the base image failed"
cp "$base" "$out/base.tar"
echo "$out/base.tar"
