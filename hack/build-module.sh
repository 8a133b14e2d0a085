#!/usr/bin/env bash
# Builds the Pepr module (dist/pepr-module-cubepod.yaml and the Helm chart) and hardens its
# webhooks. `pepr build` exits 0 even when its type check fails, so this checks its output.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf dist
log=$(mktemp)
npx pepr build "$@" 2>&1 | tee "$log" | grep -vE '^\s+[├└]' || true
if grep -q "error TS" "$log"; then
  echo "build: type errors (see above)" >&2
  exit 1
fi
npx tsx hack/postbuild.ts
