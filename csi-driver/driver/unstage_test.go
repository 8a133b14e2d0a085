package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHoldersNameAProcessWithAnOpenFile(t *testing.T) {
	dir := t.TempDir()
	if got := holders(dir); got != "no process found" {
		t.Fatalf("holders of an unused directory: %s", got)
	}
	f, err := os.Create(filepath.Join(dir, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := holders(dir)
	want := fmt.Sprintf("pid %d (", os.Getpid())
	if !strings.Contains(got, want) || !strings.Contains(got, "open file "+f.Name()) {
		t.Fatalf("holders = %q, want this process (%s…) with its open file", got, want)
	}
	if holders(dir+"-other") != "no process found" {
		t.Fatal("a sibling path with the same prefix counted as under the directory")
	}
}
