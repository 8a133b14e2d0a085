package egressagent

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echoHeaders answers with the request's headers and Host, as the local internet's hosts do.
var echoHeaders = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "headers": r.Header})
})

type echoed struct {
	Host    string              `json:"host"`
	Headers map[string][]string `json:"headers"`
}

// interceptSetup is a sandbox Pod whose rule for "localhost" sets Authorization from a secret,
// and an upstream "localhost" serving TLS with a certificate of another CA the node trusts.
type interceptSetup struct {
	authority *Authority
	sandboxCA *x509.CertPool
	upstream  *httptest.Server
	policy    *Policy
	proxy     func(class PortClass) string
}

func newInterceptSetup(t *testing.T, secrets map[string]string) *interceptSetup {
	t.Helper()
	a, err := LoadAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	upstreamCA, _ := a.CA("the-internet", nil)
	upstreamCert, err := a.Leaf("the-internet", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewUnstartedServer(echoHeaders)
	upstream.TLS = &tls.Config{Certificates: []tls.Certificate{*upstreamCert}}
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	node := x509.NewCertPool()
	node.AppendCertsFromPEM(upstreamCA)
	sandboxCA, _ := a.CA("sandbox-pod", nil)
	trusted := x509.NewCertPool()
	trusted.AppendCertsFromPEM(sandboxCA)
	policy := mustParse(t, Spec{Rules: map[string][]Rule{"localhost": {{Transform: &Transform{Headers: map[string]string{
		"Authorization": "Bearer ${e2b.secrets.key}", "X-Team": "a",
	}}}}}})
	policy.Namespace, policy.PodUID = "tenant", "sandbox-pod"
	transforms := &Transforms{
		Authority: a,
		RootCAs:   node,
		Secrets: func(ns string) func(string) (string, error) {
			return func(name string) (string, error) {
				if v, ok := secrets[name]; ok && ns == "tenant" {
					return v, nil
				}
				return "", fmt.Errorf("secret %s: not a key of Secret %s/cubepod-egress-secrets", name, ns)
			}
		},
	}
	s := &interceptSetup{authority: a, sandboxCA: trusted, upstream: upstream, policy: policy}
	s.proxy = func(class PortClass) string {
		return startProxy(t, &Proxy{Transforms: transforms}, class, policy, addrPort(t, upstream.URL))
	}
	return s
}

// sandboxClient is the sandbox's HTTPS client: it trusts its CA and dials the proxy for localhost.
func (s *interceptSetup) sandboxClient(proxyAddr string, protos ...string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, proxyAddr)
		},
		TLSClientConfig: &tls.Config{RootCAs: s.sandboxCA, NextProtos: protos},
	}}
}

func getEcho(t *testing.T, c *http.Client, url string, header http.Header) (int, echoed, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var e echoed
	_ = json.Unmarshal(body, &e)
	return res.StatusCode, e, string(body)
}

func TestInterceptSetsARulesHeadersOverTLS(t *testing.T) {
	s := newInterceptSetup(t, map[string]string{"key": "s3cr3t"})
	proxy := s.proxy(ClassTLS)
	port := addrPort(t, s.upstream.URL).Port()
	c := s.sandboxClient(proxy)
	url := fmt.Sprintf("https://localhost:%d/", port)

	status, e, body := getEcho(t, c, url, http.Header{"Authorization": {"Bearer mine"}, "X-Forwarded-For": {"1.2.3.4"}})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := e.Headers["Authorization"]; len(got) != 1 || got[0] != "Bearer s3cr3t" {
		t.Errorf("the upstream saw Authorization %q: the rule's replaces the sandbox's", got)
	}
	if got := e.Headers["X-Team"]; len(got) != 1 || got[0] != "a" {
		t.Errorf("X-Team %q", got)
	}
	if got := e.Headers["X-Forwarded-For"]; len(got) != 1 || got[0] != "1.2.3.4" {
		t.Errorf("the sandbox's X-Forwarded-For became %q: the proxy adds none", got)
	}
	if !strings.HasPrefix(e.Host, "localhost:") {
		t.Errorf("Host %q", e.Host)
	}
	// The same connection, a second request: still transformed.
	if status, e, _ := getEcho(t, c, url, nil); status != 200 || e.Headers["Authorization"][0] != "Bearer s3cr3t" {
		t.Errorf("second request: %d %v", status, e.Headers)
	}

	// A request for another name on the connection: refused, and nothing sent on.
	conn, err := tls.Dial("tcp", proxy, &tls.Config{ServerName: "localhost", RootCAs: s.sandboxCA})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: elsewhere.example\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d", res.StatusCode)
	}

	// A client that speaks HTTP/2 only is refused at the handshake.
	if _, err := tls.Dial("tcp", proxy, &tls.Config{ServerName: "localhost", RootCAs: s.sandboxCA, NextProtos: []string{"h2"}}); err == nil {
		t.Error("an h2-only client was served")
	}
	// The certificate the sandbox is served is its own CA's, for the name it dialed.
	state := conn.ConnectionState()
	if got := state.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "localhost" {
		t.Errorf("served %v", got)
	}
}

func TestInterceptFailsWithoutItsSecret(t *testing.T) {
	s := newInterceptSetup(t, map[string]string{})
	proxy := s.proxy(ClassTLS)
	url := fmt.Sprintf("https://localhost:%d/", addrPort(t, s.upstream.URL).Port())
	status, e, body := getEcho(t, s.sandboxClient(proxy), url, nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "secret key: not a key of Secret tenant/cubepod-egress-secrets") {
		t.Fatalf("%d %s", status, body)
	}
	if e.Headers != nil {
		t.Error("the request was sent on")
	}
}

func TestInterceptVerifiesTheUpstream(t *testing.T) {
	s := newInterceptSetup(t, map[string]string{"key": "s3cr3t"})
	// An upstream for the right name, whose CA the node does not trust.
	stranger, err := s.authority.Leaf("a-stranger", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	untrusted := httptest.NewUnstartedServer(echoHeaders)
	untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{*stranger}}
	untrusted.StartTLS()
	defer untrusted.Close()
	p := &Proxy{Transforms: &Transforms{Authority: s.authority, RootCAs: x509.NewCertPool(),
		Secrets: func(string) func(string) (string, error) {
			return func(string) (string, error) { return "s3cr3t", nil }
		}}}
	proxy := startProxy(t, p, ClassTLS, s.policy, addrPort(t, untrusted.URL))
	url := fmt.Sprintf("https://localhost:%d/", addrPort(t, untrusted.URL).Port())
	status, _, body := getEcho(t, s.sandboxClient(proxy), url, nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "certificate signed by unknown authority") {
		t.Fatalf("%d %s", status, body)
	}
}

func TestInterceptPlainHTTP(t *testing.T) {
	s := newInterceptSetup(t, map[string]string{"key": "s3cr3t"})
	plain := httptest.NewServer(echoHeaders)
	defer plain.Close()
	p := &Proxy{Transforms: &Transforms{Authority: s.authority,
		Secrets: func(string) func(string) (string, error) {
			return func(string) (string, error) { return "s3cr3t", nil }
		}}}
	proxy := startProxy(t, p, ClassHTTP, s.policy, addrPort(t, plain.URL))
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, proxy)
	}}}
	status, e, body := getEcho(t, c, fmt.Sprintf("http://localhost:%d/", addrPort(t, plain.URL).Port()), nil)
	if status != 200 || e.Headers["Authorization"][0] != "Bearer s3cr3t" {
		t.Fatalf("%d %s", status, body)
	}
}

func TestARuleWithoutTransformsIsClosed(t *testing.T) {
	upstream := httptest.NewServer(echoHeaders)
	defer upstream.Close()
	policy := mustParse(t, Spec{Rules: map[string][]Rule{"localhost": {{}}}})
	proxy := startProxy(t, &Proxy{}, ClassHTTP, policy, addrPort(t, upstream.URL))
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, proxy)
	}}}
	if _, err := c.Get(fmt.Sprintf("http://localhost:%d/", addrPort(t, upstream.URL).Port())); err == nil {
		t.Error("a connection a rule names went out with no one to apply it")
	}
}
