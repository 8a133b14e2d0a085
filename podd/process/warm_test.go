package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cubepod.local/podd/core"
)

// children are the processes whose parent is this one, ended or not.
func children(t *testing.T) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		rest := string(raw)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, string(raw))
		}
	}
	return out
}

func TestWarmRunsTheShellsAndLeavesNothing(t *testing.T) {
	if _, err := os.Stat(warmShell); err != nil {
		t.Skip("no " + warmShell)
	}
	started := time.Now()
	before := children(t)
	New(core.NewSession(map[string]string{})).Warm()
	if after := children(t); len(after) > len(before) {
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
