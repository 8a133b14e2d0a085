#!/usr/bin/env bash
# Runs the CubePod gateway locally on 127.0.0.1:${CUBEPOD_GATEWAY_PORT:-8080}, and HTTPS on
# ${CUBEPOD_GATEWAY_TLS_PORT:-8443} with the cluster CA's certificate for *.<domain> (certs.sh).
#   gateway.sh start   start it (no-op when running) and wait until it answers
#   gateway.sh stop    stop it
# Its token key is the cluster's (env.sh: gateway_token_key).
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$ROOT"
GATEWAY_PORT=${CUBEPOD_GATEWAY_PORT:-8080}

case "${1:-start}" in
start)
  CUBEPOD_GATEWAY_TOKEN_KEY=$(gateway_token_key) CUBEPOD_GATEWAY_PORT=$GATEWAY_PORT \
    CUBEPOD_GATEWAY_TLS_CERT_FILE=$PKI/gateway.crt CUBEPOD_GATEWAY_TLS_KEY_FILE=$PKI/gateway.key \
    CUBEPOD_GATEWAY_EGRESS_AGENT=enabled \
    start gateway npx tsx gateway/main.ts
  wait_for "gateway on 127.0.0.1:$GATEWAY_PORT" 60 curl -s -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/" \
    || { tail -20 "$LOGS/gateway.log" >&2; die "the gateway did not come up: see $LOGS/gateway.log"; }
  ;;
stop) stop gateway TERM 50 ;;
*) die "usage: gateway.sh start|stop" ;;
esac
