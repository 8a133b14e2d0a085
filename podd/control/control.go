// Package control decides whether a request to podd comes from the CubePod gateway of this
// sandbox. The gateway signs a credential with its Ed25519 key, naming the box and the Pod it is
// for; podd holds only the public key and its own Pod's UID, so nothing it has (nor anything in
// the Pod's spec, which a tenant may read) lets anyone else make one. A credential is bound to
// one Pod, so a new Pod (a resume) needs a new one, and the first /init binds the daemon to one
// box, so a claimed standby obeys no other box's credential.
package control

import (
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Header carries the credential on every request but GET /health.
const Header = "X-CubePod-Control"

// context separates these signatures from anything else the key might ever sign.
const context = "cubepod-podd-control/v1\x00"

// Grant is what a credential says: the gateway lets its bearer control the daemon of Pod for Box.
type Grant struct {
	Box string
	Pod string
}

func (g Grant) message() []byte { return []byte(context + g.Box + "\x00" + g.Pod) }

// Sign makes the credential for a grant; the gateway's side, here for podd's tests.
func Sign(key ed25519.PrivateKey, g Grant) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(g.Box + "/" + g.Pod))
	return payload + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, g.message()))
}

// maxSignatures bounds the signatures one credential may carry: the gateway signs with its
// current token key and, through a rotation, the one it replaced.
const maxSignatures = 4

// Parse reads a credential's grant and checks its signatures: one made with the key this daemon
// trusts suffices, so that a daemon started before a rotation of the gateway's key still obeys.
func Parse(key ed25519.PublicKey, credential string) (Grant, error) {
	parts := strings.Split(credential, ".")
	if len(parts) < 2 || len(parts) > 1+maxSignatures {
		return Grant{}, errors.New("malformed credential")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	box, pod, ok := strings.Cut(string(raw), "/")
	if err != nil || !ok || box == "" || pod == "" {
		return Grant{}, errors.New("malformed credential")
	}
	g := Grant{Box: box, Pod: pod}
	for _, sig := range parts[1:] {
		signature, err := base64.RawURLEncoding.DecodeString(sig)
		if err != nil {
			return Grant{}, errors.New("malformed credential")
		}
		if ed25519.Verify(key, g.message(), signature) {
			return g, nil
		}
	}
	return Grant{}, errors.New("credential not signed by the gateway")
}

// ParsePublicKey reads the gateway's public key as the Pod's environment carries it: the 32
// bytes in standard base64.
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("expected %d bytes in base64", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// Refusal is why a request is refused: Status is the HTTP status to answer.
type Refusal struct {
	Status  int
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Guard checks credentials for one daemon: its Pod, the gateway's key, and the box it serves
// once initialised.
type Guard struct {
	key ed25519.PublicKey
	pod string

	mu  sync.RWMutex
	box string
	// The last credential that passed, compared first: every request carries the same one.
	accepted string
}

// NewGuard guards the daemon of the Pod with that UID.
func NewGuard(key ed25519.PublicKey, podUID string) *Guard {
	return &Guard{key: key, pod: podUID}
}

// Box is the box the daemon serves; empty until an /init bound it.
func (g *Guard) Box() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.box
}

// Check admits a request that carries a credential for this Pod and the box it serves. Before
// an /init, nothing but an /init is admitted (see Bind).
func (g *Guard) Check(credential string) error {
	g.mu.RLock()
	box, accepted := g.box, g.accepted
	g.mu.RUnlock()
	if box == "" {
		return &Refusal{403, "this sandbox's daemon has not been initialised by the CubePod gateway"}
	}
	if accepted != "" && subtle.ConstantTimeCompare([]byte(credential), []byte(accepted)) == 1 {
		return nil
	}
	grant, err := g.grant(credential)
	if err != nil {
		return err
	}
	if grant.Box != box {
		return &Refusal{403, "the credential is for another box"}
	}
	g.remember(credential)
	return nil
}

// Bind admits an /init: a credential for this Pod binds the daemon to its box, the first time;
// after that, only the same box may initialise it again (a gateway's retry, a reconnect).
func (g *Guard) Bind(credential string) error {
	grant, err := g.grant(credential)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.box != "" && g.box != grant.Box {
		return &Refusal{403, "this sandbox's daemon serves another box"}
	}
	g.box = grant.Box
	g.accepted = credential
	return nil
}

func (g *Guard) grant(credential string) (Grant, error) {
	if credential == "" {
		return Grant{}, &Refusal{401, "missing " + Header + ": only the CubePod gateway may call this daemon"}
	}
	grant, err := Parse(g.key, credential)
	if err != nil {
		return Grant{}, &Refusal{401, "invalid " + Header + ": " + err.Error()}
	}
	if grant.Pod != g.pod {
		return Grant{}, &Refusal{403, "the credential is for another Pod"}
	}
	return grant, nil
}

func (g *Guard) remember(credential string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted = credential
}
