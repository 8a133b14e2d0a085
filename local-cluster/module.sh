#!/usr/bin/env bash
# Runs the CubePod module locally with `pepr dev` against the local control plane.
#   module.sh start   start it (no-op when running), wait for its webhooks, harden them (and
#                     keep them hardened across pepr dev's rebuilds: keep-hardened.sh)
#   module.sh stop    stop it; remove its webhook configurations
#   module.sh kill    kill it hard (SIGKILL), leaving its webhook configurations behind, as a crash would
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$ROOT"

webhooks_gone() {
  kubectl delete mutatingwebhookconfiguration "$MODULE_NAME" --ignore-not-found >/dev/null
  kubectl delete validatingwebhookconfiguration "$MODULE_NAME" --ignore-not-found >/dev/null
}

case "${1:-start}" in
start)
  if alive module; then log "module already running"; start hardener bash "$here/keep-hardened.sh"; exit 0; fi
  # A module killed earlier may have left webhooks pointing at nothing.
  webhooks_gone
  rm -f "$LOGS/module.log"
  # The gateway's token key, as the module would make it in a cluster (control-key.ts), but from
  # the file the host gateway reads too.
  kubectl create namespace pepr-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n pepr-system create secret generic cubepod-gateway-token-key \
    --from-literal=key="$(gateway_token_key)" --dry-run=client -o yaml |
    kubectl apply --server-side -f - >/dev/null
  eval "$(npx tsx "$here/local-module-env.ts")"
  LOG_LEVEL=${LOG_LEVEL:-info} start module npx pepr dev --host localhost --yes
  ready() {
    kubectl get mutatingwebhookconfiguration "$MODULE_NAME" >/dev/null 2>&1 &&
      kubectl get validatingwebhookconfiguration "$MODULE_NAME" >/dev/null 2>&1 &&
      curl -skf https://localhost:3000/healthz >/dev/null 2>&1
  }
  wait_for "module webhooks" 300 ready || { tail -30 "$LOGS/module.log" >&2; die "the module did not come up: see $LOGS/module.log"; }
  npx tsx "$here/harden-webhooks.ts"
  start hardener bash "$here/keep-hardened.sh"
  ;;
stop)
  # SIGINT lets pepr dev remove its webhooks; then the whole group is made sure to be gone.
  stop hardener TERM 10
  stop module INT 50
  kubectl get --raw /readyz >/dev/null 2>&1 && webhooks_gone
  ;;
kill)
  stop hardener TERM 10
  if alive module; then kill -KILL -- "-$(cat "$PIDS/module.pid")" 2>/dev/null || true; fi
  rm -f "$PIDS/module.pid"
  log "killed module (webhook configurations left in place)"
  ;;
*) die "usage: module.sh start|stop|kill" ;;
esac
