#!/usr/bin/env bash
# The real node's storage (decision 0029): a pool on XFS made with reflink (a sparse file of this
# machine, mounted on a loop device), the project's CSI driver on it (csi-driver/, built from this
# checkout, announced to the kubelet), and Kubernetes' own CSI sidecars and snapshot controller
# (local-cluster/build.sh). The StorageClass cubepod-local is the default, so that kwok's claims
# are provisioned too: as sparse images that no node ever stages.
#   csi.sh start   once the kubelet runs (real-node.sh start)
#   csi.sh stop    stop them, unmount the pool and free its devices (the pool's file stays)
set -euo pipefail
. "$(dirname "$0")/env.sh"
RUN=$CLUSTER_DIR/real-node
DRIVER=local.csi.cubeplex.ai
POOL_IMAGE=$RUN/pool.xfs
POOL=$RUN/pool
# A sparse file: it takes what the volumes hold, and gives back what they free (discard).
POOL_SIZE=${CUBEPOD_POOL_SIZE:-64G}
SOCKET=$RUN/kubelet/plugins/$DRIVER/csi.sock
SIDECARS=(csi-provisioner csi-snapshotter csi-resizer snapshot-controller)

pool_up() {
  command -v mkfs.xfs >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends xfsprogs >/dev/null || die "mkfs.xfs is missing and apt-get install xfsprogs failed"
  if [ ! -f "$POOL_IMAGE" ]; then
    truncate -s "$POOL_SIZE" "$POOL_IMAGE.partial"
    mkfs.xfs -q -m reflink=1 "$POOL_IMAGE.partial" || die "mkfs.xfs -m reflink=1 $POOL_IMAGE failed"
    mv "$POOL_IMAGE.partial" "$POOL_IMAGE"
  fi
  mkdir -p "$POOL"
  mountpoint -q "$POOL" && return
  # A device still holding the image (a stop that had to unmount lazily) is the one to mount:
  # XFS refuses a second instance of the same filesystem.
  local dev
  dev=$(losetup -j "$POOL_IMAGE" | head -1 | cut -d: -f1)
  [ -n "$dev" ] || dev=$(losetup --find --show "$POOL_IMAGE") || die "no loop device for the pool $POOL_IMAGE"
  mount -o discard "$dev" "$POOL" || die "mounting the pool $POOL_IMAGE ($dev) failed"
}

# Unmounts what the kubelet left staged or published of the pool's volumes (a node stopped with
# Pods on it) and frees their devices, then the pool's: the next start mounts it again.
pool_down() {
  local img dev m
  if mountpoint -q "$POOL"; then
    for img in "$POOL"/volumes/*.img; do
      [ -e "$img" ] || continue
      for dev in $(losetup -j "$img" | cut -d: -f1); do
        for m in $(awk -v d="$dev" '$1 == d { print $2 }' /proc/mounts | sort -r); do
          umount "$m" 2>/dev/null || umount -l "$m"
        done
        losetup -d "$dev" 2>/dev/null || true
      done
    done
    umount "$POOL" 2>/dev/null || umount -l "$POOL"
  fi
  for dev in $(losetup -j "$POOL_IMAGE" | cut -d: -f1); do losetup -d "$dev" 2>/dev/null || true; done
}

# The snapshot API, then the driver's objects: its CSIDriver, StorageClass and VolumeSnapshotClass.
# A StorageClass's provisioner cannot change: one of another provisioner is replaced.
objects() {
  kubectl apply --server-side -f "$CUBEPOD_BIN/snapshot-crds" >/dev/null
  kubectl wait --for condition=Established --timeout 60s -f "$CUBEPOD_BIN/snapshot-crds" >/dev/null
  local have
  have=$(kubectl get storageclass cubepod-local -o jsonpath='{.provisioner}' 2>/dev/null || true)
  [ -z "$have" ] || [ "$have" = "$DRIVER" ] || kubectl delete storageclass cubepod-local >/dev/null
  kubectl apply --server-side -f "$here/manifests/csi.yaml" >/dev/null
}

case "${1:-}" in
start)
  for b in "${SIDECARS[@]}"; do [ -x "$CUBEPOD_BIN/$b" ] || die "no $b in $CUBEPOD_BIN: run local-cluster/build.sh"; done
  pool_up
  (cd "$ROOT/csi-driver" && GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    GOMODCACHE=$CUBEPOD_CACHE/go/mod GOCACHE=$CUBEPOD_CACHE/go/build \
    go build -o "$RUN/cubepod-csi-driver" ./cmd/cubepod-csi-driver) || die "building the CSI driver failed"
  mkdir -p "$(dirname "$SOCKET")"
  NODE_NAME=$REAL_NODE_NAME CSI_DRIVER_NAME=$DRIVER CSI_ENDPOINT=$SOCKET CSI_POOL=$POOL \
    KUBELET_REGISTRATION=$RUN/kubelet/plugins_registry start csi-driver "$RUN/cubepod-csi-driver"
  wait_for csi-driver 60 test -S "$SOCKET" || { tail -20 "$LOGS/csi-driver.log" >&2; die "the CSI driver did not start: see $LOGS/csi-driver.log"; }
  objects
  common=(--kubeconfig "$KUBECONFIG_FILE" --leader-election=false --kube-api-qps 200 --kube-api-burst 400)
  start csi-provisioner "$CUBEPOD_BIN/csi-provisioner" --csi-address "$SOCKET" "${common[@]}" \
    --default-fstype ext4 --worker-threads 50 --timeout 60s --retry-interval-max 30s
  start csi-snapshotter "$CUBEPOD_BIN/csi-snapshotter" --csi-address "$SOCKET" "${common[@]}" --timeout 60s
  start csi-resizer "$CUBEPOD_BIN/csi-resizer" --csi-address "$SOCKET" "${common[@]}" --timeout 60s
  start snapshot-controller "$CUBEPOD_BIN/snapshot-controller" "${common[@]}"
  # The kubelet lists the driver on its CSINode once it registered it.
  wait_for "CSI driver registration" 60 sh -c "kubectl get csinode $REAL_NODE_NAME -o jsonpath='{.spec.drivers[*].name}' | grep -qw $DRIVER" \
    || { tail -20 "$LOGS/csi-driver.log" >&2; die "the kubelet did not register $DRIVER: see $LOGS/kubelet.log"; }
  ;;
stop)
  for b in "${SIDECARS[@]}"; do stop "$b" TERM 50; done
  stop csi-driver TERM 50
  pool_down
  ;;
*) die "usage: csi.sh start|stop" ;;
esac
