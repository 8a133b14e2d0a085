package driver_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"cubepod.local/csi-driver/driver"
	"cubepod.local/csi-driver/internal/xfstest"
)

var mountCapability = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// A clone of a mounted volume is taken with its filesystem frozen: the clone's filesystem is
// clean, and holds what was written before the clone and is not yet on disk.
func TestCloneOfAMountedVolumeIsConsistent(t *testing.T) {
	dir := t.TempDir()
	d, err := driver.New(driver.Config{Name: "local.csi.cubeplex.ai", NodeID: "n", Pool: filepath.Join(xfstest.Mount(t, dir), "pool")},
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(name string, source *csi.VolumeContentSource) string {
		r, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeContentSource: source,
			CapacityRange:      &csi.CapacityRange{RequiredBytes: 64 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{mountCapability}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Volume.VolumeId
	}
	stage := func(id, path string) {
		if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: path,
			VolumeCapability: mountCapability}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: path})
		})
	}
	parent := create("parent", nil)
	parentPath := filepath.Join(dir, "parent")
	stage(parent, parentPath)
	if entries, _ := os.ReadDir(parentPath); len(entries) != 0 {
		t.Fatalf("a new volume holds %v, want nothing", entries)
	}
	// Written, never synced: it is in the page cache, not yet in the image.
	if err := os.WriteFile(filepath.Join(parentPath, "kept"), []byte("written before the clone"), 0o600); err != nil {
		t.Fatal(err)
	}
	child := create("child", &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: parent}}})
	image := filepath.Join(dir, "xfs", "pool", "volumes", child+".img")
	if out, err := exec.Command("e2fsck", "-fn", image).CombinedOutput(); err != nil {
		t.Fatalf("the clone's filesystem is not clean: %v: %s", err, out)
	}
	// The parent was thawed: it takes writes again.
	if err := os.WriteFile(filepath.Join(parentPath, "after"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	childPath := filepath.Join(dir, "child")
	stage(child, childPath)
	got, err := os.ReadFile(filepath.Join(childPath, "kept"))
	if err != nil || string(got) != "written before the clone" {
		t.Fatalf("the clone's file: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(childPath, "after")); err == nil {
		t.Fatal("the clone holds a file written after it")
	}
}
