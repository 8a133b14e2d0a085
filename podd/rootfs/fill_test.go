package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// image lays out a small root as an image would have it.
func image(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	write := func(path, text string, mode os.FileMode) {
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		// unix's mode, not os.FileMode's: 0o4000 is set-user-ID only there.
		if err := unix.Chmod(p, uint32(mode)); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/bin/tool", "#!/bin/sh\n", 0o755)
	write("usr/bin/su", "setuid", 0o4755)
	write("etc/shadow", "root:*:1::::::\n", 0o640)
	write("home/user/.profile", "export A=1\n", 0o644)
	must(t, os.MkdirAll(filepath.Join(src, "usr/lib"), 0o755))
	must(t, os.Symlink("../bin/tool", filepath.Join(src, "usr/lib/tool-link")))
	must(t, os.Link(filepath.Join(src, "usr/bin/tool"), filepath.Join(src, "usr/bin/tool-hard")))
	must(t, unix.Mkfifo(filepath.Join(src, "etc/fifo"), 0o600))
	must(t, os.Chown(filepath.Join(src, "home/user"), 1000, 1000))
	must(t, os.Chown(filepath.Join(src, "home/user/.profile"), 1000, 1000))
	must(t, os.Chown(filepath.Join(src, "etc/shadow"), 0, 42))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(src, "etc/shadow"), old, old))
	must(t, os.Chtimes(filepath.Join(src, "usr/bin"), old, old))
	must(t, os.Symlink("usr/bin", filepath.Join(src, "bin")))
	return src
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func stat(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return &st
}

func TestFillCopiesTheImageWithItsMetadata(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("keeping owners needs root, as the fill's init container runs")
	}
	src, dst := image(t), t.TempDir()
	xattr := unix.Lsetxattr(filepath.Join(src, "usr/bin/tool"), "user.cubepod", []byte("kept"), 0)
	copied, err := Fill(src, dst, []string{"usr", "etc", "home", "opt"}, "example/image:1")
	if err != nil || !copied {
		t.Fatalf("fill: %v %v", copied, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "usr/bin/tool")); string(b) != "#!/bin/sh\n" {
		t.Fatalf("tool: %q", b)
	}
	if st := stat(t, filepath.Join(dst, "usr/bin/su")); st.Mode&0o7777 != 0o4755 {
		t.Errorf("su mode %o", st.Mode&0o7777)
	}
	if st := stat(t, filepath.Join(dst, "etc/shadow")); st.Gid != 42 || st.Mode&0o777 != 0o640 || st.Mtim.Sec != time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("shadow: gid %d mode %o mtime %d", st.Gid, st.Mode&0o777, st.Mtim.Sec)
	}
	if st := stat(t, filepath.Join(dst, "usr/bin")); st.Mtim.Sec != time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("a directory's time is its own, not its copy's: %d", st.Mtim.Sec)
	}
	if st := stat(t, filepath.Join(dst, "home/user/.profile")); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("profile owner %d:%d", st.Uid, st.Gid)
	}
	if target, err := os.Readlink(filepath.Join(dst, "usr/lib/tool-link")); err != nil || target != "../bin/tool" {
		t.Errorf("symlink: %q %v", target, err)
	}
	if a, b := stat(t, filepath.Join(dst, "usr/bin/tool")), stat(t, filepath.Join(dst, "usr/bin/tool-hard")); a.Ino != b.Ino {
		t.Errorf("hard link copied twice")
	}
	if st := stat(t, filepath.Join(dst, "etc/fifo")); st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("fifo: %o", st.Mode)
	}
	if info, err := os.Stat(filepath.Join(dst, "opt")); err != nil || !info.IsDir() {
		t.Errorf("a directory the image lacks is made empty: %v", err)
	}
	if xattr == nil {
		value := make([]byte, 16)
		n, err := unix.Lgetxattr(filepath.Join(dst, "usr/bin/tool"), "user.cubepod", value)
		if err != nil || string(value[:n]) != "kept" {
			t.Errorf("extended attribute: %q %v", value[:n], err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dst, Marker)); string(b) != "example/image:1\n" {
		t.Errorf("marker: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dst, staging)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging left behind: %v", err)
	}
}

func TestFillKeepsAFilledVolume(t *testing.T) {
	src, dst := image(t), t.TempDir()
	if _, err := Fill(src, dst, []string{"etc"}, "i"); err != nil {
		t.Fatal(err)
	}
	// What the sandbox wrote since, and what it removed, stay so.
	must(t, os.WriteFile(filepath.Join(dst, "etc/tool.conf"), []byte("mine"), 0o644))
	must(t, os.Remove(filepath.Join(dst, "etc/shadow")))
	copied, err := Fill(src, dst, []string{"etc"}, "i")
	if err != nil || copied {
		t.Fatalf("second fill: %v %v", copied, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etc/tool.conf")); string(b) != "mine" {
		t.Errorf("tool.conf: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dst, "etc/shadow")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removed file came back: %v", err)
	}
}

func TestAFillCutOffStartsAgain(t *testing.T) {
	src, dst := image(t), t.TempDir()
	// A fill that died after moving one directory and before the marker.
	must(t, os.MkdirAll(filepath.Join(dst, staging, "usr/half"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dst, "etc/stale"), 0o755))
	copied, err := Fill(src, dst, []string{"usr", "etc"}, "i")
	if err != nil || !copied {
		t.Fatalf("fill: %v %v", copied, err)
	}
	for _, p := range []string{"etc/stale", staging} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "usr/bin/tool")); err != nil {
		t.Error(err)
	}
}

func TestFillRefusesWhatCannotBeMounted(t *testing.T) {
	src, dst := image(t), t.TempDir()
	for _, dirs := range [][]string{{"usr/bin"}, {".."}, {""}, {Marker}, {".cubepod"}} {
		if _, err := Fill(src, dst, dirs, "i"); err == nil || !strings.Contains(err.Error(), "one top-level name") {
			t.Errorf("%q: %v", dirs, err)
		}
	}
	// Merged /usr: /bin is a link, and a mount over it would land on /usr/bin.
	if _, err := Fill(src, dst, []string{"bin"}, "i"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("bin: %v", err)
	}
	if done, _ := Filled(dst); done {
		t.Error("a refused fill marked the volume filled")
	}
}

func TestInstallPoddReplacesTheProgramsWhole(t *testing.T) {
	bin, dst := t.TempDir(), t.TempDir()
	write := func(text string) {
		for _, name := range PoddPrograms {
			must(t, os.WriteFile(filepath.Join(bin, name), []byte(name+" "+text), 0o600))
		}
	}
	write("v1")
	must(t, InstallPodd(bin, dst))
	write("v2")
	must(t, InstallPodd(bin, dst))
	entries, err := os.ReadDir(filepath.Join(dst, PoddDir))
	must(t, err)
	if len(entries) != len(PoddPrograms) {
		t.Fatalf("left behind: %v", entries)
	}
	for _, name := range PoddPrograms {
		p := filepath.Join(dst, PoddDir, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != name+" v2" {
			t.Errorf("%s: %q, %v", name, b, err)
		}
		if st := stat(t, p); st.Mode&0o777 != 0o755 {
			t.Errorf("%s: mode %o", name, st.Mode&0o777)
		}
	}
	if err := InstallPodd(t.TempDir(), dst); err == nil {
		t.Error("a bin without the programs: no error")
	}
}

func TestFillLeavesWhatIsMountedInTheImage(t *testing.T) {
	src, dst := image(t), t.TempDir()
	// As in the fill's container: CubePod's binaries and the runtime's /etc/hosts are mounts.
	bin, hosts := filepath.Join(src, "opt/cubepod/bin"), filepath.Join(src, "etc/hosts")
	must(t, os.MkdirAll(bin, 0o755))
	must(t, os.WriteFile(hosts, []byte("image's\n"), 0o644))
	runtimeHosts := filepath.Join(t.TempDir(), "hosts")
	must(t, os.WriteFile(runtimeHosts, []byte("127.0.0.1 runtime's\n"), 0o644))
	if err := unix.Mount("tmpfs", bin, "tmpfs", 0, "mode=0755"); err != nil {
		t.Skipf("mounting needs CAP_SYS_ADMIN: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bin, unix.MNT_DETACH) })
	must(t, unix.Mount(runtimeHosts, hosts, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(hosts, unix.MNT_DETACH) })
	must(t, os.WriteFile(filepath.Join(bin, "podd"), []byte("daemon"), 0o755))

	if _, err := Fill(src, dst, []string{"opt", "etc"}, "i"); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(dst, "opt/cubepod/bin")); err != nil || len(entries) != 0 {
		t.Errorf("a mounted directory is copied as an empty one: %v %v", entries, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "etc/hosts")); err != nil || len(b) != 0 {
		t.Errorf("a mounted file is copied as an empty one: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "etc/shadow")); err != nil {
		t.Errorf("the rest of etc: %v", err)
	}
}
