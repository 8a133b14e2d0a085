#!/usr/bin/env bash
# `pepr dev` registers its webhooks anew after each rebuild (a saved source file), without the
# match conditions of webhook-policy.ts: every Pod in the cluster would go to the module again.
# This follows both webhook configurations and puts the conditions back whenever they change,
# until module.sh stops it. The patch is idempotent: re-applying it causes no further event.
set -uo pipefail
. "$(dirname "$0")/env.sh"
cd "$ROOT"
follow() {
  local kind=$1
  while true; do
    kubectl get "$kind" --watch-only --field-selector "metadata.name=$MODULE_NAME" -o name 2>/dev/null |
      while read -r _; do npx tsx "$here/harden-webhooks.ts" "$kind" || true; done
    sleep 1 # the watch ended (server timeout, API server restart): follow again
  done
}
follow mutatingwebhookconfiguration &
follow validatingwebhookconfiguration &
wait
