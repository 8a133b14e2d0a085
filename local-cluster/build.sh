#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kwok,
# helm, kube-router, gVisor (runsc, containerd-shim-runsc-v1) and Kubernetes' CSI sidecars
# (csi-provisioner, csi-snapshotter, snapshot-controller, csi-resizer) from the Go module proxy,
# at the versions pinned in versions.sh, into $CUBEPOD_BIN. A binary whose pin has not changed is
# not rebuilt. Usage: local-cluster/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is needed to build the local control plane (etcd, kube-apiserver, kwok)." >&2
  echo "       Install Go >= 1.25 (e.g. 'apt-get install golang' or from go.dev) and run again." >&2
  exit 1
fi

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$CUBEPOD_CACHE/go/mod}
export GOCACHE=${GOCACHE_OVERRIDE:-$CUBEPOD_CACHE/go/build}
mkdir -p "$CUBEPOD_BIN" "$CUBEPOD_CACHE/src"

stamp_ok() { [ -x "$CUBEPOD_BIN/$1" ] && [ "$(cat "$CUBEPOD_BIN/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$CUBEPOD_BIN/$1.version"; }
log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# --- etcd -----------------------------------------------------------------------------------
if ! stamp_ok etcd "$ETCD_VERSION"; then
  log "building etcd $ETCD_VERSION"
  d=$CUBEPOD_CACHE/src/etcd-$ETCD_VERSION
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  go mod init cubepod.local/etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null
  go build -o "$CUBEPOD_BIN/etcd" go.etcd.io/etcd/server/v3
  stamp etcd "$ETCD_VERSION"
fi

# --- kwok -----------------------------------------------------------------------------------
if ! stamp_ok kwok "$KWOK_VERSION"; then
  log "building kwok $KWOK_VERSION"
  GOBIN=$CUBEPOD_BIN go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  # The stage definitions ship in the module; keep a copy next to the binary.
  src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION
  rm -rf "$CUBEPOD_BIN/kwok-stages" && mkdir -p "$CUBEPOD_BIN/kwok-stages"
  cp -r "$src/kustomize/stage/node/fast" "$CUBEPOD_BIN/kwok-stages/node-fast"
  cp -r "$src/kustomize/stage/pod/fast" "$CUBEPOD_BIN/kwok-stages/pod-fast"
  [ -d "$src/kustomize/stage/node/heartbeat" ] && cp -r "$src/kustomize/stage/node/heartbeat" "$CUBEPOD_BIN/kwok-stages/node-heartbeat"
  chmod -R u+w "$CUBEPOD_BIN/kwok-stages"
  stamp kwok "$KWOK_VERSION"
fi

# --- helm (renders the generated chart in the tests) ----------------------------------------
if ! stamp_ok helm "$HELM_VERSION"; then
  log "building helm $HELM_VERSION"
  GOBIN=$CUBEPOD_BIN go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp helm "$HELM_VERSION"
fi

# --- kube-router (the real node enforces NetworkPolicy with its policy controller) ----------
if ! stamp_ok kube-router "$KUBE_ROUTER_VERSION"; then
  log "building kube-router $KUBE_ROUTER_VERSION"
  d=$CUBEPOD_CACHE/src/kube-router-$KUBE_ROUTER_VERSION
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  go mod init cubepod.local/kube-router >/dev/null 2>&1
  go get "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION" >/dev/null
  go build -ldflags "-s -w" -o "$CUBEPOD_BIN/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  stamp kube-router "$KUBE_ROUTER_VERSION"
fi

# --- gVisor (the real node's sandboxing runtime) --------------------------------------------
# Two changes to the module's source. Its shim lowers its own oom_score_adj to -999 and fails
# when it may not, and this machine denies every process that (no CAP_SYS_RESOURCE; containerd's
# restrict_oom_score_adj is the same allowance for runc): the shim keeps containerd's score. And
# runsc's seccomp filter of the sandbox returns the errno each rule asks for
# (gvisor-seccomp-errno.patch says why). The build is stamped with the patch too.
gvisor_patch=$here/gvisor-seccomp-errno.patch
gvisor_build="$GVISOR_VERSION+$(sha256sum "$gvisor_patch" | cut -c1-12)"
if ! stamp_ok runsc "$gvisor_build" || ! stamp_ok containerd-shim-runsc-v1.real "$gvisor_build"; then
  log "building gVisor $GVISOR_VERSION (runsc, containerd-shim-runsc-v1)"
  d=$CUBEPOD_CACHE/src/gvisor-$GVISOR_VERSION
  rm -rf "$d" && mkdir -p "$d"
  src=$(go mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$src" "$d/gvisor" && chmod -R u+w "$d/gvisor"
  manager=$d/gvisor/pkg/shim/v1/manager.go
  grep -q 'oomScoreMax = -999' "$manager" || { echo "error: gVisor's shim no longer sets oomScoreMax = -999 in $manager: review the change" >&2; exit 1; }
  sed -i 's/oomScoreMax = -999/oomScoreMax = 0/' "$manager"
  (cd "$d/gvisor" && git apply -p1 "$gvisor_patch") || { echo "error: $gvisor_patch no longer applies to gVisor $GVISOR_VERSION: review it" >&2; exit 1; }
  (cd "$d/gvisor" && go build -trimpath -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
    -o "$d/bin/" ./runsc ./shim)
  mv "$d/bin/runsc" "$CUBEPOD_BIN/runsc"
  # The real one: containerd runs it through runsc-shim.sh (real-node.sh installs it).
  mv "$d/bin/shim" "$CUBEPOD_BIN/containerd-shim-runsc-v1.real"
  rm -rf "$d"
  stamp runsc "$gvisor_build"
  stamp containerd-shim-runsc-v1.real "$gvisor_build"
fi

# --- Kubernetes' CSI sidecars (the real node's CSI driver, decision 0029) --------------------
# Each is built in a copy of its module, so that its own replace directives hold.
csi_sidecar() { # module version command...
  local module=$1 version=$2 d src
  shift 2
  d=$CUBEPOD_CACHE/src/$(basename "${module%/v*}")-$version
  rm -rf "$d" && mkdir -p "$d"
  src=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$src/." "$d" && chmod -R u+w "$d"
  # external-snapshotter takes its API client from the repository's ./client, which its module
  # leaves out: the client module of the same version is that directory.
  if grep -q '=> ./client' "$d/go.mod"; then
    src=$(go mod download -json "${module%/v*}/client/v${module##*/v}@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp -r "$src" "$d/client" && chmod -R u+w "$d/client"
  fi
  (cd "$d" && go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$CUBEPOD_BIN/" \
    $(printf './cmd/%s ' "$@"))
  rm -rf "$d"
}
if ! stamp_ok csi-provisioner "$CSI_PROVISIONER_VERSION"; then
  log "building csi-provisioner $CSI_PROVISIONER_VERSION"
  csi_sidecar github.com/kubernetes-csi/external-provisioner/v6 "$CSI_PROVISIONER_VERSION" csi-provisioner
  stamp csi-provisioner "$CSI_PROVISIONER_VERSION"
fi
if ! stamp_ok csi-snapshotter "$CSI_SNAPSHOTTER_VERSION" || ! stamp_ok snapshot-controller "$CSI_SNAPSHOTTER_VERSION"; then
  log "building csi-snapshotter and snapshot-controller $CSI_SNAPSHOTTER_VERSION"
  csi_sidecar github.com/kubernetes-csi/external-snapshotter/v8 "$CSI_SNAPSHOTTER_VERSION" csi-snapshotter snapshot-controller
  # The snapshot API's CRDs ship with the client module.
  src=$(go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/v8@$CSI_SNAPSHOTTER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$CUBEPOD_BIN/snapshot-crds" && mkdir -p "$CUBEPOD_BIN/snapshot-crds"
  cp "$src"/config/crd/*.storage.k8s.io_*.yaml "$CUBEPOD_BIN/snapshot-crds/"
  chmod -R u+w "$CUBEPOD_BIN/snapshot-crds"
  stamp csi-snapshotter "$CSI_SNAPSHOTTER_VERSION"
  stamp snapshot-controller "$CSI_SNAPSHOTTER_VERSION"
fi
if ! stamp_ok csi-resizer "$CSI_RESIZER_VERSION"; then
  log "building csi-resizer $CSI_RESIZER_VERSION"
  csi_sidecar github.com/kubernetes-csi/external-resizer/v2 "$CSI_RESIZER_VERSION" csi-resizer
  stamp csi-resizer "$CSI_RESIZER_VERSION"
fi

# --- kube-apiserver, kube-controller-manager, kubectl ---------------------------------------
k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)
need=0
for b in "${k8s_bins[@]}"; do stamp_ok "$b" "$K8S_VERSION" || need=1; done
if [ "$need" = 1 ]; then
  log "building ${k8s_bins[*]} $K8S_VERSION"
  d=$CUBEPOD_CACHE/src/kubernetes-$K8S_VERSION
  rm -rf "$d" && mkdir -p "$d" && cd "$d"
  gomod_json=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION")
  gomod=$(printf '%s' "$gomod_json" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  goversion=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$gomod" | head -1)
  staging_version=v0.${K8S_VERSION#v1.}
  {
    echo "module cubepod.local/kubernetes"
    echo
    echo "go $goversion"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    # Every staging module kubernetes replaces with ./staging/... gets its published version.
    grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk '{print $1}' | sort -u |
      while read -r m; do echo "replace $m => $m $staging_version"; done
  } >go.mod
  go mod download >/dev/null 2>&1 || true
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" >/dev/null
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  ld=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  go build -ldflags "-s -w $ld" -o "$CUBEPOD_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet
  for b in "${k8s_bins[@]}"; do stamp "$b" "$K8S_VERSION"; done
fi
log "binaries ready in $CUBEPOD_BIN"
