#!/usr/bin/env bash
# Stops everything `up` started (by pid, whole process groups), removes the module's webhook
# configurations. --purge also deletes the cluster's data (etcd, certificates, kubeconfig).
set -euo pipefail
. "$(dirname "$0")/env.sh"
bash "$here/module.sh" stop || true
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  if alive "$name"; then
    pid=$(cat "$PIDS/$name.pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    log "stopped $name"
  fi
  rm -f "$PIDS/$name.pid"
done
if [ "${1:-}" = "--purge" ]; then rm -rf "$CLUSTER_DIR"; log "purged $CLUSTER_DIR"; fi
