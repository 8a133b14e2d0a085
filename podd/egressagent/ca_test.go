package egressagent

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func pool(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(caPEM) {
		t.Fatalf("not a PEM certificate: %s", caPEM)
	}
	return p
}

func TestAuthorityMintsPerPodAndKeepsItsRoot(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dir, rootKeyFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("root key: %v %v", info, err)
	}
	caA, err := a.CA("pod-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	caB, _ := a.CA("pod-b", nil)
	leaf, err := a.Leaf("pod-a", "api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{DNSName: "api.example.com", Roots: pool(t, caA)}
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Fatalf("a leaf does not verify under its Pod's CA: %v", err)
	}
	opts.Roots = pool(t, caB)
	if _, err := leaf.Leaf.Verify(opts); err == nil {
		t.Fatal("a leaf verifies under another Pod's CA")
	}
	if again, _ := a.Leaf("pod-a", "api.example.com"); again != leaf {
		t.Error("a leaf is minted again while valid")
	}
	block, _ := pem.Decode(caA)
	cert, _ := x509.ParseCertificate(block.Bytes)
	if !cert.IsCA || cert.Subject.Organization[0] != CAOrganization || !cert.MaxPathLenZero {
		t.Errorf("CA %+v", cert.Subject)
	}

	// Restarted: the same root gives the same keys, and the published CA is kept.
	restarted, err := LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := restarted.CA("pod-a", caA); string(got) != string(caA) {
		t.Error("the published CA was not kept after a restart")
	}
	leaf2, err := restarted.Leaf("pod-a", "api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	opts.Roots = pool(t, caA)
	if _, err := leaf2.Leaf.Verify(opts); err != nil {
		t.Fatalf("after a restart, a leaf does not verify under the CA the sandbox holds: %v", err)
	}
	// A CA published for another key (another node's, a forgery) is not kept.
	if got, _ := restarted.CA("pod-b", caA); string(got) == string(caA) {
		t.Error("a CA of another key was kept")
	}
}

func TestAuthorityRenewsLeavesAndRefusesABadRoot(t *testing.T) {
	a, err := LoadAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.now = func() time.Time { return now }
	first, _ := a.Leaf("pod", "a.example")
	now = now.Add(leafValidity - leafRenew/2)
	if second, _ := a.Leaf("pod", "a.example"); second == first {
		t.Error("a leaf near its end is served again")
	}
	a.Retain(map[string]bool{})
	if len(a.pods) != 0 {
		t.Error("a forgotten Pod is kept")
	}
	if _, err := a.CA("", nil); err == nil {
		t.Error("a CA without a Pod UID")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rootKeyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAuthority(dir); err == nil {
		t.Error("a root key of the wrong size is used")
	}
}
