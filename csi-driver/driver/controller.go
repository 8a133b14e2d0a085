package driver

import (
	"context"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"cubepod.local/csi-driver/loop"
	"cubepod.local/csi-driver/pool"
)

// defaultCapacity is a volume's size when the caller names none.
const defaultCapacity = 1 << 30

// ControllerGetCapabilities lists what the controller does.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// capacityOf is the size a capacity range asks for: at least what is required, at most the
// limit, the default when neither is given.
func capacityOf(r *csi.CapacityRange, atLeast int64) (int64, error) {
	required, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 {
		return 0, invalid("capacity range %d..%d: negative", required, limit)
	}
	if limit != 0 && required > limit {
		return 0, invalid("capacity range: required %d exceeds the limit %d", required, limit)
	}
	size := required
	if size == 0 {
		size = defaultCapacity
		if limit != 0 && limit < size {
			size = limit
		}
	}
	if size < atLeast {
		size = atLeast
	}
	if limit != 0 && size > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity limit %d is below the source's size %d", limit, atLeast)
	}
	return size, nil
}

// CreateVolume makes an empty volume, or a clone of a volume or snapshot without copying data.
func (d *Driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := required(req.GetName(), "a volume name"); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	for k := range req.GetParameters() {
		// The provisioner's own keys never reach here; anything else is a class we do not serve.
		return nil, invalid("StorageClass parameter %q is not supported (none are)", k)
	}
	var sourceVolume, sourceSnapshot string
	var sourceSize int64
	switch {
	case req.GetVolumeContentSource().GetVolume() != nil:
		sourceVolume = req.GetVolumeContentSource().GetVolume().GetVolumeId()
		v, err := d.pool.Volume(sourceVolume)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source volume %q: %v", sourceVolume, err)
		}
		sourceSize = v.Capacity
	case req.GetVolumeContentSource().GetSnapshot() != nil:
		sourceSnapshot = req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
		s, err := d.pool.Snapshot(sourceSnapshot)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source snapshot %q: %v", sourceSnapshot, err)
		}
		sourceSize = s.Size
	}
	size, err := capacityOf(req.GetCapacityRange(), sourceSize)
	if err != nil {
		return nil, err
	}
	if sourceVolume != "" {
		thaw, err := d.quiesce(sourceVolume)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "quiescing source volume %q: %v", sourceVolume, err)
		}
		defer thaw()
	}
	v, err := d.pool.CreateVolume(req.GetName(), size, sourceVolume, sourceSnapshot)
	if err != nil {
		return nil, codeOf(err)
	}
	return &csi.CreateVolumeResponse{Volume: volumeOf(v)}, nil
}

func volumeOf(v pool.Volume) *csi.Volume {
	out := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.Capacity}
	switch {
	case v.SourceVolume != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolume},
		}}
	case v.SourceSnapshot != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshot},
		}}
	}
	return out
}

// DeleteVolume removes a volume the node no longer uses; one already gone is fine.
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := required(req.GetVolumeId(), "a volume ID"); err != nil {
		return nil, err
	}
	unlock := d.locks.lock(req.GetVolumeId())
	defer unlock()
	if dev, err := d.deviceOf(req.GetVolumeId()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if dev != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is still staged on the node (%s)", req.GetVolumeId(), dev)
	}
	return &csi.DeleteVolumeResponse{}, codeOf(d.pool.DeleteVolume(req.GetVolumeId()))
}

// ValidateVolumeCapabilities confirms the capabilities the driver serves for a volume it holds.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := required(req.GetVolumeId(), "a volume ID"); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalid("volume capabilities are required")
	}
	if _, err := d.pool.Volume(req.GetVolumeId()); err != nil {
		return nil, codeOf(err)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// GetCapacity is what the pool's filesystem has left.
func (d *Driver) GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	free, err := d.pool.Free()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.GetCapacityResponse{AvailableCapacity: free}, nil
}

// ControllerExpandVolume grows the volume's image; the node grows its filesystem.
func (d *Driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := required(req.GetVolumeId(), "a volume ID"); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, invalid("a capacity range is required")
	}
	size, err := capacityOf(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(req.GetVolumeId())
	defer unlock()
	v, err := d.pool.ExpandVolume(req.GetVolumeId(), size)
	if err != nil {
		return nil, codeOf(err)
	}
	if dev, err := d.deviceOf(v.ID); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if dev != "" {
		if err := loop.Refresh(dev); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.ControllerExpandVolumeResponse{
		CapacityBytes:         v.Capacity,
		NodeExpansionRequired: req.GetVolumeCapability().GetBlock() == nil,
	}, nil
}

// CreateSnapshot clones the volume's image, its filesystem frozen meanwhile if it is mounted.
func (d *Driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := required(req.GetName(), "a snapshot name", req.GetSourceVolumeId(), "a source volume ID"); err != nil {
		return nil, err
	}
	for k := range req.GetParameters() {
		return nil, invalid("VolumeSnapshotClass parameter %q is not supported (none are)", k)
	}
	if _, err := d.pool.Volume(req.GetSourceVolumeId()); err != nil {
		return nil, codeOf(err)
	}
	thaw, err := d.quiesce(req.GetSourceVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "quiescing volume %q: %v", req.GetSourceVolumeId(), err)
	}
	defer thaw()
	s, err := d.pool.CreateSnapshot(req.GetName(), req.GetSourceVolumeId())
	if err != nil {
		return nil, codeOf(err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: snapshotOf(s)}, nil
}

func snapshotOf(s pool.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceVolume,
		SizeBytes:      s.Size,
		CreationTime:   timestamppb.New(s.Created),
		ReadyToUse:     true,
	}
}

// DeleteSnapshot removes a snapshot; one already gone is fine.
func (d *Driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := required(req.GetSnapshotId(), "a snapshot ID"); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, codeOf(d.pool.DeleteSnapshot(req.GetSnapshotId()))
}

// ListSnapshots lists snapshots by ID, filtered by ID or source volume, a page at a time: a
// token is the index of the page's first entry.
func (d *Driver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	all, err := d.pool.Snapshots()
	if err != nil {
		return nil, codeOf(err)
	}
	var entries []*csi.ListSnapshotsResponse_Entry
	for _, s := range all {
		if req.GetSnapshotId() != "" && s.ID != req.GetSnapshotId() {
			continue
		}
		if req.GetSourceVolumeId() != "" && s.SourceVolume != req.GetSourceVolumeId() {
			continue
		}
		entries = append(entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snapshotOf(s)})
	}
	start := 0
	if t := req.GetStartingToken(); t != "" {
		start, err = strconv.Atoi(t)
		if err != nil || start < 0 || start > len(entries) {
			return nil, status.Errorf(codes.Aborted, "starting token %q is not one this driver gave", t)
		}
	}
	end := len(entries)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	out := &csi.ListSnapshotsResponse{Entries: entries[start:end]}
	if end < len(entries) {
		out.NextToken = strconv.Itoa(end)
	}
	return out, nil
}
