#!/usr/bin/env bash
# Stops everything `up` started (by pid, whole process groups), removes the module's webhook
# configurations. --purge also deletes the cluster's data (etcd, certificates, kubeconfig).
set -euo pipefail
. "$(dirname "$0")/env.sh"
bash "$here/gateway.sh" stop || true
bash "$here/module.sh" stop || true
rm -rf "$CLUSTER_DIR/module-build" # the next start builds the module again (module.sh)
bash "$here/real-node.sh" stop || true
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  stop "$name" TERM 100
done
if [ "${1:-}" = "--purge" ]; then rm -rf "$CLUSTER_DIR"; log "purged $CLUSTER_DIR"; fi
