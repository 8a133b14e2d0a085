# Shared settings of the local control plane. Everything binds 127.0.0.1; ports can be overridden.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/.." && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"
CLUSTER_DIR=${CUBEPOD_CLUSTER_DIR:-$ROOT/.cluster}
PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
PIDS=$CLUSTER_DIR/pids
KUBECONFIG_FILE=$CLUSTER_DIR/kubeconfig
ETCD_PORT=${CUBEPOD_ETCD_PORT:-23790}
ETCD_PEER_PORT=${CUBEPOD_ETCD_PEER_PORT:-23800}
APISERVER_PORT=${CUBEPOD_APISERVER_PORT:-16443}
KCM_PORT=${CUBEPOD_KCM_PORT:-10357}
SCHEDULER_PORT=${CUBEPOD_SCHEDULER_PORT:-10359}
KWOK_PORT=${CUBEPOD_KWOK_PORT:-10347}
# Pod IPs come from loopback so that anything dialing a pod IP stays on this machine.
POD_CIDR=${CUBEPOD_POD_CIDR:-127.64.0.0/16}
NODE_IP=127.0.0.1
NODE_NAME=kwok-node-0
# The real node (real-node.sh): its Pods' subnet, on a bridge whose address is the gateway.
REAL_NODE_NAME=cubepod-real-0
REAL_POD_SUBNET=${CUBEPOD_REAL_POD_SUBNET:-198.18.0.0/24}
REAL_GATEWAY_IP=${CUBEPOD_REAL_GATEWAY_IP:-198.18.0.1}
# The local cluster's own internet (real-node.sh): a network namespace of this machine on
# addresses of the benchmark range outside the cluster's, with two hosts answering HTTP and HTTPS
# (internet-hosts.ts) and a DNS server naming them under INTERNET_DOMAIN, which is the real
# node's Pods' resolver. Only the real node's Pods reach it, through this machine; it reaches
# nothing. A sandbox's egress is tried against it; nothing leaves the machine.
PUBLIC_NETNS=cubepod-public
PUBLIC_SUBNET=${CUBEPOD_PUBLIC_SUBNET:-198.19.0.0/24}
PUBLIC_ROUTER_IP=${CUBEPOD_PUBLIC_ROUTER_IP:-198.19.0.1}
# Its hosts: `a.<domain>` (and any name under it) and `b.<domain>`; and its DNS server.
PUBLIC_IP=${CUBEPOD_PUBLIC_IP:-198.19.0.10}
PUBLIC_IP_B=${CUBEPOD_PUBLIC_IP_B:-198.19.0.11}
PUBLIC_DNS_IP=${CUBEPOD_PUBLIC_DNS_IP:-198.19.0.53}
INTERNET_DOMAIN=${CUBEPOD_INTERNET_DOMAIN:-internet.test}
# Service IPs: also a test network range, so that a real node's Pods route them to this machine,
# where nothing but the API server's (the Service `kubernetes`, real-node.sh) is translated, and
# a blackhole route keeps the rest from leaving it.
SERVICE_CIDR=${CUBEPOD_SERVICE_CIDR:-198.18.1.0/24}
KUBERNETES_SERVICE_IP=${CUBEPOD_KUBERNETES_SERVICE_IP:-198.18.1.1}
# The local registry (Debian's docker-registry), which the real node pulls every image from.
REGISTRY=127.0.0.1:${CUBEPOD_REGISTRY_PORT:-5000}
MODULE_NAME=pepr-cubepod
# The gateway's token key, made once per cluster: tokens stay valid across restarts (as with
# several replicas sharing one key), and the module's public key for sandboxes follows from it.
GATEWAY_TOKEN_KEY_FILE=$CLUSTER_DIR/gateway-token-key
# The admin client certificate's user: the tests', and the local module's (pepr dev) identity.
ADMIN_USER=cubepod-admin
export PATH="$CUBEPOD_BIN:$PATH"
export KUBECONFIG=$KUBECONFIG_FILE

gateway_token_key() {
  [ -s "$GATEWAY_TOKEN_KEY_FILE" ] || (mkdir -p "$CLUSTER_DIR" && umask 077 && openssl rand -hex 32 >"$GATEWAY_TOKEN_KEY_FILE")
  cat "$GATEWAY_TOKEN_KEY_FILE"
}

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
# Running (a killed process not yet reaped by its parent is a zombie: `kill -0` succeeds on it).
alive() {
  local stat
  [ -f "$PIDS/$1.pid" ] || return 1
  stat=$(ps -o stat= -p "$(cat "$PIDS/$1.pid")" 2>/dev/null) || return 1
  [ -n "$stat" ] && [[ "$stat" != Z* ]]
}

# Starts a component in its own session (so `down` can end its whole process group).
start() {
  local name=$1; shift
  if alive "$name"; then log "$name already running (pid $(cat "$PIDS/$name.pid"))"; return; fi
  mkdir -p "$LOGS" "$PIDS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! >"$PIDS/$name.pid"
  log "started $name (pid $!)"
}

# Stops a component started by `start`: its whole process group gets `signal`, then, after up to
# `tenths` tenths of a second, SIGKILL. Forgets its pid. Usage: stop NAME SIGNAL TENTHS
stop() {
  local name=$1 signal=$2 tenths=$3 pid
  if alive "$name"; then
    pid=$(cat "$PIDS/$name.pid")
    kill "-$signal" -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 "$tenths"); do alive "$name" || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    log "stopped $name"
  fi
  rm -f "$PIDS/$name.pid"
}

# Waits until a command succeeds, up to $2 seconds.
wait_for() {
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
  log "$what ready"
}
