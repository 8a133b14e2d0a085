package core

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Where a sandbox's programs find the certificates they trust, and where CubePod's egress CA is
// kept on its own.
const (
	SystemBundle = "/etc/ssl/certs/ca-certificates.crt"
	EgressCAFile = "/usr/local/share/ca-certificates/cubepod-egress-ca.crt"
)

// egressOrganization marks the CAs of CubePod's node egress agent (its CAOrganization): the only
// certificates InstallCA adds and replaces.
const egressOrganization = "CubePod egress"

// ParseCABundle reads /init's caBundle: PEM certificates of CAs of CubePod's egress agent, the
// only ones a sandbox is given this way ("" gives none).
func ParseCABundle(bundle string) ([][]byte, error) {
	var ours [][]byte
	for rest := bytes.TrimSpace([]byte(bundle)); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" {
			return nil, errors.New("caBundle: not PEM certificates")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("caBundle: %w", err)
		}
		if !isEgressCA(cert) {
			return nil, fmt.Errorf("caBundle: %q is not a CA of CubePod's egress agent", cert.Subject.CommonName)
		}
		ours = append(ours, pem.EncodeToMemory(block))
	}
	return ours, nil
}

// InstallCA makes the egress CAs (ParseCABundle) trusted inside the sandbox, as envd does with
// E2B's caBundle: in the system bundle, where OpenSSL, curl and Python's ssl read it, and in a
// file of their own for runtimes that take extra CAs (Node). A sandbox's CA is its Pod's, so a
// resumed or forked sandbox gets another: the earlier one is replaced, never kept beside it. None
// removes it. root is the sandbox's root ("/").
func InstallCA(root string, ours [][]byte) error {
	system := filepath.Join(root, SystemBundle)
	current, err := os.ReadFile(system)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var next bytes.Buffer
	for rest := current; ; {
		block, after := pem.Decode(rest)
		if block == nil {
			break
		}
		if cert, err := x509.ParseCertificate(block.Bytes); block.Type != "CERTIFICATE" || err != nil || !isEgressCA(cert) {
			next.Write(pem.EncodeToMemory(block))
		}
		rest = after
	}
	for _, c := range ours {
		next.Write(c)
	}
	if err := replaceFile(system, next.Bytes()); err != nil {
		return err
	}
	own := filepath.Join(root, EgressCAFile)
	if len(ours) == 0 {
		if err := os.Remove(own); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return replaceFile(own, bytes.Join(ours, nil))
}

// CAEnv are the variables that point runtimes with stores of their own at the trusted CAs:
// Python's requests (certifi), Node, and OpenSSL wherever its default differs.
func CAEnv() map[string]string {
	return map[string]string{
		"SSL_CERT_FILE":       SystemBundle,
		"REQUESTS_CA_BUNDLE":  SystemBundle,
		"NODE_EXTRA_CA_CERTS": EgressCAFile,
	}
}

// isEgressCA says whether a certificate is a CA of the egress agent (its organization).
func isEgressCA(cert *x509.Certificate) bool {
	return cert.IsCA && slices.Contains(cert.Subject.Organization, egressOrganization)
}

// replaceFile writes a file whole (world-readable, as trust stores are) by a rename, so that no
// reader sees half of it.
func replaceFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cubepod-ca-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
