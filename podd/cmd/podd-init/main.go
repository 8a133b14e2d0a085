// Command podd-init is the sandbox container's entrypoint: it prepares the sandbox's volumes and
// then becomes the daemon (execve), so that the daemon is the container's first process.
//
// Usage: podd-init /opt/cubepod/bin/podd [args...]
//
//	podd-init fill    (an init container on the template's image: CUBEPOD_ROOTFS_DIRS, the
//	                   image's directories to copy onto the rootfs volume at /mnt/cubepod/rootfs
//	                   unless it was filled already; CUBEPOD_ROOTFS_IMAGE, the image's name)
//
// In Filesystem mode the kubelet has mounted both volumes already: /workspace, and the rootfs at
// /mnt/cubepod/rootfs. Under a VM runtime podd-init would make the rootfs the guest's root;
// without one (CUBEPOD_SKIP_PIVOT=1, or Block mode on runc, which cannot mount the devices
// unprivileged) it only prepares the directories the sandbox writes to and starts the daemon.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"cubepod.local/podd/rootfs"
)

const (
	workspace   = "/workspace"
	rootfsMount = "/mnt/cubepod/rootfs"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: podd-init <daemon> [args...] | podd-init fill")
	}
	if os.Args[1] == "fill" {
		fill(os.Getenv)
		return
	}
	if os.Getenv("CUBEPOD_VOLUME_MODE") != "Block" {
		// The upper layer holds what the sandbox writes outside /workspace, on the rootfs volume.
		for _, dir := range []string{workspace, rootfsMount + "/upper"} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				fail("preparing %s: %v", dir, err)
			}
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
}

func fillConfig(env func(string) string) ([]string, string, error) {
	raw := strings.TrimSpace(env("CUBEPOD_ROOTFS_DIRS"))
	if raw == "" {
		return nil, "", fmt.Errorf("CUBEPOD_ROOTFS_DIRS: expected the directories to fill, such as usr,etc,var")
	}
	image := strings.TrimSpace(env("CUBEPOD_ROOTFS_IMAGE"))
	if image == "" {
		return nil, "", fmt.Errorf("CUBEPOD_ROOTFS_IMAGE: expected the image the volume is filled from")
	}
	return strings.Split(raw, ","), image, nil
}
