package egress

import "syscall"

// markControl marks a socket before it connects, so that the rules let it out.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(mark))
		}); cerr != nil {
			return cerr
		}
		return err
	}
}
