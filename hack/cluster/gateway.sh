#!/usr/bin/env bash
# Runs the CubePod gateway locally on 127.0.0.1:${CUBEPOD_GATEWAY_PORT:-8080}.
#   gateway.sh start   start it (no-op when running) and wait until it answers
#   gateway.sh stop    stop it
# Its token key is made once per cluster (.cluster/gateway-token-key): tokens stay valid across
# restarts, as with several replicas sharing one key.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$ROOT"
GATEWAY_PORT=${CUBEPOD_GATEWAY_PORT:-8080}

case "${1:-start}" in
start)
  key_file=$CLUSTER_DIR/gateway-token-key
  [ -s "$key_file" ] || (umask 077 && openssl rand -hex 32 >"$key_file")
  CUBEPOD_GATEWAY_TOKEN_KEY=$(cat "$key_file") CUBEPOD_GATEWAY_PORT=$GATEWAY_PORT \
    start gateway npx tsx gateway/main.ts
  wait_for "gateway on 127.0.0.1:$GATEWAY_PORT" 60 curl -s -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/" \
    || { tail -20 "$LOGS/gateway.log" >&2; die "the gateway did not come up: see $LOGS/gateway.log"; }
  ;;
stop) stop gateway TERM 50 ;;
*) die "usage: gateway.sh start|stop" ;;
esac
