package process

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"cubepod.local/podd/core"
)

func TestWarmRunsTheShellsAndLeavesNothing(t *testing.T) {
	if _, err := os.Stat(warmShell); err != nil {
		t.Skip("no " + warmShell)
	}
	started := time.Now()
	before := children(os.Getpid())
	New(core.NewSession(map[string]string{})).Warm()
	if after := children(os.Getpid()); len(after) > len(before) {
		t.Fatalf("processes left behind: %q", after)
	}
	u, err := core.LookupUser("user")
	if err != nil {
		u, _ = core.LookupUser("root")
	}
	// An interactive shell told to exit would save its history: the warm one saves none.
	if info, err := os.Stat(filepath.Join(u.Home, ".bash_history")); err == nil && info.ModTime().After(started) {
		t.Fatalf("%s/.bash_history was written", u.Home)
	}
}
