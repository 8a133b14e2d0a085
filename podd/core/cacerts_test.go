package core

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certPEM is a self-signed certificate of an organization.
func certPEM(t *testing.T, org, name string, isCA bool) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{org}, CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestInstallCAReplacesTheEgressCAOnly(t *testing.T) {
	root := t.TempDir()
	public := certPEM(t, "A Public CA", "public", true)
	old := certPEM(t, egressOrganization, "CubePod egress old-pod", true)
	system := filepath.Join(root, SystemBundle)
	if err := os.MkdirAll(filepath.Dir(system), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(system, []byte(public+old), 0o644); err != nil {
		t.Fatal(err)
	}
	next := certPEM(t, egressOrganization, "CubePod egress new-pod", true)
	cas, err := ParseCABundle(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallCA(root, cas); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(system)
	if string(got) != public+next {
		t.Errorf("system bundle:\n%s\nwant the public CA, then the new one only", got)
	}
	info, _ := os.Stat(system)
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", info.Mode())
	}
	own, _ := os.ReadFile(filepath.Join(root, EgressCAFile))
	if string(own) != next {
		t.Errorf("own file %q", own)
	}
	// None: both go, the public CA stays.
	if err := InstallCA(root, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(system); string(got) != public {
		t.Errorf("after removal: %s", got)
	}
	if _, err := os.Stat(filepath.Join(root, EgressCAFile)); !os.IsNotExist(err) {
		t.Errorf("own file after removal: %v", err)
	}
	// An image without a bundle gets one.
	bare := t.TempDir()
	if err := InstallCA(bare, cas); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(bare, SystemBundle)); string(got) != next {
		t.Errorf("new bundle %q", got)
	}
}

func TestParseCABundleTakesEgressCAsOnly(t *testing.T) {
	for name, bundle := range map[string]string{
		"not PEM":        "hello",
		"a key":          "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"another CA":     certPEM(t, "A Public CA", "public", true),
		"not a CA":       certPEM(t, egressOrganization, "leaf", false),
		"one bad of two": certPEM(t, egressOrganization, "ok", true) + "junk",
	} {
		if _, err := ParseCABundle(bundle); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	if cas, err := ParseCABundle(""); err != nil || len(cas) != 0 {
		t.Errorf("empty: %v %v", cas, err)
	}
	if _, err := ParseCABundle(certPEM(t, "A Public CA", "x", true)); err == nil || !strings.Contains(err.Error(), "not a CA of CubePod's egress agent") {
		t.Errorf("message: %v", err)
	}
}

func TestSessionEnvNamesTheCAFilesOnceInstalled(t *testing.T) {
	for name := range CAEnv() {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)
	}
	s := NewSession(map[string]string{})
	u := &User{Name: "user", Home: "/home/user"}
	if strings.Contains(strings.Join(s.Env(u), "\n"), "NODE_EXTRA_CA_CERTS") {
		t.Error("CA variables before a CA")
	}
	s.SetCA(true)
	if err := s.Apply(Init{EnvVars: map[string]string{"SSL_CERT_FILE": "/mine.pem"}}); err != nil {
		t.Fatal(err)
	}
	env := s.Env(u)
	joined := strings.Join(env, "\n")
	if !strings.Contains(joined, "NODE_EXTRA_CA_CERTS="+EgressCAFile) || !strings.Contains(joined, "REQUESTS_CA_BUNDLE="+SystemBundle) {
		t.Errorf("env %v", env)
	}
	// /init's own value comes later, so it is the one a process sees.
	if strings.LastIndex(joined, "SSL_CERT_FILE=/mine.pem") < strings.LastIndex(joined, "SSL_CERT_FILE="+SystemBundle) {
		t.Errorf("/init's SSL_CERT_FILE does not win: %v", env)
	}
}
