#!/usr/bin/env bash
# Runs the CubePod module locally with `pepr dev` against the local control plane.
#   module.sh start   start it (no-op when running), wait for its webhooks, harden them (and
#                     keep them hardened across pepr dev's rebuilds: keep-hardened.sh)
#   module.sh stop    stop it; remove its webhook configurations
#   module.sh kill    kill it hard (SIGKILL), leaving its webhook configurations behind, as a crash would
# With CUBEPOD_MODULE_BUILD=reuse (the integration tests set it), `start` runs the bundle, TLS pair
# and webhook configurations the last `pepr dev` start of this cluster left, instead of building the
# unchanged module again: tests that restart the module many times test the restart, not the
# build. down.sh forgets that build, so a cluster's first start always builds.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$ROOT"
built=$CLUSTER_DIR/module-build

# What a start from the build needs, kept after a `pepr dev` start: its bundle, the TLS pair it
# serves with, the path it was told its webhooks call, and both webhook configurations as hardened.
keep_build() {
  rm -rf "$built" && mkdir -p "$built"
  cp dist/pepr-cubepod.js insecure-tls.key insecure-tls.crt "$built/"
  kubectl get "mutatingwebhookconfiguration/$MODULE_NAME" "validatingwebhookconfiguration/$MODULE_NAME" -o json |
    node -e '
      const list = JSON.parse(require("fs").readFileSync(0, "utf8"));
      for (const item of list.items)
        for (const key of ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"])
          delete item.metadata[key];
      const url = list.items[0].webhooks[0].clientConfig.url;
      require("fs").writeFileSync(process.argv[1] + "/api-path", url.split("/").pop());
      process.stdout.write(JSON.stringify(list));
    ' "$built" >"$built/webhooks.json"
}

# As `pepr dev` runs the module it built (node_modules/pepr/src/cli/dev.ts): the same environment.
start_built() {
  kubectl apply --server-side --force-conflicts --field-manager=cubepod-local-module \
    -f "$built/webhooks.json" >/dev/null
  NODE_PATH=$ROOT/node_modules LOG_LEVEL=${LOG_LEVEL:-info} PEPR_MODE=dev PEPR_PRETTY_LOGS=true \
    PEPR_API_PATH=$(cat "$built/api-path") SSL_KEY_PATH=$built/insecure-tls.key \
    SSL_CERT_PATH=$built/insecure-tls.crt start module node "$built/pepr-cubepod.js"
}

webhooks_gone() {
  kubectl delete mutatingwebhookconfiguration "$MODULE_NAME" --ignore-not-found >/dev/null
  kubectl delete validatingwebhookconfiguration "$MODULE_NAME" --ignore-not-found >/dev/null
}

case "${1:-start}" in
start)
  if alive module; then log "module already running"; start hardener bash "$here/keep-hardened.sh"; exit 0; fi
  rm -f "$LOGS/module.log"
  # The gateway's token key, as the module would make it in a cluster (control-key.ts), but from
  # the file the host gateway reads too.
  kubectl create namespace pepr-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n pepr-system create secret generic cubepod-gateway-token-key \
    --from-literal=key="$(gateway_token_key)" --dry-run=client -o yaml |
    kubectl apply --server-side -f - >/dev/null
  eval "$(npx tsx "$here/local-module-env.ts")"
  from_build=0
  [ "${CUBEPOD_MODULE_BUILD:-}" = reuse ] && [ -s "$built/webhooks.json" ] && from_build=1
  if [ "$from_build" = 1 ]; then
    start_built
  else
    # A module killed earlier may have left webhooks pointing at nothing.
    webhooks_gone
    rm -rf "$built"
    LOG_LEVEL=${LOG_LEVEL:-info} start module npx pepr dev --host localhost --yes
  fi
  ready() {
    kubectl get mutatingwebhookconfiguration "$MODULE_NAME" >/dev/null 2>&1 &&
      kubectl get validatingwebhookconfiguration "$MODULE_NAME" >/dev/null 2>&1 &&
      curl -skf https://localhost:3000/healthz >/dev/null 2>&1
  }
  wait_for "module webhooks" 300 ready || { tail -30 "$LOGS/module.log" >&2; die "the module did not come up: see $LOGS/module.log"; }
  npx tsx "$here/harden-webhooks.ts"
  [ "$from_build" = 1 ] || keep_build
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
