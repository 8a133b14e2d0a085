# Pinned versions of the local control plane. Changing a pin rebuilds that binary.
K8S_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
# Only to render the generated Helm chart in tests.
HELM_VERSION=v3.22.0
# The real node's NetworkPolicy enforcement (its policy controller only).
KUBE_ROUTER_VERSION=v2.1.0
# The real node's sandboxing runtime: gVisor's runsc and its containerd shim (the go branch, as
# the module proxy serves it).
GVISOR_VERSION=v0.0.0-20260905035102-160fafc42237
# Kubernetes' CSI sidecars and snapshot controller, which drive the real node's CSI driver
# (csi-driver/, decision 0029).
CSI_PROVISIONER_VERSION=v6.4.0
CSI_SNAPSHOTTER_VERSION=v8.7.0
CSI_RESIZER_VERSION=v2.3.0
# Where binaries and Go caches live: outside the work tree, reused by later runs and CI.
CUBEPOD_CACHE=${CUBEPOD_CACHE:-$HOME/.cache/cubepod}
CUBEPOD_BIN=$CUBEPOD_CACHE/bin
