// Package netnstest runs a test in a network namespace of its own, so that the kernel's rules
// (nftables, routes, interfaces) are tried for real without touching the machine's network.
package netnstest

import (
	"os"
	"os/exec"
	"testing"
)

const envMarker = "CUBEPOD_TEST_NETNS"

// Enter re-runs the test in a new network namespace (unshare, which needs root; the test is
// skipped without it) and returns false in the calling process, whose test passes or fails with
// the re-run. In the re-run it returns true: the test body runs there.
func Enter(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envMarker) == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), envMarker+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in its network namespace: %v\n%s", err, out)
	}
	return false
}
