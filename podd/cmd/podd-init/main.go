// Command podd-init is the sandbox container's entrypoint: it prepares the sandbox's volumes and
// then becomes the daemon (execve), so that the daemon is the container's first process.
//
// Usage: podd-init /opt/cubepod/bin/podd [args...]
//
//	podd-init fill    (an init container on the template's image: CUBEPOD_ROOTFS_DIRS, the
//	                   image's directories to copy onto the rootfs volume at /mnt/cubepod/rootfs
//	                   unless it was filled already; CUBEPOD_ROOTFS_IMAGE, the image's name)
//
// In Filesystem mode the kubelet has mounted both volumes already: /workspace, and the image's
// top-level directories from their copies on the rootfs volume, which the rootfs-fill init
// container (podd-init fill, on the template's image) made at the volume's first start.
//
// In Block mode (a VM runtime: the devices are the VM's disks) the container has the devices
// /dev/cubepod-workspace and /dev/cubepod-rootfs, and podd-init does what the kubelet and the
// fill do in Filesystem mode: an ext4 filesystem on a blank device (never on one with other
// data), the workspace at /workspace, the rootfs filled from the image once and its copies bound
// over the image's directories. Then it removes the devices and gives up the rights that took
// (the template's CUBEPOD_ROOTFS_DIRS name the directories), so that neither podd nor anything
// it starts can reach the raw devices or mount anything.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"cubepod.local/podd/rootfs"
)

// rootfsMount is where the fill's container has the whole rootfs volume, and binDir where it
// has the programs podd-installer copied in.
const (
	rootfsMount = "/mnt/cubepod/rootfs"
	binDir      = "/opt/cubepod/bin"
)

// The devices of Block mode (capabilities/manifests/pod.ts), and mke2fs as the installer copies it.
const (
	rootfsDevice    = "/dev/cubepod-rootfs"
	workspaceDevice = "/dev/cubepod-workspace"
	workspaceMount  = "/workspace"
	mke2fsDir       = "/opt/cubepod/bin/mke2fs"
)

// blockCapabilities are what the sandbox container has in Block mode beyond podd's own, for
// podd-init alone: mounting (SYS_ADMIN), the fill's (DAC_READ_SEARCH, SETFCAP), and SETPCAP to
// drop them all from the bounding set.
var blockCapabilities = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_READ_SEARCH, unix.CAP_SETFCAP, unix.CAP_SETPCAP}

func main() {
	if len(os.Args) < 2 {
		fail("usage: podd-init <daemon> [args...] | podd-init fill")
	}
	if os.Args[1] == "fill" {
		fill(os.Getenv)
		return
	}
	if block, err := blockMode(); err != nil {
		fail("%v", err)
	} else if block {
		if err := prepareBlock(os.Getenv); err != nil {
			fail("%v", err)
		}
	}
	if err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ()); err != nil {
		fail("starting %s: %v", os.Args[1], err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "podd-init: "+format+"\n", args...)
	os.Exit(1)
}

// fill copies the image's directories onto the rootfs volume, once.
func fill(env func(string) string) {
	dirs, image, err := fillConfig(env)
	if err != nil {
		fail("%v", err)
	}
	copied, err := rootfs.Fill("/", rootfsMount, dirs, image)
	if err != nil {
		fail("filling the rootfs volume from %s: %v", image, err)
	}
	if copied {
		fmt.Printf("podd-init: filled the rootfs volume from %s: %s\n", image, strings.Join(dirs, ", "))
	} else {
		fmt.Println("podd-init: the rootfs volume was filled before; kept as it is")
	}
	// The sandbox container runs podd from the volume: this Pod's, and later Pods' without
	// init containers.
	if err := rootfs.InstallPodd(binDir, rootfsMount); err != nil {
		fail("keeping podd on the rootfs volume: %v", err)
	}
}

func fillConfig(env func(string) string) ([]string, string, error) {
	raw := env("CUBEPOD_ROOTFS_DIRS")
	if strings.TrimSpace(raw) == "" {
		return nil, "", fmt.Errorf("CUBEPOD_ROOTFS_DIRS: expected the directories to fill, such as usr,etc,var")
	}
	dirs, err := rootfs.Dirs(raw)
	if err != nil {
		return nil, "", fmt.Errorf("CUBEPOD_ROOTFS_DIRS: %w", err)
	}
	image := strings.TrimSpace(env("CUBEPOD_ROOTFS_IMAGE"))
	if image == "" {
		return nil, "", fmt.Errorf("CUBEPOD_ROOTFS_IMAGE: expected the image the volume is filled from")
	}
	return dirs, image, nil
}

// blockMode says whether the container has Block mode's devices: both, or neither.
func blockMode() (bool, error) {
	has := func(p string) bool { _, err := os.Stat(p); return err == nil }
	rootfsDev, workspaceDev := has(rootfsDevice), has(workspaceDevice)
	if rootfsDev != workspaceDev {
		return false, fmt.Errorf("Block mode needs both %s and %s; only one is there", rootfsDevice, workspaceDevice)
	}
	return rootfsDev, nil
}

func prepareBlock(env func(string) string) error {
	dirs, image, err := fillConfig(env)
	if err != nil {
		return err
	}
	if ok, err := hasCapability(unix.CAP_SYS_ADMIN); err != nil {
		return err
	} else if !ok {
		// CubePod grants the right to mount only under the RuntimeClasses it is told are VMs.
		return fmt.Errorf("Block mode: %s and %s cannot be mounted: the container may not mount (no CAP_SYS_ADMIN), "+
			"which CubePod grants only under a VM runtime (CUBEPOD_VM_RUNTIME_CLASSES); run this template under one, or in Filesystem mode",
			workspaceDevice, rootfsDevice)
	}
	mkfs := rootfs.Mke2fs{Dir: mke2fsDir}
	if err := rootfs.PrepareDevice(workspaceDevice, workspaceMount, "cubepod-workspace", mkfs); err != nil {
		return err
	}
	if err := rootfs.PrepareDevice(rootfsDevice, rootfsMount, "cubepod-rootfs", mkfs); err != nil {
		return err
	}
	copied, err := rootfs.Fill("/", rootfsMount, dirs, image)
	if err != nil {
		return fmt.Errorf("filling the rootfs volume from %s: %w", image, err)
	}
	if copied {
		fmt.Printf("podd-init: filled the rootfs device from %s: %s\n", image, strings.Join(dirs, ", "))
	}
	mountinfo, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	points, err := rootfs.MountPoints(mountinfo)
	mountinfo.Close()
	if err != nil {
		return err
	}
	if err := rootfs.ApplyBinds(rootfs.RootBinds(rootfsMount, dirs, points)); err != nil {
		return err
	}
	// The binds hold the filesystem; the volume's own root (its marker, lost+found) goes out of sight.
	if err := unix.Unmount(rootfsMount, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", rootfsMount, err)
	}
	if err := errors.Join(os.Remove(rootfsDevice), os.Remove(workspaceDevice)); err != nil {
		return fmt.Errorf("removing the raw devices: %w", err)
	}
	return dropCapabilities(blockCapabilities)
}

// hasCapability says whether this process has c in its effective set.
func hasCapability(c uintptr) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("reading capabilities: %w", err)
	}
	return data[c/32].Effective&(1<<(c%32)) != 0, nil
}

// dropCapabilities removes caps from the bounding set, so that no program podd-init becomes or
// starts gets them back, and from this process's own sets. SETPCAP, which the first takes, last.
func dropCapabilities(caps []uintptr) error {
	for _, c := range caps {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	for _, c := range caps {
		bit := uint32(1) << (c % 32)
		d := &data[c/32]
		d.Effective &^= bit
		d.Permitted &^= bit
		d.Inheritable &^= bit
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("giving up capabilities: %w", err)
	}
	return nil
}
