#!/usr/bin/env bash
# Pushes the images build/images.sh made (dist/images/*.tar) to a registry, as
# <registry>/<name>:<tag>, with skopeo (Debian's). The chart's `images.registry` and `images.tag`
# then name them. Usage: push-images.sh [--plain-http] REGISTRY [TAG]
#   REGISTRY  host[:port][/path], e.g. registry.example.com/cubepod
#   TAG       default: the package's version
#   --plain-http  a registry served over HTTP, without TLS (one on this machine)
set -euo pipefail
. "$(dirname "$0")/../local-cluster/env.sh"
tls=()
if [ "${1:-}" = --plain-http ]; then tls=(--dest-tls-verify=false); shift; fi
registry=${1:?usage: push-images.sh [--plain-http] REGISTRY [TAG]}
tag=${2:-$(node -p "require('$ROOT/package.json').version")}
command -v skopeo >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends skopeo >/dev/null || die "skopeo is missing and apt-get install skopeo failed"
archives=("$ROOT"/dist/images/*.tar)
[ -e "${archives[0]}" ] || die "no image in dist/images: run npm run images first"
for archive in "${archives[@]}"; do
  name=$(basename "$archive" .tar)
  skopeo copy --quiet "${tls[@]}" "oci-archive:$archive" "docker://$registry/$name:$tag" ||
    die "pushing $name to $registry failed"
  log "pushed $registry/$name:$tag"
done
