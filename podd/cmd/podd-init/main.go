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
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"cubepod.local/podd/rootfs"
)

// rootfsMount is where the fill's container has the whole rootfs volume.
const rootfsMount = "/mnt/cubepod/rootfs"

func main() {
	if len(os.Args) < 2 {
		fail("usage: podd-init <daemon> [args...] | podd-init fill")
	}
	if os.Args[1] == "fill" {
		fill(os.Getenv)
		return
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
