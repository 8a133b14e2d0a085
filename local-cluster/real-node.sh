#!/usr/bin/env bash
# A real node beside kwok's: containerd + runc and gVisor (the RuntimeClass gvisor) + a CNI bridge
# + kubelet on this machine, registered with the local API server as cubepod-real-0. Its Pods get
# addresses of 198.18.0.0/24 (a range set aside for test networks) on the bridge cubepod0,
# reachable from this machine only: no route or NAT leads off it. It is tainted
# cubepod.dev/real-node:NoSchedule, so only Pods that tolerate the taint land there; kwok keeps
# everything else.
#   real-node.sh start   install what Debian ships (runc, containerd, CNI plugins, busybox-static, e2fsprogs, xfsprogs,
#                        iptables, ipset, docker-registry, skopeo), start the local registry and
#                        push the node's images there (images.sh)
#                        when missing, start containerd and kubelet, the node's storage (csi.sh: the
#                        CSI driver and Kubernetes' CSI sidecars), wait until the node is Ready,
#                        and kube-router's NetworkPolicy controller and the node egress agent; the
#                        Pods' default route leads to the network namespace cubepod-public (the
#                        internet's stand-in) only
#   real-node.sh stop    delete its Pods (so that the kubelet tears their networks down), stop all
#                        of it and remove what they left (shims, mounts, the bridge, the rules)
#   real-node.sh policies on|off   start or stop enforcing NetworkPolicy (benchmarks, checks);
#                        CUBEPOD_REAL_NODE_POLICIES=off makes start leave it off (to see the
#                        isolation tests fail without it)
#   real-node.sh egress-agent on|off   start (rebuilt) or stop the node egress agent
set -euo pipefail
. "$(dirname "$0")/env.sh"
RUN=$CLUSTER_DIR/real-node
SOCK=$RUN/containerd.sock
KUBELET_PORT=${CUBEPOD_KUBELET_PORT:-10260}
KUBELET_HEALTHZ_PORT=${CUBEPOD_KUBELET_HEALTHZ_PORT:-10268}
KUBE_ROUTER_HEALTH_PORT=${CUBEPOD_KUBE_ROUTER_HEALTH_PORT:-10269}
EGRESS_AGENT_HEALTH_PORT=${CUBEPOD_EGRESS_AGENT_HEALTH_PORT:-10270}

fill() { # template -> stdout
  sed -e "s#@RUN@#$RUN#g" -e "s#@BIN@#$CUBEPOD_BIN#g" -e "s#@LOGS@#$LOGS#g" -e "s#@PKI@#$PKI#g" -e "s#@POD_SUBNET@#$REAL_POD_SUBNET#g" \
    -e "s#@GATEWAY_IP@#$REAL_GATEWAY_IP#g" -e "s#@SERVICE_CIDR@#$SERVICE_CIDR#g" -e "s#^port: .*#port: $KUBELET_PORT#" \
    -e "s#^healthzPort: .*#healthzPort: $KUBELET_HEALTHZ_PORT#" "$1"
}

# NetworkPolicy, enforced on the node's Pods by kube-router's policy controller alone (no routing,
# no service proxy): iptables and ipsets on the bridge's traffic. It finds its Node by name, so it
# starts once the kubelet has registered it.
policies_on() {
  alive kube-router && return 0
  modprobe br_netfilter 2>/dev/null || true
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  start kube-router "$CUBEPOD_BIN/kube-router" --kubeconfig "$KUBECONFIG_FILE" \
    --hostname-override "$REAL_NODE_NAME" --run-firewall=true --run-router=false \
    --run-service-proxy=false --enable-cni=false --enable-ipv6=false \
    --health-port "$KUBE_ROUTER_HEALTH_PORT" --metrics-port 0
  wait_for kube-router 60 curl -sf "http://127.0.0.1:$KUBE_ROUTER_HEALTH_PORT/healthz" \
    || { tail -20 "$LOGS/kube-router.log" >&2; die "kube-router did not start: see $LOGS/kube-router.log"; }
  # Healthy comes before its first sync: enforcing starts once its chains are in place.
  wait_for "kube-router's rules" 60 sh -c 'iptables-save -t filter | grep -c "^-A FORWARD .*KUBE-ROUTER-FORWARD"' \
    || die "kube-router wrote no rules: see $LOGS/kube-router.log"
}

# Stops enforcing: kube-router's process, then its chains (all in the filter table) and ipsets.
# Its own --cleanup-config is no use here: it cleans up the service proxy first, and panics there.
policies_off() {
  stop kube-router TERM 50
  local chains='KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-|kube-router netpol' rules sets
  rules=$(iptables-save -t filter)
  if grep -qE "$chains" <<<"$rules"; then
    grep -vE "$chains" <<<"$rules" | iptables-restore -T filter
  fi
  sets=$(ipset list -n 2>/dev/null || true)
  for set in $(grep -E '^KUBE-(SRC|DST)-' <<<"$sets" || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
}

# The node egress agent (podd/egressagent, decision 0028), built from this checkout and run beside
# kube-router with the module's view of the cluster's networks. It enforces the egress rules of
# this node's sandboxes; its proxy dials from the node's address on the bridge, so that the Pods'
# routing table (below) takes its traffic to the internet's stand-in and nowhere else, and
# resolves names with the Pods' resolver.
egress_agent_on() {
  alive egress-agent && return 0
  (cd "$ROOT/podd" && GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build \
    go build -o "$RUN/cubepod-egress-agent" ./cmd/cubepod-egress-agent) || die "building the egress agent failed"
  local networks
  networks=$(cd "$ROOT" && npx tsx "$here/local-module-env.ts" | sed -n 's/^export CUBEPOD_CLUSTER_NETWORKS="\(.*\)"$/\1/p')
  [ -n "$networks" ] || die "local-module-env.ts named no CUBEPOD_CLUSTER_NETWORKS"
  NODE_NAME=$REAL_NODE_NAME KUBECONFIG=$KUBECONFIG_FILE CUBEPOD_CLUSTER_NETWORKS=$networks \
    CUBEPOD_EGRESS_RESOLVERS=$PUBLIC_DNS_IP CUBEPOD_EGRESS_AGENT_SOURCE=$REAL_GATEWAY_IP \
    CUBEPOD_EGRESS_AGENT_HEALTH=127.0.0.1:$EGRESS_AGENT_HEALTH_PORT \
    start egress-agent "$RUN/cubepod-egress-agent"
  wait_for egress-agent 60 curl -sf "http://127.0.0.1:$EGRESS_AGENT_HEALTH_PORT/healthz" \
    || { tail -20 "$LOGS/egress-agent.log" >&2; die "the egress agent did not start: see $LOGS/egress-agent.log"; }
}

# Stops it and removes its table: the node's sandboxes are not policed then.
egress_agent_off() {
  stop egress-agent TERM 50
  [ -x "$RUN/cubepod-egress-agent" ] && "$RUN/cubepod-egress-agent" remove 2>/dev/null || true
}

install_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  command -v containerd >/dev/null || missing+=(containerd)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ipset >/dev/null || missing+=(ipset)
  command -v docker-registry >/dev/null || missing+=(docker-registry)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v mkfs.xfs >/dev/null || missing+=(xfsprogs)
  [ -x /usr/sbin/mke2fs ] || [ -x /sbin/mke2fs ] || missing+=(e2fsprogs)
  [ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || missing+=(busybox-static)
  [ ${#missing[@]} = 0 ] && return
  log "installing ${missing[*]} (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# The kubelet's client identity (the Node authorizer's system:node:<name>) and serving certificate.
node_certs() {
  cd "$PKI"
  [ -f real-node.crt ] && [ -f real-node-serving.crt ] && { cd - >/dev/null; return; }
  local ext; ext=$(mktemp)
  openssl req -newkey rsa:2048 -nodes -keyout real-node.key -out real-node.csr \
    -subj "/O=system:nodes/CN=system:node:$REAL_NODE_NAME" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$ext"
  openssl x509 -req -in real-node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out real-node.crt \
    -days 3650 -extfile "$ext" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout real-node-serving.key -out real-node-serving.csr \
    -subj "/CN=$REAL_NODE_NAME" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$REAL_GATEWAY_IP" "$REAL_NODE_NAME" >"$ext"
  openssl x509 -req -in real-node-serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out real-node-serving.crt -days 3650 -extfile "$ext" 2>/dev/null
  rm -f real-node.csr real-node-serving.csr "$ext"
  cd - >/dev/null
}

kubelet_kubeconfig() {
  local b64; b64() { base64 -w0 "$1"; }
  cat >"$RUN/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: cubepod-local
    cluster:
      server: https://127.0.0.1:$APISERVER_PORT
      certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
  - name: node
    user:
      client-certificate-data: $(b64 "$PKI/real-node.crt")
      client-key-data: $(b64 "$PKI/real-node.key")
contexts:
  - name: node
    context: { cluster: cubepod-local, user: node }
current-context: node
YAML
  chmod 600 "$RUN/kubelet.kubeconfig"
}

# The internet's stand-in (env.sh): a veth pair from this machine into the namespace. What the
# node's Pods send is routed by a table of its own, which knows the bridge and the stand-in and
# nothing else: no Pod's packet is forwarded off this machine, whatever a policy allows.
POD_ROUTES=1198
public_network() {
  if [ "$1" = down ]; then
    ip rule del from "$REAL_POD_SUBNET" lookup "$POD_ROUTES" 2>/dev/null || true
    ip route flush table "$POD_ROUTES" 2>/dev/null || true
    stop internet-hosts TERM 20
    stop internet-dns TERM 20
    ip netns delete "$PUBLIC_NETNS" 2>/dev/null || true
    return
  fi
  [ -n "$(ip rule show lookup "$POD_ROUTES")" ] || ip rule add from "$REAL_POD_SUBNET" lookup "$POD_ROUTES" priority 1000
  ip route replace unreachable default table "$POD_ROUTES"
  ip route replace "$REAL_POD_SUBNET" dev cubepod0 table "$POD_ROUTES"
  if [ ! -e "/run/netns/$PUBLIC_NETNS" ]; then
    ip netns add "$PUBLIC_NETNS"
    ip link add cubepod-pub0 type veth peer name eth0 netns "$PUBLIC_NETNS"
  fi
  local bits=${PUBLIC_SUBNET#*/}
  # No route in the main table: this machine's own traffic to those addresses (its registries
  # may sit in a documentation range too) keeps its way out; only the Pods' table knows it.
  ip addr replace "$PUBLIC_ROUTER_IP/$bits" dev cubepod-pub0 noprefixroute
  ip route del "$PUBLIC_SUBNET" dev cubepod-pub0 table main 2>/dev/null || true
  ip link set cubepod-pub0 up
  ip route replace "$PUBLIC_SUBNET" dev cubepod-pub0 table "$POD_ROUTES"
  for ip in "$PUBLIC_IP" "$PUBLIC_IP_B" "$PUBLIC_DNS_IP"; do
    ip -n "$PUBLIC_NETNS" addr replace "$ip/$bits" dev eth0
  done
  ip -n "$PUBLIC_NETNS" link set lo up
  ip -n "$PUBLIC_NETNS" link set eth0 up
  ip -n "$PUBLIC_NETNS" route replace default via "$PUBLIC_ROUTER_IP"
  sysctl -qw net.ipv4.ip_forward=1
  # Its hosts and their names. `a.<domain>` names every name under it too (dnsmasq's --address).
  command -v dnsmasq >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends dnsmasq-base >/dev/null || die "dnsmasq is missing and apt-get install dnsmasq-base failed"
  start internet-dns ip netns exec "$PUBLIC_NETNS" dnsmasq --keep-in-foreground --no-resolv \
    --no-hosts --bind-interfaces --listen-address="$PUBLIC_DNS_IP" --user=root \
    --pid-file="$RUN/internet-dns.pid" --address="/a.$INTERNET_DOMAIN/$PUBLIC_IP" \
    --address="/b.$INTERNET_DOMAIN/$PUBLIC_IP_B"
  start internet-hosts ip netns exec "$PUBLIC_NETNS" "$ROOT/node_modules/.bin/tsx" \
    "$here/internet-hosts.ts" "$PKI/internet.crt" "$PKI/internet.key" "$PUBLIC_IP" "$PUBLIC_IP_B"
  printf 'nameserver %s\n' "$PUBLIC_DNS_IP" >"$RUN/resolv.conf"
}

# Drops the node's copy of every image whose tag the local registry now serves other bytes for (a
# rebuild pushed since): the kubelet would otherwise keep running the one it pulled first, as a
# tag like `:dev` is pulled only if not present. The next Pod pulls the new one.
refresh_images() {
  local ref repo want have
  for ref in $(ctr -a "$SOCK" -n k8s.io images ls -q); do
    case $ref in registry.k8s.io/*:* | ghcr.io/*:* | cubepod.local/*:*) ;; *) continue ;; esac
    [[ $ref == *@* ]] && continue
    repo=${ref#*/}
    want=$(curl -sfI "http://$REGISTRY/v2/${repo%:*}/manifests/${repo##*:}" \
      -H "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json" |
      tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" { print $2 }') || continue
    have=$(ctr -a "$SOCK" -n k8s.io images ls "name==$ref" | awk 'NR == 2 { print $3 }')
    if [ -n "$want" ] && [ "$want" != "$have" ]; then
      ctr -a "$SOCK" -n k8s.io images rm "$ref" >/dev/null
      log "dropped the node's stale $ref"
    fi
  done
}

case "${1:-start}" in
start)
  [ "$(id -u)" = 0 ] || die "the real node needs root (containerd, runc, mounts, network namespaces)"
  install_packages
  [ -x "$CUBEPOD_BIN/kubelet" ] || die "no kubelet in $CUBEPOD_BIN: run local-cluster/build.sh"
  mkdir -p "$RUN/cni/net.d" "$RUN/kubelet" "$LOGS" "$PIDS"
  node_certs
  kubelet_kubeconfig
  fill "$here/manifests/containerd.toml" >"$RUN/containerd.toml"
  fill "$here/manifests/runsc.toml" >"$RUN/runsc.toml"
  [ -x "$CUBEPOD_BIN/runsc" ] || die "no runsc in $CUBEPOD_BIN: run local-cluster/build.sh"
  install -m 755 "$here/runsc-shim.sh" "$CUBEPOD_BIN/containerd-shim-runsc-v1"
  mkdir -p "$LOGS/runsc"
  fill "$here/manifests/cni.conflist" >"$RUN/cni/net.d/10-cubepod.conflist"
  fill "$here/manifests/kubelet.yaml" >"$RUN/kubelet.yaml"
  # The bridge (the CNI plugin reuses it) carries the node IP, which the kubelet needs before any Pod.
  ip link show cubepod0 >/dev/null 2>&1 || ip link add cubepod0 type bridge
  ip addr replace "$REAL_GATEWAY_IP/${REAL_POD_SUBNET#*/}" dev cubepod0
  ip link set cubepod0 up
  # Pods reach the API server as on any cluster, through the Service `kubernetes`: its IP and port
  # are translated to the API server on loopback (route_localnet lets the bridge's packets go
  # there), and every other Service IP ends here, as no kube-proxy translates them.
  sysctl -qw "net.ipv4.conf.cubepod0.route_localnet=1"
  dnat=(PREROUTING -i cubepod0 -d "$KUBERNETES_SERVICE_IP" -p tcp --dport 443 -j DNAT --to-destination "127.0.0.1:$APISERVER_PORT")
  iptables -t nat -C "${dnat[@]}" 2>/dev/null || iptables -t nat -A "${dnat[@]}"
  ip route replace blackhole "$SERVICE_CIDR"
  public_network up
  sed -e "s#@REGISTRY_DATA@#$CLUSTER_DIR/registry#" -e "s#@REGISTRY@#$REGISTRY#" \
    "$here/manifests/registry.yml" >"$RUN/registry.yml"
  start registry docker-registry serve "$RUN/registry.yml"
  wait_for registry 60 curl -sf "http://$REGISTRY/v2/" ||
    { tail -20 "$LOGS/registry.log" >&2; die "the local registry did not start: see $LOGS/registry.log"; }
  for host in registry.k8s.io ghcr.io cubepod.local; do
    mkdir -p "$RUN/certs.d/$host"
    printf 'server = "http://%s"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
      "$REGISTRY" "$REGISTRY" >"$RUN/certs.d/$host/hosts.toml"
  done
  bash "$here/images.sh"
  start containerd containerd --config "$RUN/containerd.toml"
  wait_for containerd 60 ctr -a "$SOCK" version || die "containerd did not start: see $LOGS/containerd.log"
  refresh_images
  start kubelet "$CUBEPOD_BIN/kubelet" --config "$RUN/kubelet.yaml" \
    --kubeconfig "$RUN/kubelet.kubeconfig" --hostname-override "$REAL_NODE_NAME" \
    --node-ip "$REAL_GATEWAY_IP" --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" \
    --node-labels "cubepod.dev/node=real"
  kubectl apply -f "$here/manifests/runtime-class.yaml" >/dev/null
  bash "$here/csi.sh" start
  wait_for "node $REAL_NODE_NAME" 120 sh -c "kubectl get node $REAL_NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' 2>/dev/null | grep -q True" \
    || { tail -20 "$LOGS/kubelet.log" >&2; die "the kubelet did not make $REAL_NODE_NAME Ready: see $LOGS/kubelet.log"; }
  if [ "${CUBEPOD_REAL_NODE_POLICIES:-on}" = off ]; then policies_off; else policies_on; fi
  egress_agent_on
  ;;
egress-agent)
  case "${2:-}" in
  on) egress_agent_on ;;
  off) egress_agent_off ;;
  *) die "usage: real-node.sh egress-agent on|off" ;;
  esac
  ;;
policies)
  case "${2:-}" in
  on) policies_on ;;
  off) policies_off ;;
  *) die "usage: real-node.sh policies on|off" ;;
  esac
  ;;
stop)
  if alive kubelet && alive kube-apiserver; then
    kubectl delete pods -A --field-selector "spec.nodeName=$REAL_NODE_NAME" --wait=true --timeout=60s >/dev/null 2>&1 || true
  fi
  stop kubelet TERM 50
  egress_agent_off
  policies_off
  bash "$here/csi.sh" stop
  stop containerd TERM 50
  stop registry TERM 50
  # Shims and containers outlive containerd; so do the mounts and network namespaces of their Pods.
  pkill -KILL -f "containerd-shim-runc-v2.*$RUN" 2>/dev/null || true
  pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io -address $SOCK" 2>/dev/null || true
  # gVisor's shims, and the sandboxes (runsc-sandbox, runsc-gofer) they started.
  pkill -KILL -f "containerd-shim-runsc-v1.real.*$SOCK" 2>/dev/null || true
  pkill -KILL -f "runsc.*--root=$RUN/runsc" 2>/dev/null || true
  grep -o " $RUN[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do ip netns delete "$ns" || true; done
  ip link delete cubepod0 2>/dev/null || true
  iptables -t nat -D PREROUTING -i cubepod0 -d "$KUBERNETES_SERVICE_IP" -p tcp --dport 443 -j DNAT \
    --to-destination "127.0.0.1:$APISERVER_PORT" 2>/dev/null || true
  ip route delete blackhole "$SERVICE_CIDR" 2>/dev/null || true
  public_network down
  # Loop devices of the pool and its volumes (staged again when their Pods start) and the
  # kubelet's own, on its device map paths.
  losetup -a | grep -F "($RUN/" | cut -d: -f1 | while read -r loop; do losetup -d "$loop" || true; done
  rm -rf "$RUN/cni/ipam"
  ;;
*) die "usage: real-node.sh start|stop|policies on|off|egress-agent on|off" ;;
esac
