package daemon

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"cubepod.local/podd/control"
	"cubepod.local/podd/core"
	"cubepod.local/podd/spec/process"
	"cubepod.local/podd/spec/process/processconnect"
)

const pod, box = "pod-uid", "box-uid"

type fixture struct {
	url        string
	credential string
	key        ed25519.PrivateKey
}

func start(t *testing.T, configure ...func(*Daemon)) *fixture {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := New(control.NewGuard(pub, pod), core.NewSession(map[string]string{"E2B_SANDBOX": "true"}))
	for _, c := range configure {
		c(d)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, credential: control.Sign(key, control.Grant{Box: box, Pod: pod}), key: key}
}

func (f *fixture) call(t *testing.T, method, path string, body any, header ...string) *http.Response {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, f.url+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestOnlyTheGatewayInitialises(t *testing.T) {
	f := start(t)
	if res := f.call(t, "GET", "/health", nil); res.StatusCode != 204 {
		t.Fatalf("health: %d", res.StatusCode)
	}
	init := map[string]any{"accessToken": "tok", "envVars": map[string]string{"A": "1"}}
	if res := f.call(t, "POST", "/init", init); res.StatusCode != 401 {
		t.Fatalf("init without a credential: %d", res.StatusCode)
	}
	other := control.Sign(f.key, control.Grant{Box: box, Pod: "another-pod"})
	if res := f.call(t, "POST", "/init", init, control.Header, other); res.StatusCode != 403 {
		t.Fatalf("init for another Pod: %d", res.StatusCode)
	}
	if res := f.call(t, "GET", "/envs", nil, control.Header, f.credential); res.StatusCode != 403 {
		t.Fatalf("a standby serves nothing before /init: %d", res.StatusCode)
	}
	if res := f.call(t, "POST", "/init", init, control.Header, f.credential); res.StatusCode != 204 || res.Header.Get("X-Envd-Version") != Version {
		t.Fatalf("init: %d %v", res.StatusCode, res.Header)
	}
	if res := f.call(t, "GET", "/envs", nil, control.Header, f.credential); res.StatusCode != 401 {
		t.Fatalf("no access token: %d", res.StatusCode)
	}
	res := f.call(t, "GET", "/envs", nil, control.Header, f.credential, "X-Access-Token", "tok")
	var envs map[string]string
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&envs) != nil || envs["A"] != "1" || envs["E2B_SANDBOX"] != "true" {
		t.Fatalf("envs: %d %v", res.StatusCode, envs)
	}
	res = f.call(t, "GET", "/metrics", nil, control.Header, f.credential, "X-Access-Token", "tok")
	var m Metrics
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&m) != nil || m.CPUCount == 0 || m.MemTotal == 0 || m.DiskTotal == 0 {
		t.Fatalf("metrics: %d %+v", res.StatusCode, m)
	}
	if res := f.call(t, "POST", "/init", "not an object", control.Header, f.credential); res.StatusCode != 400 {
		t.Fatalf("a bad body: %d", res.StatusCode)
	}
}

func TestRPCRefusalsAreConnectErrors(t *testing.T) {
	f := start(t)
	if res := f.call(t, "POST", "/init", map[string]any{"accessToken": "tok"}, control.Header, f.credential); res.StatusCode != 204 {
		t.Fatalf("init: %d", res.StatusCode)
	}
	list := func(header ...string) error {
		c := processconnect.NewProcessClient(http.DefaultClient, f.url, connect.WithProtoJSON())
		req := connect.NewRequest(&process.ListRequest{})
		for i := 0; i+1 < len(header); i += 2 {
			req.Header().Set(header[i], header[i+1])
		}
		_, err := c.List(context.Background(), req)
		return err
	}
	codeOf := func(err error) connect.Code {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return ce.Code()
		}
		return 0
	}
	if err := list(control.Header, f.credential, "X-Access-Token", "tok"); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		header []string
		want   connect.Code
	}{
		"no credential": {[]string{"X-Access-Token", "tok"}, connect.CodeUnauthenticated},
		"no token":      {[]string{control.Header, f.credential}, connect.CodeUnauthenticated},
		"unknown user":  {[]string{control.Header, f.credential, "X-Access-Token", "tok", "Authorization", "Basic bm9ib2R5LWF0LWFsbDo="}, connect.CodeUnauthenticated},
		"another box":   {[]string{control.Header, control.Sign(f.key, control.Grant{Box: "other", Pod: pod}), "X-Access-Token", "tok"}, connect.CodePermissionDenied},
	} {
		if got := codeOf(list(tc.header...)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestDiskIsTheFilesystemsOwnOrNone(t *testing.T) {
	used, total := disk(t.TempDir())
	if total == 0 || used > total || total > maxFigure {
		t.Errorf("a real filesystem: used %d of %d", used, total)
	}
	if used, total := disk("/no/such/path"); used != 0 || total != 0 {
		t.Errorf("no filesystem: used %d of %d", used, total)
	}
}

func TestInitInstallsTheEgressCA(t *testing.T) {
	root := t.TempDir()
	f := start(t, func(d *Daemon) { d.root = root })
	if res := f.call(t, "POST", "/init", map[string]any{"accessToken": "tok", "caBundle": "not a certificate"},
		control.Header, f.credential); res.StatusCode != 400 {
		t.Fatalf("a bad caBundle: %d", res.StatusCode)
	}
	// Refused whole: the token of that /init was not taken.
	if res := f.call(t, "GET", "/envs", nil, control.Header, f.credential); res.StatusCode != 200 {
		t.Fatalf("after a refused /init: %d", res.StatusCode)
	}
	ca := egressCA(t)
	if res := f.call(t, "POST", "/init", map[string]any{"caBundle": ca}, control.Header, f.credential); res.StatusCode != 204 {
		t.Fatalf("init: %d", res.StatusCode)
	}
	if got, _ := os.ReadFile(filepath.Join(root, core.EgressCAFile)); string(got) != ca {
		t.Errorf("the CA file holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, core.SystemBundle)); string(got) != ca {
		t.Errorf("the system bundle holds %q", got)
	}
	if res := f.call(t, "POST", "/init", map[string]any{"caBundle": ""}, control.Header, f.credential); res.StatusCode != 204 {
		t.Fatalf("init removing it: %d", res.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(root, core.EgressCAFile)); !os.IsNotExist(err) {
		t.Errorf("the CA file after its removal: %v", err)
	}
}

// egressCA is a CA of the egress agent's kind, PEM.
func egressCA(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"CubePod egress"}},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
