#!/usr/bin/env bash
# Generates podd's Go code for envd's protocol (podd/spec/*/*.proto, E2B's own files) with protoc
# (Debian's protobuf-compiler) and the Go and Connect plugins at the versions podd's go.mod pins.
# Usage: podd-spec.sh [--check]   --check: fails when the committed code is not what this makes.
set -euo pipefail
. "$(dirname "$0")/../local-cluster/env.sh"
spec=$ROOT/podd/spec
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build
command -v protoc >/dev/null || apt-get install -y -q protobuf-compiler >/dev/null ||
  die "protoc is missing and apt-get install protobuf-compiler failed"
version() { (cd "$ROOT/podd" && go list -m -f '{{.Version}}' "$1"); }
plugins=$CUBEPOD_CACHE/protoc-plugins/$(version google.golang.org/protobuf)-$(version connectrpc.com/connect)
if [ ! -x "$plugins/protoc-gen-connect-go" ]; then
  (cd "$ROOT/podd" && GOBIN=$plugins go install google.golang.org/protobuf/cmd/protoc-gen-go \
    connectrpc.com/connect/cmd/protoc-gen-connect-go) || die "building the protoc plugins failed"
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
opts=()
for p in filesystem process; do
  opts+=("--go_opt=M$p/$p.proto=cubepod.local/podd/spec/$p"
    "--connect-go_opt=M$p/$p.proto=cubepod.local/podd/spec/$p")
done
PATH=$plugins:$PATH protoc -I "$spec" --go_out="$out" --go_opt=paths=source_relative \
  --connect-go_out="$out" --connect-go_opt=paths=source_relative "${opts[@]}" \
  filesystem/filesystem.proto process/process.proto
if [ "${1:-}" = --check ]; then
  for f in $(cd "$out" && find . -name '*.go'); do
    cmp -s "$out/$f" "$spec/$f" || die "podd/spec/$f is not what build/podd-spec.sh generates: run it"
  done
  exit 0
fi
(cd "$out" && find . -name '*.go' -exec install -D -m 0644 {} "$spec/{}" \;)
