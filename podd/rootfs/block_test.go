package rootfs

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hostMke2fs is the machine's own mke2fs laid out as the injector image has it: the loader
// finds the libraries the directory does not hold in the system's paths.
func hostMke2fs(t *testing.T) Mke2fs {
	t.Helper()
	bin, err := exec.LookPath("mke2fs")
	if err != nil {
		t.Fatalf("the tests need Debian's e2fsprogs (mke2fs): %v", err)
	}
	dir := t.TempDir()
	must(t, os.Symlink(bin, filepath.Join(dir, "mke2fs")))
	must(t, os.Symlink("/lib64/ld-linux-x86-64.so.2", filepath.Join(dir, "ld-linux-x86-64.so.2")))
	return Mke2fs{Dir: dir}
}

// device makes a file of size bytes, with data written at the offsets given.
func device(t *testing.T, size int64, data map[int64][]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(size))
	for off, b := range data {
		_, err := f.WriteAt(b, off)
		must(t, err)
	}
	return p
}

func TestClassify(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	const size = 8 << 20
	for name, tc := range map[string]struct {
		data map[int64][]byte
		want DeviceContent
	}{
		"zeros":                      {nil, Blank},
		"data at the start":          {map[int64][]byte{0: random}, Foreign},
		"a GPT backup header at end": {map[int64][]byte{size - 512: []byte("EFI PART")}, Foreign},
		"data in the middle only":    {map[int64][]byte{4 << 20: random}, Blank},
		"an ext4 superblock's magic": {map[int64][]byte{ext4MagicOffset: {0x53, 0xEF}}, Ext4},
	} {
		got, err := Classify(device(t, size, tc.data))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if _, err := Classify(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing device: no error")
	}
}

func TestFormatMakesAnExt4(t *testing.T) {
	dev := device(t, 16<<20, nil)
	must(t, hostMke2fs(t).Format(dev, "cubepod-test"))
	if got, err := Classify(dev); err != nil || got != Ext4 {
		t.Fatalf("after Format: %v, %v", got, err)
	}
	bad := Mke2fs{Dir: t.TempDir()}
	if err := bad.Format(dev, "x"); err == nil || !strings.Contains(err.Error(), "mke2fs on "+dev) {
		t.Errorf("without mke2fs: %v", err)
	}
}

// inMountNamespace re-runs the test in a mount namespace of its own, so that its mounts never
// reach the machine's; true in that run.
func inMountNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv("CUBEPOD_TEST_MOUNTNS") == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace and a loop device")
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "CUBEPOD_TEST_MOUNTNS="+t.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("in its mount namespace: %v\n%s", err, out)
	}
	return false
}

// loopDevice attaches file to a free loop device for the test's duration.
func loopDevice(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

func TestPrepareDeviceFormatsOnlyABlankDevice(t *testing.T) {
	if !inMountNamespace(t) {
		return
	}
	mkfs := hostMke2fs(t)
	dev := loopDevice(t, device(t, 16<<20, nil))
	dir := filepath.Join(t.TempDir(), "mnt")
	must(t, PrepareDevice(dev, dir, "cubepod-test", mkfs))
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("a new filesystem is not empty: %v, %v", entries, err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("kept"), 0o644))
	must(t, unix.Unmount(dir, 0))

	// Its second start mounts what the first made, and formats nothing.
	must(t, PrepareDevice(dev, dir, "cubepod-test", mkfs))
	if b, err := os.ReadFile(filepath.Join(dir, "kept.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("after a second start: %q, %v", b, err)
	}
	must(t, unix.Unmount(dir, 0))

	// A device with other data is left as it is.
	foreign := make([]byte, 4096)
	_, _ = rand.Read(foreign)
	file := device(t, 16<<20, map[int64][]byte{0: foreign})
	err := PrepareDevice(loopDevice(t, file), dir, "cubepod-test", mkfs)
	if err == nil || !strings.Contains(err.Error(), "not formatting it") {
		t.Fatalf("a foreign device: %v", err)
	}
	head := make([]byte, len(foreign))
	f, err := os.Open(file)
	must(t, err)
	defer f.Close()
	_, err = f.ReadAt(head, 0)
	must(t, err)
	if !bytes.Equal(head, foreign) {
		t.Fatal("a foreign device's data changed")
	}
}

func TestRootBinds(t *testing.T) {
	points := []string{
		"/", "/proc", "/dev", "/etc/hosts", "/etc/resolv.conf", "/opt/cubepod/bin",
		"/mnt/cubepod/rootfs", "/workspace", "/usr", "/var/run/secrets/x",
	}
	got := RootBinds("/mnt/cubepod/rootfs", []string{"etc", "opt", "usr"}, points)
	want := []Bind{
		{Source: "/etc/hosts", Target: "/mnt/cubepod/rootfs/etc/hosts"},
		{Source: "/etc/resolv.conf", Target: "/mnt/cubepod/rootfs/etc/resolv.conf"},
		{Source: "/opt/cubepod/bin", Target: "/mnt/cubepod/rootfs/opt/cubepod/bin"},
		{Source: "/mnt/cubepod/rootfs/etc", Target: "/etc", Recursive: true},
		{Source: "/mnt/cubepod/rootfs/opt", Target: "/opt", Recursive: true},
		{Source: "/mnt/cubepod/rootfs/usr", Target: "/usr", Recursive: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// A volume mounted inside one of the directories is the copies' source, not a mount to keep.
	inside := RootBinds("/opt/vol", []string{"opt"}, []string{"/opt/vol", "/opt/vol/x", "/opt/cubepod/bin"})
	if len(inside) != 2 || inside[0].Source != "/opt/cubepod/bin" || inside[1].Target != "/opt" {
		t.Errorf("a volume inside a directory: %+v", inside)
	}
}

func TestMountPoints(t *testing.T) {
	mountinfo := strings.Join([]string{
		"22 1 0:21 / / rw,relatime - overlay overlay rw",
		`23 22 0:22 / /etc/my\040hosts rw - tmpfs tmpfs rw`,
		`24 22 0:23 / /back\134slash rw - tmpfs tmpfs rw`,
		"",
	}, "\n")
	got, err := MountPoints(strings.NewReader(mountinfo))
	if err != nil || !reflect.DeepEqual(got, []string{"/", "/etc/my hosts", `/back\slash`}) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := MountPoints(strings.NewReader("1 2 3\n")); err == nil {
		t.Error("a short line: no error")
	}
}

func TestApplyBindsMakesStandInsAndCarriesNestedMounts(t *testing.T) {
	if !inMountNamespace(t) {
		return
	}
	base := t.TempDir()
	p := func(s string) string { return filepath.Join(base, s) }
	for _, d := range []string{"image/etc", "volume/etc", "runtime"} {
		must(t, os.MkdirAll(p(d), 0o755))
	}
	must(t, os.WriteFile(p("image/etc/hosts"), []byte("image's"), 0o644))
	must(t, os.WriteFile(p("runtime/hosts"), []byte("runtime's"), 0o644))
	must(t, os.WriteFile(p("volume/etc/tool.conf"), []byte("on the volume"), 0o644))
	// The runtime's file mounted over the image's, as /etc/hosts is in a container.
	must(t, unix.Mount(p("runtime/hosts"), p("image/etc/hosts"), "", unix.MS_BIND, ""))
	t.Cleanup(func() {
		for _, m := range []string{"image/etc", "image/etc/hosts", "volume/etc/hosts"} {
			_ = unix.Unmount(p(m), unix.MNT_DETACH)
		}
	})

	must(t, ApplyBinds([]Bind{
		{Source: p("image/etc/hosts"), Target: p("volume/etc/hosts")},
		{Source: p("volume/etc"), Target: p("image/etc"), Recursive: true},
	}))
	for file, want := range map[string]string{"image/etc/tool.conf": "on the volume", "image/etc/hosts": "runtime's"} {
		if b, err := os.ReadFile(p(file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
}
