#!/usr/bin/env bash
# A real node beside kwok's: containerd + runc + a CNI bridge + kubelet on this machine, registered
# with the local API server as cubepod-real-0. Its Pods get addresses of 198.18.0.0/24 (a range
# set aside for test networks) on the bridge cubepod0, reachable from this machine only: no route
# or NAT leads off it. It is tainted cubepod.dev/real-node:NoSchedule, so only Pods that tolerate
# the taint land there; kwok keeps everything else.
#   real-node.sh start   install what Debian ships (runc, containerd, CNI plugins, busybox-static)
#                        when missing, start containerd, the volume provisioner of the StorageClass
#                        cubepod-local (local-volumes.ts) and kubelet, wait until the node is Ready
#   real-node.sh stop    delete its Pods (so that the kubelet tears their networks down), stop both
#                        and remove what they left (shims, mounts, the bridge)
set -euo pipefail
. "$(dirname "$0")/env.sh"
RUN=$CLUSTER_DIR/real-node
SOCK=$RUN/containerd.sock
KUBELET_PORT=${CUBEPOD_KUBELET_PORT:-10260}
KUBELET_HEALTHZ_PORT=${CUBEPOD_KUBELET_HEALTHZ_PORT:-10268}

fill() { # template -> stdout
  sed -e "s#@RUN@#$RUN#g" -e "s#@PKI@#$PKI#g" -e "s#@POD_SUBNET@#$REAL_POD_SUBNET#g" \
    -e "s#@GATEWAY_IP@#$REAL_GATEWAY_IP#g" -e "s#@SERVICE_CIDR@#$SERVICE_CIDR#g" -e "s#^port: .*#port: $KUBELET_PORT#" \
    -e "s#^healthzPort: .*#healthzPort: $KUBELET_HEALTHZ_PORT#" "$1"
}

install_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  command -v containerd >/dev/null || missing+=(containerd)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
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

case "${1:-start}" in
start)
  [ "$(id -u)" = 0 ] || die "the real node needs root (containerd, runc, mounts, network namespaces)"
  install_packages
  [ -x "$CUBEPOD_BIN/kubelet" ] || die "no kubelet in $CUBEPOD_BIN: run hack/cluster/build.sh"
  mkdir -p "$RUN/cni/net.d" "$RUN/kubelet" "$LOGS" "$PIDS"
  node_certs
  kubelet_kubeconfig
  fill "$here/manifests/containerd.toml" >"$RUN/containerd.toml"
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
  start containerd containerd --config "$RUN/containerd.toml"
  wait_for containerd 60 ctr -a "$SOCK" version || die "containerd did not start: see $LOGS/containerd.log"
  bash "$here/images.sh" "$SOCK"
  start kubelet "$CUBEPOD_BIN/kubelet" --config "$RUN/kubelet.yaml" \
    --kubeconfig "$RUN/kubelet.kubeconfig" --hostname-override "$REAL_NODE_NAME" \
    --node-ip "$REAL_GATEWAY_IP" --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" \
    --node-labels "cubepod.dev/node=real"
  kubectl apply -f "$here/manifests/storage-class.yaml" >/dev/null
  start local-volumes npx tsx "$here/local-volumes.ts"
  wait_for "node $REAL_NODE_NAME" 120 sh -c "kubectl get node $REAL_NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' 2>/dev/null | grep -q True" \
    || { tail -20 "$LOGS/kubelet.log" >&2; die "the kubelet did not make $REAL_NODE_NAME Ready: see $LOGS/kubelet.log"; }
  ;;
stop)
  if alive kubelet && alive kube-apiserver; then
    kubectl delete pods -A --field-selector "spec.nodeName=$REAL_NODE_NAME" --wait=true --timeout=60s >/dev/null 2>&1 || true
  fi
  stop kubelet TERM 50
  stop local-volumes TERM 20
  stop containerd TERM 50
  # Shims and containers outlive containerd; so do the mounts and network namespaces of their Pods.
  pkill -KILL -f "containerd-shim-runc-v2.*$RUN" 2>/dev/null || true
  pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io -address $SOCK" 2>/dev/null || true
  grep -o " $RUN[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do ip netns delete "$ns" || true; done
  ip link delete cubepod0 2>/dev/null || true
  iptables -t nat -D PREROUTING -i cubepod0 -d "$KUBERNETES_SERVICE_IP" -p tcp --dport 443 -j DNAT \
    --to-destination "127.0.0.1:$APISERVER_PORT" 2>/dev/null || true
  ip route delete blackhole "$SERVICE_CIDR" 2>/dev/null || true
  # Loop devices of Block volumes (local-volumes.ts attaches them again at the next start) and
  # the kubelet's own, on its device map paths.
  losetup -a | grep -F "($RUN/" | cut -d: -f1 | while read -r loop; do losetup -d "$loop" || true; done
  rm -rf "$RUN/cni/ipam"
  ;;
*) die "usage: real-node.sh start|stop" ;;
esac
