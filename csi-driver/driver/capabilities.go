package driver

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
)

// defaultFsType is the filesystem a Filesystem volume gets when its class names none: it can be
// made small (XFS cannot be under 300 MiB) and grown while mounted.
const defaultFsType = "ext4"

// fsTypes are the filesystems the node can make and grow.
var fsTypes = map[string]bool{"ext4": true, "xfs": true}

// checkCapability refuses, naming it, what the driver cannot serve: a volume reached from more
// than one node (the pool is one node's), a filesystem it does not make, or no access type.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return invalid("a volume capability is required")
	}
	if c.GetAccessMode() == nil {
		return invalid("a volume capability needs an access mode")
	}
	switch mode := c.GetAccessMode().GetMode(); mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
	default:
		// Kubernetes asks for SINGLE_NODE_WRITER for ReadWriteOnce and ReadWriteOncePod alike from a
		// driver without the SINGLE_NODE_MULTI_WRITER capability, which this one does not claim.
		return invalid("access mode %s is not supported (SINGLE_NODE_WRITER, SINGLE_NODE_READER_ONLY)", mode)
	}
	switch {
	case c.GetBlock() != nil:
		return nil
	case c.GetMount() != nil:
		if fs := c.GetMount().GetFsType(); fs != "" && !fsTypes[fs] {
			return invalid("filesystem %q is not supported (ext4, xfs)", fs)
		}
		return nil
	default:
		return invalid("a volume capability needs an access type, block or mount")
	}
}

func checkCapabilities(cs []*csi.VolumeCapability) error {
	if len(cs) == 0 {
		return invalid("volume capabilities are required")
	}
	for _, c := range cs {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

func fsTypeOf(c *csi.VolumeCapability) string {
	if fs := c.GetMount().GetFsType(); fs != "" {
		return fs
	}
	return defaultFsType
}
