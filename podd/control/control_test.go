package control

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// The gateway's test vector (test/unit/gateway/podd-control.test.ts): the same seed, box and Pod
// give the same credential in both languages.
const (
	vectorSeed       = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	vectorPublicKey  = "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
	vectorBox        = "0b6f1c2e-box"
	vectorPod        = "9d2a7e44-pod"
	vectorCredential = "MGI2ZjFjMmUtYm94LzlkMmE3ZTQ0LXBvZA.B9KunYPFix25GJiK_GCz3vNpulDhRE8aNhjD7P1m7j_9T9pvvzsweVFjBZahf80stY_M38hR-kGc7amR2tciBg"
)

func vectorKey(t *testing.T) ed25519.PrivateKey {
	seed, err := base64.StdEncoding.DecodeString(vectorSeed)
	if err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func TestSignMatchesTheGatewaysVector(t *testing.T) {
	key := vectorKey(t)
	if got := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)); got != vectorPublicKey {
		t.Fatalf("public key %s, want %s", got, vectorPublicKey)
	}
	if got := Sign(key, Grant{Box: vectorBox, Pod: vectorPod}); got != vectorCredential {
		t.Fatalf("credential\n %s\nwant\n %s", got, vectorCredential)
	}
}

func TestParse(t *testing.T) {
	key := vectorKey(t)
	pub := key.Public().(ed25519.PublicKey)
	_, other, _ := ed25519.GenerateKey(nil)
	good := Sign(key, Grant{Box: "b", Pod: "p"})
	payload, sig, _ := strings.Cut(good, ".")
	forgedPayload := base64.RawURLEncoding.EncodeToString([]byte("b2/p")) + "." + sig
	_, otherSig, _ := strings.Cut(Sign(other, Grant{Box: "b", Pod: "p"}), ".")
	cases := []struct {
		name, credential, err string
	}{
		{"signed by the gateway", good, ""},
		{"signed by another key", Sign(other, Grant{Box: "b", Pod: "p"}), "not signed"},
		{"another grant under the same signature", forgedPayload, "not signed"},
		{"no signature", payload, "malformed"},
		{"not base64", "%%%.%%%", "malformed"},
		{"no box", base64.RawURLEncoding.EncodeToString([]byte("/p")) + "." + sig, "malformed"},
		{"empty", "", "malformed"},
		{"signed by the gateway's old key, then this one", Sign(other, Grant{Box: "b", Pod: "p"}) + "." + sig, ""},
		{"signed by this key, then another", good + "." + otherSig, ""},
		{"signed twice by other keys", Sign(other, Grant{Box: "b", Pod: "p"}) + "." + otherSig, "not signed"},
		{"too many signatures", good + strings.Repeat("."+sig, 4), "malformed"},
		{"an empty signature among them", payload + ".." + sig, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(pub, c.credential)
			if c.err == "" {
				if err != nil || g != (Grant{Box: "b", Pod: "p"}) {
					t.Fatalf("got %v, %v", g, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	if _, err := ParsePublicKey(vectorPublicKey); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(make([]byte, 31))} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func status(err error) int {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Status
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestGuard(t *testing.T) {
	key := vectorKey(t)
	pub := key.Public().(ed25519.PublicKey)
	_, forger, _ := ed25519.GenerateKey(nil)
	sign := func(box, pod string) string { return Sign(key, Grant{Box: box, Pod: pod}) }

	g := NewGuard(pub, "pod-1")
	// A standby: nothing but a valid /init.
	if s := status(g.Check(sign("box-a", "pod-1"))); s != 403 {
		t.Fatalf("uninitialised Check: %d, want 403", s)
	}
	steps := []struct {
		name   string
		bind   bool
		cred   string
		status int
	}{
		{"init without a credential", true, "", 401},
		{"init with a forged credential", true, Sign(forger, Grant{Box: "box-a", Pod: "pod-1"}), 401},
		{"init for another Pod", true, sign("box-a", "pod-2"), 403},
		{"init for box A", true, sign("box-a", "pod-1"), 0},
		{"a call for box A", false, sign("box-a", "pod-1"), 0},
		{"a call without a credential", false, "", 401},
		{"a call for box B on this Pod", false, sign("box-b", "pod-1"), 403},
		{"a call for box A on another Pod", false, sign("box-a", "pod-2"), 403},
		{"init for box B", true, sign("box-b", "pod-1"), 403},
		{"init for box A again", true, sign("box-a", "pod-1"), 0},
	}
	for _, s := range steps {
		var err error
		if s.bind {
			err = g.Bind(s.cred)
		} else {
			err = g.Check(s.cred)
		}
		if got := status(err); got != s.status {
			t.Fatalf("%s: %d (%v), want %d", s.name, got, err, s.status)
		}
	}
	if g.Box() != "box-a" {
		t.Fatalf("bound to %q", g.Box())
	}
}
