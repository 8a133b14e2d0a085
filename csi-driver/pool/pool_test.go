package pool_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cubepod.local/csi-driver/internal/xfstest"
	"cubepod.local/csi-driver/pool"
)

func TestOpenRefusesAFilesystemThatWouldCopy(t *testing.T) {
	dir, err := os.MkdirTemp("/dev/shm", "pool-") // tmpfs: no FICLONE
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	defer os.RemoveAll(dir)
	_, err = pool.Open(dir)
	if err == nil || !strings.Contains(err.Error(), "cannot clone files") {
		t.Fatalf("Open on tmpfs: %v, want a refusal", err)
	}
}

func open(t *testing.T) *pool.Pool {
	t.Helper()
	p, err := pool.Open(filepath.Join(xfstest.Mount(t, t.TempDir()), "pool"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func free(t *testing.T, p *pool.Pool) int64 {
	t.Helper()
	f, err := p.Free()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Clones, snapshots and restores share the source's extents: the filesystem's free space does
// not fall by the data they hold, and each reads the source's bytes.
func TestClonesAndSnapshotsCopyNoData(t *testing.T) {
	p := open(t)
	src, err := p.CreateVolume("src", 256<<20, "", "")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 128<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.ImagePath(src.ID), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p.ImagePath(src.ID), src.Capacity); err != nil {
		t.Fatal(err)
	}
	before := free(t, p)
	clone, err := p.CreateVolume("clone", 256<<20, src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.CreateSnapshot("snap", src.ID)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := p.CreateVolume("restored", 512<<20, "", snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if used := before - free(t, p); used > 8<<20 {
		t.Fatalf("a clone, a snapshot and a restore of 128 MiB used %d bytes", used)
	}
	if restored.Capacity != 512<<20 || snap.Size != 256<<20 {
		t.Fatalf("restored %d bytes, snapshot %d", restored.Capacity, snap.Size)
	}
	for _, v := range []pool.Volume{clone, restored} {
		got, err := os.ReadFile(p.ImagePath(v.ID))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(data)], data) {
			t.Fatalf("%s does not hold the source's data", v.Name)
		}
	}
	// The source is removed; what was cloned from it keeps its data.
	if err := p.DeleteVolume(src.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSnapshot(snap.ID); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p.ImagePath(clone.ID))
	if err != nil || !bytes.Equal(got[:len(data)], data) {
		t.Fatalf("the clone lost its data with its source: %v", err)
	}
}

func TestCreateIsIdempotentAndRefusesOtherParameters(t *testing.T) {
	p := open(t)
	a, err := p.CreateVolume("pvc-1", 64<<20, "", "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.CreateVolume("pvc-1", 64<<20, "", "")
	if err != nil || again != a {
		t.Fatalf("again: %+v %v, want %+v", again, err, a)
	}
	if _, err := p.CreateVolume("pvc-1", 128<<20, "", ""); !errors.Is(err, pool.ErrConflict) {
		t.Fatalf("a larger volume under the same name: %v, want a conflict", err)
	}
	if _, err := p.CreateVolume("pvc-1", 64<<20, "other", ""); !errors.Is(err, pool.ErrConflict) {
		t.Fatalf("another source under the same name: %v, want a conflict", err)
	}
	if _, err := p.CreateVolume("pvc-2", 64<<20, "missing", ""); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("a missing source: %v, want not found", err)
	}
	b, _ := p.CreateVolume("pvc-3", 64<<20, "", "")
	if _, err := p.CreateSnapshot("snap", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateSnapshot("snap", b.ID); !errors.Is(err, pool.ErrConflict) {
		t.Fatalf("a snapshot name taken by another volume: %v, want a conflict", err)
	}
	// A name that is no plain file name gets a digest for its ID, the same each time.
	odd, err := p.CreateVolume("a/b c", 64<<20, "", "")
	if err != nil || strings.ContainsAny(odd.ID, "/ ") {
		t.Fatalf("odd name: %+v %v", odd, err)
	}
	if again, _ := p.CreateVolume("a/b c", 64<<20, "", ""); again.ID != odd.ID {
		t.Fatalf("odd name again: %s, want %s", again.ID, odd.ID)
	}
}

func TestExpandGrowsAndNeverShrinks(t *testing.T) {
	p := open(t)
	v, _ := p.CreateVolume("v", 64<<20, "", "")
	if v, err := p.ExpandVolume(v.ID, 128<<20); err != nil || v.Capacity != 128<<20 {
		t.Fatalf("expand: %+v %v", v, err)
	}
	if v, err := p.ExpandVolume(v.ID, 32<<20); err != nil || v.Capacity != 128<<20 {
		t.Fatalf("shrink: %+v %v", v, err)
	}
	st, _ := os.Stat(p.ImagePath(v.ID))
	if st.Size() != 128<<20 {
		t.Fatalf("image is %d bytes", st.Size())
	}
	if _, err := p.ExpandVolume("missing", 1); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// What a call stopped midway left (a partial image, an image without its record) is never
// taken for a volume, and a reopened pool removes the partial files.
func TestLeftoversAreNoVolumes(t *testing.T) {
	p := open(t)
	leftover := p.ImagePath("half") + ".partial"
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.ImagePath("orphan"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Volume("orphan"); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("an image without a record: %v, want not found", err)
	}
	if _, err := pool.Open(p.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial image after reopening: %v", err)
	}
	vs, err := p.Volumes()
	if err != nil || len(vs) != 0 {
		t.Fatalf("volumes: %+v %v", vs, err)
	}
}
