#!/usr/bin/env bash
# Creates the local CA, the API server's and the gateway's serving certificates, the admin client
# certificate and the service-account key pair under .cluster/pki (once; a serving certificate
# again when it does not name what it serves: the Service IP of `kubernetes`, by which Pods reach
# the API server, and the gateway's domain).
set -euo pipefail
. "$(dirname "$0")/env.sh"
mkdir -p "$PKI" && cd "$PKI"
command -v openssl >/dev/null || die "openssl is needed to create the cluster's certificates"
sign() { # name subject [san]
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  local ext
  ext=$(mktemp)
  if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" >"$ext"
  else printf 'extendedKeyUsage=clientAuth\n' >"$ext"; fi
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
    -days 3650 -extfile "$ext" 2>/dev/null
  rm -f "$1.csr" "$ext"
}
if [ ! -f admin.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
    -subj "/CN=cubepod-local-ca" 2>/dev/null
  sign admin "/O=system:masters/CN=$ADMIN_USER"
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi
if ! openssl x509 -in apiserver.crt -noout -text 2>/dev/null | grep -q "IP Address:$KUBERNETES_SERVICE_IP\b"; then
  sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
fi
# The gateway's HTTPS certificate: every sandbox's host, `<port>-<id>.<domain>`.
GATEWAY_DOMAIN=${CUBEPOD_GATEWAY_DOMAIN:-cubepod.localhost}
if ! openssl x509 -in gateway.crt -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:\*\.$GATEWAY_DOMAIN\b"; then
  sign gateway "/CN=cubepod-gateway" "DNS:*.$GATEWAY_DOMAIN,DNS:$GATEWAY_DOMAIN,IP:127.0.0.1"
fi
# The local internet's own CA and its hosts' certificate (real-node.sh): apart from the cluster's,
# as a public CA is; a test that wants a sandbox to trust it gives it internet-ca.crt.
if ! openssl x509 -in internet.crt -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:\*\.$INTERNET_DOMAIN\b"; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout internet-ca.key -out internet-ca.crt \
    -days 3650 -subj "/CN=cubepod-internet-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout internet.key -out internet.csr \
    -subj "/CN=$INTERNET_DOMAIN" 2>/dev/null
  ext=$(mktemp)
  printf 'subjectAltName=DNS:%s,DNS:*.%s,DNS:*.a.%s,IP:%s,IP:%s\nextendedKeyUsage=serverAuth\n' \
    "$INTERNET_DOMAIN" "$INTERNET_DOMAIN" "$INTERNET_DOMAIN" "$PUBLIC_IP" "$PUBLIC_IP_B" >"$ext"
  openssl x509 -req -in internet.csr -CA internet-ca.crt -CAkey internet-ca.key -CAcreateserial \
    -out internet.crt -days 3650 -extfile "$ext" 2>/dev/null
  rm -f internet.csr "$ext"
fi
