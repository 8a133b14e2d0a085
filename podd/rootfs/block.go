package rootfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DeviceContent is what a sandbox's block device holds when podd-init first looks at it.
type DeviceContent int

const (
	// Blank: zeros where any filesystem or partition table keeps its signature; made an ext4.
	Blank DeviceContent = iota
	// Ext4: an ext4 filesystem (the one podd-init made at the device's first start), mounted.
	Ext4
	// Foreign: data that is not an ext4 filesystem; never formatted, the sandbox does not start.
	Foreign
)

// probeSize is how much of each end of a device Classify reads: every filesystem and partition
// table keeps its signatures in the first or the last MiB (GPT's backup header is at the end).
const probeSize = 1 << 20

// ext4's superblock starts 1024 bytes in; its magic is 56 bytes into it, little-endian.
const (
	ext4MagicOffset = 1024 + 0x38
	ext4Magic       = 0xEF53
)

// Classify reads the start and the end of the device (or file) at path.
func Classify(path string) (DeviceContent, error) {
	f, err := os.Open(path)
	if err != nil {
		return Foreign, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return Foreign, err
	}
	head := make([]byte, min(size, probeSize))
	if _, err := f.ReadAt(head, 0); err != nil {
		return Foreign, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(head) >= ext4MagicOffset+2 && binary.LittleEndian.Uint16(head[ext4MagicOffset:]) == ext4Magic {
		return Ext4, nil
	}
	tail := make([]byte, min(size, probeSize))
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return Foreign, fmt.Errorf("reading %s: %w", path, err)
	}
	if zero(head) && zero(tail) {
		return Blank, nil
	}
	return Foreign, nil
}

func zero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}

// Mke2fs is how podd-init runs the mke2fs that the podd-injector image brings along: Debian's,
// with its own shared libraries and loader, so that it runs on any template image.
type Mke2fs struct {
	// Dir holds mke2fs, its libraries and the loader ld-linux-x86-64.so.2.
	Dir string
}

// Format makes an ext4 filesystem labelled label on the device: no reserved blocks (the
// sandbox's root user is the only one there is), no discard (a fresh device is empty already).
func (m Mke2fs) Format(device, label string) error {
	cmd := exec.Command(filepath.Join(m.Dir, "ld-linux-x86-64.so.2"), "--library-path", m.Dir,
		filepath.Join(m.Dir, "mke2fs"), "-t", "ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", "-L", label, device)
	// Without a config of its own mke2fs would read the image's /etc/mke2fs.conf, if any.
	cmd.Env = []string{"MKE2FS_CONFIG=/dev/null"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mke2fs on %s: %v: %s", device, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// PrepareDevice mounts the device's ext4 filesystem at dir, making it first on a blank device.
// Not nosuid: the rootfs holds the image's set-user-ID programs (sudo), as in Filesystem mode.
// A device with other data is refused: it may be a volume someone reused, and formatting it
// would destroy what it holds.
func PrepareDevice(device, dir, label string, mkfs Mke2fs) error {
	content, err := Classify(device)
	if err != nil {
		return err
	}
	switch content {
	case Foreign:
		return fmt.Errorf("%s holds data that is not an ext4 filesystem: not formatting it; give the box a blank volume or one it made", device)
	case Blank:
		if err := mkfs.Format(device, label); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(device, dir, "ext4", unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", device, dir, err)
	}
	if content == Blank {
		// A new workspace starts empty, as a new volume does in Filesystem mode; e2fsck makes
		// lost+found again should it ever need one.
		if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// Bind is one bind mount: Source onto Target, with what is mounted under Source (Recursive).
type Bind struct {
	Source, Target string
	Recursive      bool
}

// RootBinds plans how the filled volume at volume becomes the root, given the container's mount
// points (from /proc/self/mountinfo): what the runtime mounted inside one of dirs (/etc/hosts,
// /opt/cubepod/bin ...) is first bound onto its stand-in on the volume, then each of the volume's
// copies is bound over the image's directory with what is mounted inside it, as the kubelet's
// subPath mounts and the runtime's mounts on top of them do in Filesystem mode.
func RootBinds(volume string, dirs []string, mountPoints []string) []Bind {
	var binds []Bind
	inner := append([]string(nil), mountPoints...)
	sort.Strings(inner)
	for _, d := range dirs {
		top := "/" + d
		for _, m := range inner {
			// The volume's own mount (under /mnt, say) is the copies' source, not a mount to keep.
			onVolume := m == volume || strings.HasPrefix(m, volume+"/")
			if strings.HasPrefix(m, top+"/") && !onVolume {
				binds = append(binds, Bind{Source: m, Target: filepath.Join(volume, m)})
			}
		}
	}
	for _, d := range dirs {
		binds = append(binds, Bind{Source: filepath.Join(volume, d), Target: "/" + d, Recursive: true})
	}
	return binds
}

// MountPoints reads the mount points of this process's mount namespace from mountinfo.
func MountPoints(mountinfo io.Reader) ([]string, error) {
	var points []string
	s := bufio.NewScanner(mountinfo)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			return nil, fmt.Errorf("mountinfo line %q: too few fields", s.Text())
		}
		points = append(points, unescapeMountinfo(fields[4]))
	}
	return points, s.Err()
}

// unescapeMountinfo undoes the kernel's octal escapes of space, tab, newline and backslash.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ApplyBinds makes the bind mounts in order; a stand-in missing on the volume (a mount the
// runtime added after the fill) is made first, as the fill would have.
func ApplyBinds(binds []Bind) error {
	for _, b := range binds {
		if err := standIn(b.Source, b.Target); err != nil {
			return err
		}
		flags := uintptr(unix.MS_BIND)
		if b.Recursive {
			flags |= unix.MS_REC
		}
		if err := unix.Mount(b.Source, b.Target, "", flags, ""); err != nil {
			return fmt.Errorf("binding %s onto %s: %w", b.Source, b.Target, err)
		}
	}
	return nil
}

func standIn(source, target string) error {
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(source, &st); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return mountPoint(source, target, &st)
}
