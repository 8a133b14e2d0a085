// Command podd-init is the sandbox container's entrypoint: it prepares the sandbox's volumes and
// then becomes the daemon (execve), so that the daemon is the container's first process.
//
// Usage: podd-init /opt/cubepod/bin/podd [args...]
//
// In Filesystem mode the kubelet has mounted both volumes already: /workspace, and the rootfs at
// /mnt/cubepod/rootfs. Under a VM runtime podd-init would make the rootfs the guest's root;
// without one (CUBEPOD_SKIP_PIVOT=1, or Block mode on runc, which cannot mount the devices
// unprivileged) it only prepares the directories the sandbox writes to and starts the daemon.
package main

import (
	"fmt"
	"os"
	"syscall"
)

const (
	workspace   = "/workspace"
	rootfsMount = "/mnt/cubepod/rootfs"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: podd-init <daemon> [args...]")
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
