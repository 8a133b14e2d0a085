package egressagent

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CAOrganization marks the certificates of the agent's CAs, so that a sandbox's trust store can
// tell them from its own (podd replaces the one it was given before).
const CAOrganization = "CubePod egress"

const (
	rootKeyFile = "ca-root.key"
	rootKeySize = 32
	// caValidity is long: a sandbox keeps its CA for as long as its Pod lives.
	caValidity = 10 * 365 * 24 * time.Hour
	// leafValidity is short, and a leaf is minted again well before it ends.
	leafValidity = 24 * time.Hour
	leafRenew    = time.Hour
	// leavesPerPod bounds the names one sandbox makes the agent mint certificates for.
	leavesPerPod = 256
)

// Authority mints the certificates the agent serves a sandbox's intercepted TLS with: one CA per
// sandbox Pod, whose key is derived from the node's root key and the Pod's UID, so that the agent
// restarted serves the same CA; and leaves for the names the sandbox dials. Keys never leave the
// node: only a CA's certificate is published, for the sandbox to trust.
type Authority struct {
	root []byte
	now  func() time.Time

	mu   sync.Mutex
	pods map[string]*podCA
}

type podCA struct {
	cert    *x509.Certificate
	pem     []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey
	leaves  map[string]*tls.Certificate
}

// LoadAuthority reads the node's root key from dir, making it on the first start.
func LoadAuthority(dir string) (*Authority, error) {
	path := filepath.Join(dir, rootKeyFile)
	root, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		root = make([]byte, rootKeySize)
		if _, err := rand.Read(root); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("the CA root key: %w", err)
		}
		if _, err := f.Write(root); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("the CA root key: %w", err)
	}
	if len(root) != rootKeySize {
		return nil, fmt.Errorf("the CA root key %s holds %d bytes, not %d", path, len(root), rootKeySize)
	}
	return &Authority{root: root, now: time.Now, pods: map[string]*podCA{}}, nil
}

// CA is the certificate (PEM) of a Pod's CA. published is the one already published for it, if
// any: kept while it is of the same key, so that the sandbox's copy stays the one in use.
func (a *Authority) CA(podUID string, published []byte) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ca, err := a.podLocked(podUID, published)
	if err != nil {
		return nil, err
	}
	return ca.pem, nil
}

// Leaf is a certificate for name, signed by the Pod's CA.
func (a *Authority) Leaf(podUID, name string) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ca, err := a.podLocked(podUID, nil)
	if err != nil {
		return nil, err
	}
	now := a.now()
	if leaf, ok := ca.leaves[name]; ok && now.Add(leafRenew).Before(leaf.Leaf.NotAfter) {
		return leaf, nil
	}
	if len(ca.leaves) >= leavesPerPod {
		clear(ca.leaves)
	}
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{CAOrganization}, CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	leaf := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: parsed}
	ca.leaves[name] = leaf
	return leaf, nil
}

// Retain forgets every Pod but those named.
func (a *Authority) Retain(podUIDs map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid := range a.pods {
		if !podUIDs[uid] {
			delete(a.pods, uid)
		}
	}
}

func (a *Authority) podLocked(podUID string, published []byte) (*podCA, error) {
	if podUID == "" {
		return nil, errors.New("a CA needs the Pod's UID")
	}
	if ca, ok := a.pods[podUID]; ok && (published == nil || bytes.Equal(published, ca.pem)) {
		return ca, nil
	}
	key, err := a.derivedKey(podUID)
	if err != nil {
		return nil, err
	}
	cert, pemBytes := ofKey(published, key)
	if cert == nil {
		if cert, pemBytes, err = a.mintCA(podUID, key); err != nil {
			return nil, err
		}
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &podCA{cert: cert, pem: pemBytes, key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{}}
	a.pods[podUID] = ca
	return ca, nil
}

// derivedKey is the Pod's CA key: HMAC-SHA256 of its UID under the root key, as a P-256 scalar
// (the next counter when a digest is not one, which is rare).
func (a *Authority) derivedKey(podUID string) (*ecdsa.PrivateKey, error) {
	for counter := byte(0); counter < 16; counter++ {
		mac := hmac.New(sha256.New, a.root)
		mac.Write([]byte("cubepod egress ca v1\x00" + podUID + "\x00"))
		mac.Write([]byte{counter})
		if key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), mac.Sum(nil)); err == nil {
			return key, nil
		}
	}
	return nil, errors.New("no CA key could be derived")
}

// ofKey is a published certificate, parsed, when it is a CA of key.
func ofKey(published []byte, key *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	block, _ := pem.Decode(published)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !cert.IsCA {
		return nil, nil
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil
	}
	return cert, published
}

func (a *Authority) mintCA(podUID string, key *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	now := a.now()
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{CAOrganization}, CommonName: "CubePod egress " + podUID},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
