package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"

	"cubepod.local/csi-driver/loop"
	"cubepod.local/csi-driver/pool"
)

// NodeGetCapabilities lists what the node does.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, c := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo names the node. Volumes carry no topology: the driver serves one node's pool, as
// the local cluster has one node that runs Pods.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.config.NodeID}, nil
}

// deviceOf is the loop device holding the volume's image, or "" when it is not staged.
func (d *Driver) deviceOf(volumeID string) (string, error) {
	return loop.Of(d.pool.ImagePath(volumeID))
}

// stagedDevice is a staged volume and its loop device, or the CSI error for a volume the pool
// does not hold (NotFound) or the node has not staged (FailedPrecondition).
func (d *Driver) stagedDevice(id string) (pool.Volume, string, error) {
	v, err := d.pool.Volume(id)
	if err != nil {
		return v, "", codeOf(err)
	}
	dev, err := d.deviceOf(id)
	if err != nil {
		return v, "", status.Error(codes.Internal, err.Error())
	}
	if dev == "" {
		return v, "", status.Errorf(codes.FailedPrecondition, "volume %q is not staged", id)
	}
	return v, dev, nil
}

// NodeStageVolume attaches the volume's image to a loop device and, for a Filesystem volume,
// mounts its filesystem at the staging path: made on first use, grown if the image grew.
func (d *Driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := required(id, "a volume ID", staging, "a staging target path"); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	if _, err := d.pool.Volume(id); err != nil {
		return nil, codeOf(err)
	}
	dev, err := loop.Attach(d.pool.ImagePath(id))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted, err := d.mountedFrom(staging, dev); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if mounted {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	fsType := fsTypeOf(req.GetVolumeCapability())
	existing, err := d.mounter.GetDiskFormat(dev)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if existing != "" && existing != fsType {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q holds %s, not the %s asked for", id, existing, fsType)
	}
	// A device larger than its filesystem (a clone or restore that asked for more than its source,
	// an expansion not applied while mounted) has it grown to fit: ext4 before the mount (grow.go).
	if existing == "ext4" {
		if err := growExt4(dev); err != nil {
			return nil, status.Errorf(codes.Internal, "growing volume %q: %v", id, err)
		}
	}
	flags := req.GetVolumeCapability().GetMount().GetMountFlags()
	if err := d.mounter.FormatAndMount(dev, staging, fsType, flags); err != nil {
		return nil, status.Errorf(codes.Internal, "mounting volume %q: %v", id, err)
	}
	switch existing {
	case "":
		// A new filesystem's lost+found is nothing of the user's: a workspace starts empty.
		_ = os.Remove(filepath.Join(staging, "lost+found"))
	case "xfs":
		if _, err := mount.NewResizeFs(d.mounter.Exec).Resize(dev, staging); err != nil {
			return nil, status.Errorf(codes.Internal, "growing volume %q: %v", id, err)
		}
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// mountedFrom says whether the path is a mount point of the device.
func (d *Driver) mountedFrom(path, dev string) (bool, error) {
	refs, err := d.mounter.List()
	if err != nil {
		return false, err
	}
	for _, m := range refs {
		if m.Path == path {
			if m.Device != dev {
				return false, status.Errorf(codes.FailedPrecondition, "%s is a mount of %s, not of %s", path, m.Device, dev)
			}
			return true, nil
		}
	}
	return false, nil
}

// NodeUnstageVolume unmounts the staging path and releases the loop device.
func (d *Driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := required(id, "a volume ID", staging, "a staging target path"); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	if err := d.unmountStaging(staging); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := loop.Detach(d.pool.ImagePath(id)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged filesystem, or the loop device itself for a Block
// volume, at the target path.
func (d *Driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	if err := required(id, "a volume ID", target, "a target path"); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.FailedPrecondition, "a staging target path is required: the volume is staged first")
	}
	unlock := d.locks.lock(id)
	defer unlock()
	_, dev, err := d.stagedDevice(id)
	if err != nil {
		return nil, err
	}
	options := []string{"bind"}
	if req.GetReadonly() {
		options = append(options, "ro")
	}
	source := staging
	if req.GetVolumeCapability().GetBlock() != nil {
		source = dev
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f, err := os.OpenFile(target, os.O_CREATE, 0o660)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f.Close()
	} else {
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		options = append(options, req.GetVolumeCapability().GetMount().GetMountFlags()...)
	}
	notMounted, err := d.mounter.IsLikelyNotMountPoint(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !notMounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := d.mounter.Mount(source, target, "", options); err != nil {
		return nil, status.Errorf(codes.Internal, "publishing volume %q: %v", id, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path and removes it.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := required(req.GetVolumeId(), "a volume ID", req.GetTargetPath(), "a target path"); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(req.GetVolumeId())
	defer unlock()
	if err := mount.CleanupMountPoint(req.GetTargetPath(), d.mounter, true); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports a published or staged volume's bytes and inodes, or a Block
// volume's size.
func (d *Driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := required(req.GetVolumeId(), "a volume ID", req.GetVolumePath(), "a volume path"); err != nil {
		return nil, err
	}
	if _, err := d.pool.Volume(req.GetVolumeId()); err != nil {
		return nil, codeOf(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(req.GetVolumePath(), &st); errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", req.GetVolumePath())
	} else if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		size, err := deviceSize(req.GetVolumePath())
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}}, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(req.GetVolumePath(), &fs); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	bsize := fs.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bsize, Available: int64(fs.Bavail) * bsize,
			Used: int64(fs.Blocks-fs.Bfree) * bsize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree),
			Used: int64(fs.Files - fs.Ffree)},
	}}, nil
}

func deviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// A block device's end is its size.
	return f.Seek(0, io.SeekEnd)
}

// NodeExpandVolume makes the loop device take the grown image and grows the filesystem on it.
func (d *Driver) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := required(id, "a volume ID", path, "a volume path"); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	v, dev, err := d.stagedDevice(id)
	if err != nil {
		return nil, err
	}
	if err := loop.Refresh(dev); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if req.GetVolumeCapability().GetBlock() == nil {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); errors.Is(err, unix.ENOENT) {
			return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", path)
		} else if err == nil && st.Mode&unix.S_IFMT != unix.S_IFBLK {
			if _, err := mount.NewResizeFs(d.mounter.Exec).Resize(dev, path); err != nil {
				if strings.Contains(err.Error(), "Permission denied to resize") {
					// The kernel's online ext4 resize wants CAP_SYS_RESOURCE: a node without it
					// grows the volume at its next staging (grow.go).
					return nil, status.Errorf(codes.FailedPrecondition, "volume %q: this node cannot grow a "+
						"mounted ext4 filesystem (no CAP_SYS_RESOURCE); it grows when next staged", id)
				}
				return nil, status.Errorf(codes.Internal, "growing the filesystem of volume %q: %v", id, err)
			}
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
}

// quiesce makes the volume's image whole for a clone: a mounted filesystem is frozen (and thawed
// by the returned function), a raw device has its cache written out. A volume not staged is whole.
func (d *Driver) quiesce(volumeID string) (func(), error) {
	dev, err := d.deviceOf(volumeID)
	if err != nil || dev == "" {
		return func() {}, err
	}
	mounts, err := d.mounter.List()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if m.Device != dev {
			continue
		}
		// Freezing one mount point freezes the filesystem: every bind of it waits meanwhile.
		if err := fsfreeze("--freeze", m.Path); err != nil {
			return nil, err
		}
		return func() {
			if err := fsfreeze("--unfreeze", m.Path); err != nil {
				d.log.Error("thawing a frozen volume", "volume", volumeID, "path", m.Path, "error", err)
			}
		}, nil
	}
	return func() {}, loop.Flush(dev)
}

// thawAll thaws the filesystems of the pool's staged volumes: a driver stopped between a freeze
// and its thaw would leave their writers waiting for good.
func (d *Driver) thawAll() {
	mounts, err := d.mounter.List()
	if err != nil {
		d.log.Warn("listing mounts to thaw", "error", err)
		return
	}
	images, _ := filepath.Glob(d.pool.ImagePath("*"))
	devices := map[string]bool{}
	for _, img := range images {
		if dev, _ := loop.Of(img); dev != "" {
			devices[dev] = true
		}
	}
	for _, m := range mounts {
		if devices[m.Device] {
			// Thawing a filesystem that is not frozen fails harmlessly (EINVAL).
			_ = fsfreeze("--unfreeze", m.Path)
			delete(devices, m.Device)
		}
	}
}

func fsfreeze(flag, path string) error {
	out, err := exec.Command("fsfreeze", flag, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fsfreeze %s %s: %v: %s", flag, path, err, strings.TrimSpace(string(out)))
	}
	return nil
}
