#!/usr/bin/env bash
# The whole test run: static checks, the module build, unit tests, then the integration tier on
# the local control plane (started here, or reused when already up; stopped again if started here).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/cluster/env.sh

step() { printf '\n=== %s\n' "$*"; }
step "type check, lint, format"
npx tsc --noEmit -p .
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check .; exit 1; }

step "CRDs and the benchmark table are up to date"
npx tsx hack/gen-crds.ts --check
npx tsx bench/table.ts --check

step "pepr build (module YAML, Helm chart)"
bash hack/build-module.sh >/dev/null
test -s dist/pepr-module-cubepod.yaml

step "unit tests"
npx jest --selectProjects unit

was_up=0
alive kube-apiserver && was_up=1
cleanup() { [ "$was_up" = 1 ] || bash hack/cluster/down.sh >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "integration tests (real kube-apiserver, etcd, kwok; the module under pepr dev)"
npx jest --selectProjects integration --runInBand
