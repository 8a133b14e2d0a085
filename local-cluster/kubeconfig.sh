#!/usr/bin/env bash
# Writes .cluster/kubeconfig: the admin identity, certificates embedded.
set -euo pipefail
. "$(dirname "$0")/env.sh"
b64() { base64 -w0 "$1"; }
cat >"$KUBECONFIG_FILE" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: cubepod-local
    cluster:
      server: https://127.0.0.1:$APISERVER_PORT
      certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
  - name: cubepod-admin
    user:
      client-certificate-data: $(b64 "$PKI/admin.crt")
      client-key-data: $(b64 "$PKI/admin.key")
contexts:
  - name: cubepod-local
    context: { cluster: cubepod-local, user: cubepod-admin }
current-context: cubepod-local
YAML
chmod 600 "$KUBECONFIG_FILE"
