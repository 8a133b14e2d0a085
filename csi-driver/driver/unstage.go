package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/mount-utils"
)

// busyWait bounds how long an unstage waits for a staged filesystem to stop being busy.
const busyWait = 20 * time.Second

// unmountStaging unmounts a staging path. The last process of a Pod can hold its filesystem for a
// moment after the kubelet tore the Pod's mount down, more so on a loaded node; the kubelet retries
// a failed unstage with a back-off that doubles each time, so a short wait here frees the volume
// sooner than failing would. A mount still busy after the wait fails naming who holds it.
func (d *Driver) unmountStaging(staging string) error {
	deadline := time.Now().Add(busyWait)
	for {
		err := mount.CleanupMountPoint(staging, d.mounter, true)
		if err == nil || !strings.Contains(err.Error(), "busy") {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w; held by: %s", err, holders(staging))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// holders names the processes that keep a path busy: those with a file, a working directory or a
// root under it, and those whose mount namespace has a copy of the mount.
func holders(path string) string {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	pids, _ := filepath.Glob("/proc/[0-9]*")
	var found []string
	for _, dir := range pids {
		var why []string
		for _, link := range []string{"cwd", "root"} {
			if target, err := os.Readlink(filepath.Join(dir, link)); err == nil && under(target, path) {
				why = append(why, link)
			}
		}
		fds, _ := filepath.Glob(filepath.Join(dir, "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && under(target, path) {
				why = append(why, "open file "+target)
				break
			}
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "mnt")); err == nil && ns != self {
			if info, err := os.ReadFile(filepath.Join(dir, "mountinfo")); err == nil &&
				strings.Contains(string(info), " "+path+" ") {
				why = append(why, "mount namespace "+ns)
			}
		}
		if len(why) > 0 {
			comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
			found = append(found, fmt.Sprintf("pid %s (%s: %s)",
				filepath.Base(dir), strings.TrimSpace(string(comm)), strings.Join(why, ", ")))
		}
	}
	if len(found) == 0 {
		return "no process found"
	}
	return strings.Join(found, "; ")
}

func under(target, path string) bool {
	return target == path || strings.HasPrefix(target, path+"/")
}
