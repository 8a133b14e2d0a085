package driver

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// A mounted ext4 filesystem grows only for a process with CAP_SYS_RESOURCE (the kernel's online
// resize); an unmounted one grows by writing its device, which needs no more than the device.
// So an ext4 volume is grown before it is mounted, at every staging whose device is larger than
// its filesystem: after a clone or restore that asked for more than its source, or an expansion
// the node could not apply while the volume was mounted. XFS grows only mounted (xfs_growfs).

var (
	blockCount = regexp.MustCompile(`(?m)^Block count:\s+(\d+)$`)
	blockSize  = regexp.MustCompile(`(?m)^Block size:\s+(\d+)$`)
)

// growExt4 grows the unmounted ext4 filesystem on dev to the device's size, checking it first as
// resize2fs requires; a filesystem that fills its device is left alone.
func growExt4(dev string) error {
	out, err := exec.Command("dumpe2fs", "-h", dev).Output()
	if err != nil {
		return fmt.Errorf("dumpe2fs -h %s: %v", dev, err)
	}
	count, size := blockCount.FindSubmatch(out), blockSize.FindSubmatch(out)
	if count == nil || size == nil {
		return fmt.Errorf("dumpe2fs -h %s: no block count or size", dev)
	}
	blocks, _ := strconv.ParseInt(string(count[1]), 10, 64)
	bsize, _ := strconv.ParseInt(string(size[1]), 10, 64)
	devSize, err := deviceSize(dev)
	if err != nil {
		return err
	}
	if devSize-blocks*bsize < bsize {
		return nil
	}
	// -p repairs what is safe to repair unattended; exit 1 means it did.
	fsck := exec.Command("e2fsck", "-f", "-p", dev)
	var fsckOut bytes.Buffer
	fsck.Stdout, fsck.Stderr = &fsckOut, &fsckOut
	if err := fsck.Run(); err != nil {
		if e, ok := err.(*exec.ExitError); !ok || e.ExitCode() > 1 {
			return fmt.Errorf("e2fsck -f -p %s: %v: %s", dev, err, strings.TrimSpace(fsckOut.String()))
		}
	}
	if out, err := exec.Command("resize2fs", dev).CombinedOutput(); err != nil {
		return fmt.Errorf("resize2fs %s: %v: %s", dev, err, strings.TrimSpace(string(out)))
	}
	return nil
}
