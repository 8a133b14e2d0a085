#!/usr/bin/env bash
# Builds the Pepr module (dist/pepr-module-cubepod.yaml and the Helm chart), hardens its webhooks
# and adds the gateway. `pepr build` exits 0 even when its type check fails, so this checks its output.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf dist
log=$(mktemp)
npx pepr build "$@" 2>&1 | tee "$log" | grep -vE '^\s+[├└]' || true
if grep -q "error TS" "$log"; then
  echo "build: type errors (see above)" >&2
  exit 1
fi
# The gateway, as one file the controller image's Node runs (build/gateway-deployment.ts). Outside a
# cluster it falls back to the kubeconfig through @kubernetes/client-node, which stays external.
npx esbuild gateway/main.ts --bundle --platform=node --target=node20 --minify --log-level=warning \
  --external:@kubernetes/client-node --outfile=dist/cubepod-gateway.js
npx tsx build/postbuild.ts
