// Package xfstest makes the filesystem a pool needs for tests: XFS with reflink on a loop device.
package xfstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Mount makes a sparse file under dir into an XFS filesystem with reflink, mounts it, and returns
// its mount point; the test's cleanup detaches the loop devices left on its files and unmounts
// it. It skips the test without root (loop devices, mounts).
func Mount(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices and mounts")
	}
	image, mnt := filepath.Join(dir, "pool.xfs"), filepath.Join(dir, "xfs")
	Run(t, "truncate", "-s", "2G", image)
	Run(t, "mkfs.xfs", "-q", "-m", "reflink=1", image)
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	Run(t, "mount", "-o", "loop", image, mnt)
	t.Cleanup(func() {
		images, _ := filepath.Glob(filepath.Join(mnt, "*", "*", "*.img"))
		for _, img := range images {
			_ = exec.Command("sh", "-c", "losetup -j '"+img+"' | cut -d: -f1 | xargs -r -n1 losetup -d").Run()
		}
		Run(t, "umount", mnt)
	})
	return mnt
}

// Run runs a command, failing the test with its output if it fails.
func Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}
