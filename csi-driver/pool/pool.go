// Package pool keeps volumes and snapshots as image files on one filesystem whose files can share
// extents (XFS made with reflink, btrfs). A clone, a snapshot and a restore are each one FICLONE
// of an image: the kernel shares the extents, so their cost does not grow with the data. Each
// image has a JSON record beside it, written after the image, so that a record names only whole
// images; a restart removes what an interrupted call left.
package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotFound is returned for a volume or snapshot ID the pool does not hold.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a name is taken with other parameters, or a snapshot's name by
// another source volume.
var ErrConflict = errors.New("exists with other parameters")

// Volume is one image in the pool.
type Volume struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Capacity int64  `json:"capacity"`
	// SourceVolume or SourceSnapshot names what the volume was cloned from, if anything.
	SourceVolume   string `json:"sourceVolume,omitempty"`
	SourceSnapshot string `json:"sourceSnapshot,omitempty"`
}

// Snapshot is one image in the pool's snapshots, a clone of a volume's at the time it was taken.
type Snapshot struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	SourceVolume string    `json:"sourceVolume"`
	Size         int64     `json:"size"`
	Created      time.Time `json:"created"`
}

// Pool is a directory on a filesystem that shares extents.
type Pool struct {
	root string
	mu   sync.Mutex
}

const (
	volumesDir   = "volumes"
	snapshotsDir = "snapshots"
	partial      = ".partial"
)

// Open takes the directory as the pool: it must be on a filesystem that clones files (FICLONE),
// since that is what keeps clones and snapshots free of copies; a pool that would copy is refused.
// Files left by a call that did not finish are removed.
func Open(root string) (*Pool, error) {
	p := &Pool{root: root}
	for _, d := range []string{volumesDir, snapshotsDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return nil, err
		}
		leftovers, _ := filepath.Glob(filepath.Join(root, d, "*"+partial))
		for _, f := range leftovers {
			_ = os.Remove(f)
		}
	}
	if err := p.checkClones(); err != nil {
		return nil, err
	}
	return p, nil
}

// Root is the pool's directory.
func (p *Pool) Root() string { return p.root }

func (p *Pool) checkClones() error {
	a := filepath.Join(p.root, "clone-check"+partial)
	b := filepath.Join(p.root, "clone-check-copy"+partial)
	defer os.Remove(a)
	defer os.Remove(b)
	if err := os.WriteFile(a, []byte("clone check\n"), 0o600); err != nil {
		return err
	}
	if err := cloneFile(a, b); err != nil {
		return fmt.Errorf("pool %s cannot clone files, so clones and snapshots would copy "+
			"(a filesystem made with mkfs.xfs -m reflink=1, or btrfs, can): %w", p.root, err)
	}
	return nil
}

// cloneFile makes dst a clone of src sharing its extents, or fails; it never copies.
func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err != nil {
		out.Close()
		os.Remove(dst)
		return fmt.Errorf("FICLONE %s: %w", src, err)
	}
	return out.Close()
}

var plainID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,99}$`)

// idOf is the ID that a name gets: the name itself when it is a plain file name (a PV's name
// is), else a digest of it, so that the same name always finds the same image.
func idOf(prefix, name string) string {
	if plainID.MatchString(name) && !strings.HasSuffix(name, partial) && !strings.HasSuffix(name, ".json") {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:12])
}

func (p *Pool) volumePath(id string) string   { return filepath.Join(p.root, volumesDir, id) }
func (p *Pool) snapshotPath(id string) string { return filepath.Join(p.root, snapshotsDir, id) }

// ImagePath is where a volume's image is; the volume may not exist.
func (p *Pool) ImagePath(id string) string { return p.volumePath(id) + ".img" }

func (p *Pool) snapshotImage(id string) string { return p.snapshotPath(id) + ".img" }

func readRecord(path string, into any) error {
	b, err := os.ReadFile(path + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// writeRecord writes the record beside its image, whole or not at all.
func writeRecord(path string, record any) error {
	b, err := json.Marshal(record)
	if err != nil {
		return err
	}
	tmp := path + ".json" + partial
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path+".json")
}

// Volume returns the volume with this ID.
func (p *Pool) Volume(id string) (Volume, error) {
	var v Volume
	if !plainID.MatchString(id) {
		return v, ErrNotFound
	}
	err := readRecord(p.volumePath(id), &v)
	return v, err
}

// Snapshot returns the snapshot with this ID.
func (p *Pool) Snapshot(id string) (Snapshot, error) {
	var s Snapshot
	if !plainID.MatchString(id) {
		return s, ErrNotFound
	}
	err := readRecord(p.snapshotPath(id), &s)
	return s, err
}

// CreateVolume makes an empty (sparse) image of the capacity, or clones the source volume's or
// snapshot's image (at most one names a source) and grows it to the capacity if larger. Asked
// again with the same name and parameters, it returns the same volume.
func (p *Pool) CreateVolume(name string, capacity int64, sourceVolume, sourceSnapshot string) (Volume, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := Volume{ID: idOf("v-", name), Name: name, Capacity: capacity,
		SourceVolume: sourceVolume, SourceSnapshot: sourceSnapshot}
	if have, err := p.Volume(want.ID); err == nil {
		if have.Name != name || have.SourceVolume != sourceVolume || have.SourceSnapshot != sourceSnapshot ||
			have.Capacity < capacity {
			return have, fmt.Errorf("volume %q: %w", name, ErrConflict)
		}
		return have, nil
	} else if !errors.Is(err, ErrNotFound) {
		return want, err
	}
	var source string
	switch {
	case sourceVolume != "":
		if _, err := p.Volume(sourceVolume); err != nil {
			return want, fmt.Errorf("source volume %q: %w", sourceVolume, err)
		}
		source = p.ImagePath(sourceVolume)
	case sourceSnapshot != "":
		if _, err := p.Snapshot(sourceSnapshot); err != nil {
			return want, fmt.Errorf("source snapshot %q: %w", sourceSnapshot, err)
		}
		source = p.snapshotImage(sourceSnapshot)
	}
	err := place(p.volumePath(want.ID), source, capacity, func(size int64) any {
		want.Capacity = size
		return want
	})
	return want, err
}

// place makes path's image, a clone of source's (or empty without one) grown to at least
// capacity, then its record, which record makes from the image's size.
func place(path, source string, capacity int64, record func(size int64) any) error {
	tmp := path + ".img" + partial
	os.Remove(tmp)
	if source != "" {
		if err := cloneFile(source, tmp); err != nil {
			return err
		}
	} else if f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
		return err
	} else if err := f.Close(); err != nil {
		return err
	}
	size, err := fileSize(tmp)
	if err != nil {
		return err
	}
	if size < capacity {
		if err := os.Truncate(tmp, capacity); err != nil {
			os.Remove(tmp)
			return err
		}
		size = capacity
	}
	if err := os.Rename(tmp, path+".img"); err != nil {
		return err
	}
	if err := writeRecord(path, record(size)); err != nil {
		os.Remove(path + ".img")
		return err
	}
	return nil
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// DeleteVolume removes the volume; a volume that is not there is gone already.
func (p *Pool) DeleteVolume(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !plainID.MatchString(id) {
		return nil
	}
	return remove(p.volumePath(id))
}

// remove deletes a record and its image, the record first: an image without one is a leftover,
// never a volume or snapshot. What is not there is gone already.
func remove(path string) error {
	for _, f := range []string{path + ".json", path + ".img"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ExpandVolume grows the volume's image to at least the capacity; it never shrinks one.
func (p *Pool) ExpandVolume(id string, capacity int64) (Volume, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.Volume(id)
	if err != nil {
		return v, err
	}
	if capacity <= v.Capacity {
		return v, nil
	}
	if err := os.Truncate(p.ImagePath(id), capacity); err != nil {
		return v, err
	}
	v.Capacity = capacity
	return v, writeRecord(p.volumePath(id), v)
}

// Volumes lists every volume, by ID.
func (p *Pool) Volumes() ([]Volume, error) {
	var out []Volume
	err := p.list(volumesDir, func(path string) error {
		var v Volume
		if err := readRecord(path, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// Snapshots lists every snapshot, by ID.
func (p *Pool) Snapshots() ([]Snapshot, error) {
	var out []Snapshot
	err := p.list(snapshotsDir, func(path string) error {
		var s Snapshot
		if err := readRecord(path, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func (p *Pool) list(dir string, read func(path string) error) error {
	records, err := filepath.Glob(filepath.Join(p.root, dir, "*.json"))
	if err != nil {
		return err
	}
	sort.Strings(records)
	for _, r := range records {
		if err := read(strings.TrimSuffix(r, ".json")); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// CreateSnapshot clones the volume's image into a snapshot. Asked again with the same name and
// source, it returns the same snapshot.
func (p *Pool) CreateSnapshot(name, sourceVolume string) (Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := Snapshot{ID: idOf("s-", name), Name: name, SourceVolume: sourceVolume}
	if have, err := p.Snapshot(want.ID); err == nil {
		if have.Name != name || have.SourceVolume != sourceVolume {
			return have, fmt.Errorf("snapshot %q: %w", name, ErrConflict)
		}
		return have, nil
	} else if !errors.Is(err, ErrNotFound) {
		return want, err
	}
	if _, err := p.Volume(sourceVolume); err != nil {
		return want, fmt.Errorf("source volume %q: %w", sourceVolume, err)
	}
	err := place(p.snapshotPath(want.ID), p.ImagePath(sourceVolume), 0, func(size int64) any {
		want.Size, want.Created = size, time.Now().UTC().Truncate(time.Second)
		return want
	})
	return want, err
}

// DeleteSnapshot removes the snapshot; one that is not there is gone already. Volumes restored
// from it keep their data: they share extents, not files.
func (p *Pool) DeleteSnapshot(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !plainID.MatchString(id) {
		return nil
	}
	return remove(p.snapshotPath(id))
}

// Free is the bytes the pool's filesystem has left.
func (p *Pool) Free() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p.root, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
