// Package rootfs fills a sandbox's rootfs volume from its image: the image's top-level
// directories that hold what an agent installs (/usr, /etc, /var, /home ...) are copied onto the
// volume once, with their owners, modes, times, links and extended attributes, so that the
// kubelet can mount the volume's copies over the image's and every later write lands on the
// volume. A volume that was filled already is left as it is: that is what survives a pause.
package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Marker is the file on a filled volume; its content names the image it was filled from.
const Marker = ".cubepod-filled"

// staging is where a fill copies to before it moves the copies into place.
const staging = ".cubepod-filling"

// Filled says whether the volume at dst was filled already.
func Filled(dst string) (bool, error) {
	_, err := os.Lstat(filepath.Join(dst, Marker))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Dirs reads the comma-separated list of top-level directories that live on the rootfs volume
// (the template's CUBEPOD_ROOTFS_DIRS), each checked as Fill checks it.
func Dirs(list string) ([]string, error) {
	dirs := strings.Split(strings.TrimSpace(list), ",")
	for _, d := range dirs {
		if err := checkDir(d); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// checkDir refuses what is not one top-level name, and the volume's own .cubepod entries.
func checkDir(d string) error {
	if d == "" || strings.ContainsAny(d, "/\x00") || d == "." || d == ".." || strings.HasPrefix(d, ".cubepod") {
		return fmt.Errorf("rootfs directory %q: must be one top-level name such as usr", d)
	}
	return nil
}

// Fill copies each of dirs (top-level names such as "usr") from the root src onto the volume
// at dst, unless the volume is filled already; it reports whether it copied. A fill cut off
// half-way leaves no marker, and the next one starts again from nothing: until the marker is
// written no sandbox process has run on the volume, so nothing of the sandbox's is lost.
func Fill(src, dst string, dirs []string, image string) (bool, error) {
	for _, d := range dirs {
		if err := checkDir(d); err != nil {
			return false, err
		}
	}
	if done, err := Filled(dst); err != nil || done {
		return false, err
	}
	stage := filepath.Join(dst, staging)
	if err := os.RemoveAll(stage); err != nil {
		return false, err
	}
	if err := os.Mkdir(stage, 0o700); err != nil {
		return false, err
	}
	c := copier{links: map[inode]string{}}
	for _, d := range dirs {
		from := filepath.Join(src, d)
		info, err := os.Lstat(from)
		if errors.Is(err, fs.ErrNotExist) {
			// The image has no such directory: the volume gets an empty one to mount.
			if err := os.Mkdir(filepath.Join(stage, d), 0o755); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, err
		}
		if !info.IsDir() {
			return false, fmt.Errorf("%s in the image is not a directory (%s): it cannot be mounted over", from, info.Mode().Type())
		}
		if c.mount, err = mountOf(from); err != nil {
			return false, err
		}
		if err := c.tree(from, filepath.Join(stage, d)); err != nil {
			return false, err
		}
	}
	for _, d := range dirs {
		to := filepath.Join(dst, d)
		if err := os.RemoveAll(to); err != nil {
			return false, err
		}
		if err := os.Rename(filepath.Join(stage, d), to); err != nil {
			return false, err
		}
	}
	if err := os.Remove(stage); err != nil {
		return false, err
	}
	return true, writeMarker(dst, image)
}

func writeMarker(dst, image string) error {
	tmp := filepath.Join(dst, Marker+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(image + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dst, Marker)); err != nil {
		return err
	}
	d, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type inode struct{ dev, ino uint64 }

// copier copies trees; links remembers the copy of every file with more than one name, so that
// hard links stay links. dev is the filesystem of the directory being copied: what is mounted
// inside it (the runtime's files such as /etc/resolv.conf, CubePod's own /opt/cubepod/bin) is
// the container's, not the image's, and the copy gets only an empty stand-in to mount over.
type copier struct {
	links map[inode]string
	mount mountID
}

// mountID names the mount a path is on: its mount ID, which a bind mount from the same
// filesystem has its own of too, or, from a kernel that gives none, its filesystem's device.
type mountID struct {
	id    uint64
	isDev bool
}

func mountOf(path string) (mountID, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return mountID{}, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return mountID{uint64(stx.Dev_major)<<32 | uint64(stx.Dev_minor), true}, nil
	}
	return mountID{stx.Mnt_id, false}, nil
}

// tree copies the directory from onto to (which does not exist yet), depth first; a
// directory's times are set after its entries, which would change them.
func (c *copier) tree(from, to string) error {
	var st unix.Stat_t
	if err := unix.Lstat(from, &st); err != nil {
		return err
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := c.entry(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return finish(from, to, &st)
}

func (c *copier) entry(from, to string) error {
	var st unix.Stat_t
	if err := unix.Lstat(from, &st); err != nil {
		return err
	}
	if mount, err := mountOf(from); err != nil {
		return err
	} else if mount != c.mount {
		return mountPoint(from, to, &st)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return c.tree(from, to)
	case unix.S_IFLNK:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, to); err != nil {
			return err
		}
		return finish(from, to, &st)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			id := inode{uint64(st.Dev), st.Ino}
			if first, ok := c.links[id]; ok {
				return os.Link(first, to)
			}
			c.links[id] = to
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
		return finish(from, to, &st)
	case unix.S_IFIFO:
		if err := unix.Mkfifo(to, 0o600); err != nil {
			return err
		}
		return finish(from, to, &st)
	default:
		// Device nodes and sockets are the runtime's to make (/dev), never an image's to keep.
		return nil
	}
}

// mountPoint makes the empty stand-in of something mounted at from: a directory or an empty
// file, with the mount's owner and mode.
func mountPoint(from, to string, st *unix.Stat_t) error {
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(to, 0o700)
	} else {
		var f *os.File
		if f, err = os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return err
	}
	return finish(from, to, st)
}

// copyFile copies a regular file's bytes into a new file; its syncs are the marker's and the
// callers' to make. It uses the system calls themselves: an os.File would register each of
// thousands of files with the runtime's poller first, which costs more than most copies.
func copyFile(from, to string) error {
	in, err := unix.Open(from, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: from, Err: err}
	}
	defer unix.Close(in)
	out, err := unix.Open(to, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "open", Path: to, Err: err}
	}
	if err := copyBytes(in, out); err != nil {
		unix.Close(out)
		return fmt.Errorf("copying %s: %w", from, err)
	}
	return unix.Close(out)
}

// copyBytes copies in the kernel (copy_file_range), or through a buffer where the two files'
// filesystems do not allow that.
func copyBytes(in, out int) error {
	for {
		n, err := unix.CopyFileRange(in, nil, out, nil, 1<<30, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
			return copyThroughBuffer(in, out)
		case err != nil:
			return err
		case n == 0:
			return nil
		}
	}
}

func copyThroughBuffer(in, out int) error {
	buf := make([]byte, 1<<20)
	for {
		n, err := unix.Read(in, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		for b := buf[:n]; len(b) > 0; {
			w, err := unix.Write(out, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			b = b[w:]
		}
	}
}

// finish gives the copy the original's owner, extended attributes, mode and times, in that
// order: a change of owner clears set-user-ID bits and file capabilities, so they come after.
func finish(from, to string, st *unix.Stat_t) error {
	if err := unix.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("owner of %s: %w", to, err)
	}
	if err := copyXattrs(from, to); err != nil {
		return err
	}
	link := st.Mode&unix.S_IFMT == unix.S_IFLNK
	if !link {
		if err := unix.Chmod(to, st.Mode&0o7777); err != nil {
			return fmt.Errorf("mode of %s: %w", to, err)
		}
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, to, times, unix.AT_SYMLINK_NOFOLLOW)
}

func copyXattrs(from, to string) error {
	size, err := unix.Llistxattr(from, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(from, buf)
	if err != nil {
		return err
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		n, err := unix.Lgetxattr(from, name, nil)
		if err != nil {
			return err
		}
		value := make([]byte, n)
		if n, err = unix.Lgetxattr(from, name, value); err != nil {
			return err
		}
		if err := unix.Lsetxattr(to, name, value[:n], 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("attribute %s of %s: %w", name, to, err)
		}
	}
	return nil
}

// PoddDir is where a filled volume keeps the podd-init and podd the sandbox container runs,
// so that a later Pod on the volume needs no init container to bring them.
const PoddDir = ".cubepod/bin"

// PoddPrograms are the programs kept there.
var PoddPrograms = []string{"podd-init", "podd"}

// InstallPodd copies PoddPrograms from binDir into PoddDir on the volume at dst, each under a
// new name first and then renamed over the old, so that a Pod that stops half-way leaves every
// program whole: the old one or the new one.
func InstallPodd(binDir, dst string) error {
	dir := filepath.Join(dst, PoddDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range PoddPrograms {
		tmp := filepath.Join(dir, "."+name+".new")
		_ = os.Remove(tmp)
		if err := copyFile(filepath.Join(binDir, name), tmp); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
