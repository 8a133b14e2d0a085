#!/usr/bin/env bash
# Starts the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) on 127.0.0.1 and a real node beside kwok's (real-node.sh), applies the CRDs, then runs the
# CubePod module with `pepr dev` and returns once its webhooks are registered (and hardened) and it
# serves. Running it twice is harmless.
#   --no-module   start the control plane only
set -euo pipefail
. "$(dirname "$0")/env.sh"
with_module=1
for a in "$@"; do [ "$a" = "--no-module" ] && with_module=0; done

bash "$here/build.sh"
bash "$here/certs.sh"
bash "$here/kubeconfig.sh"
mkdir -p "$LOGS" "$PIDS" "$CLUSTER_DIR/etcd"

start etcd "$CUBEPOD_BIN/etcd" --name cubepod --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "cubepod=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync \
  --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" --log-level warn
wait_for etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start: see $LOGS/etcd.log"

start kube-apiserver "$CUBEPOD_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" --kubelet-client-certificate "$PKI/admin.crt" \
  --kubelet-client-key "$PKI/admin.key" --kubelet-preferred-address-types InternalIP \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" --enable-aggregator-routing=true --allow-privileged=true \
  --disable-admission-plugins TaintNodesByCondition --endpoint-reconciler-type none \
  --max-requests-inflight 1000 --max-mutating-requests-inflight 500 \
  --audit-policy-file "$here/manifests/audit-policy.yaml" --audit-log-path "$LOGS/audit.log" \
  --audit-log-maxsize 200 --audit-log-maxbackup 1
wait_for kube-apiserver 120 kubectl get --raw /readyz || die "kube-apiserver did not become ready: see $LOGS/kube-apiserver.log"

start kube-controller-manager "$CUBEPOD_BIN/kube-controller-manager" \
  --kubeconfig "$KUBECONFIG_FILE" --authentication-kubeconfig "$KUBECONFIG_FILE" \
  --authorization-kubeconfig "$KUBECONFIG_FILE" --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
  --controllers garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller,clusterrole-aggregation-controller,endpoints-controller,endpointslice-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,deployment-controller,replicaset-controller,persistentvolume-binder-controller,persistentvolume-protection-controller \
  --root-ca-file "$PKI/ca.crt" \
  --kube-api-qps 200 --kube-api-burst 400

sed "s#KUBECONFIG_PLACEHOLDER#$KUBECONFIG_FILE#" "$here/manifests/scheduler.yaml" >"$CLUSTER_DIR/scheduler.yaml"
start kube-scheduler "$CUBEPOD_BIN/kube-scheduler" --config "$CLUSTER_DIR/scheduler.yaml" \
  --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
  --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT"

stages=$CUBEPOD_BIN/kwok-stages
start kwok "$CUBEPOD_BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --cidr "$POD_CIDR" --node-ip "$NODE_IP" --server-address "127.0.0.1:$KWOK_PORT" \
  --node-lease-duration-seconds 40 \
  --config "$stages/node-fast/node-initialize.yaml" --config "$stages/node-heartbeat/node-heartbeat.yaml" \
  --config "$stages/pod-fast/pod-ready.yaml" --config "$stages/pod-fast/pod-complete.yaml" \
  --config "$stages/pod-fast/pod-delete.yaml" --config "$here/manifests/copy-stage.yaml"

kubectl apply --server-side -f "$here/manifests/node.yaml" >/dev/null
kubectl create namespace pepr-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply --server-side -f "$ROOT/crds/all.yaml" >/dev/null
kubectl wait --for condition=Established --timeout 60s \
  crd/podtemplates.pod.cubeplex.ai crd/podwarmpools.pod.cubeplex.ai crd/podboxes.pod.cubeplex.ai >/dev/null
# The module YAML's admission policies, for the identity the local module runs as.
npx tsx "$here/apply-policies.ts" "$ADMIN_USER" >/dev/null
wait_for "node $NODE_NAME" 60 sh -c "kubectl get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" \
  || die "kwok did not make $NODE_NAME Ready: see $LOGS/kwok.log"

bash "$here/real-node.sh" start

if [ "$with_module" = 1 ]; then bash "$here/module.sh" start; fi
bash "$here/gateway.sh" start

log "control plane up (Kubernetes $K8S_VERSION). To use it:"
echo "export KUBECONFIG=$KUBECONFIG_FILE PATH=$CUBEPOD_BIN:\$PATH"
