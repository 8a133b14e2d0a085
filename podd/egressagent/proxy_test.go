package egressagent

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// proxyFor serves one port class on loopback for the sandbox 127.0.0.1 with the policy, as if
// each connection had been redirected from dst.
func proxyFor(t *testing.T, class PortClass, policy *Policy, dst netip.AddrPort, neverByName ...string) string {
	return proxyWith(t, nil, class, policy, dst, neverByName...)
}

func proxyWith(t *testing.T, metrics *Metrics, class PortClass, policy *Policy, dst netip.AddrPort, neverByName ...string) string {
	t.Helper()
	p := &Proxy{Metrics: metrics}
	for _, n := range neverByName {
		p.NeverByName = append(p.NeverByName, netip.MustParsePrefix(n))
	}
	return startProxy(t, p, class, policy, dst)
}

// startProxy serves p on loopback for one port class, for the sandbox 127.0.0.1 with the policy,
// as if each connection had been redirected from dst.
func startProxy(t *testing.T, p *Proxy, class PortClass, policy *Policy, dst netip.AddrPort) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p.Policy = func(src netip.Addr) (Policy, bool) {
		if policy == nil || src != netip.MustParseAddr("127.0.0.1") {
			return Policy{}, false
		}
		return *policy, true
	}
	p.OriginalDestination = func(net.Conn) (netip.AddrPort, error) { return dst, nil }
	p.PeekTimeout = time.Second
	p.Log = t.Logf
	go func() { _ = p.Serve(l, class) }()
	return l.Addr().String()
}

func mustParse(t *testing.T, s Spec) *Policy {
	t.Helper()
	p, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func addrPort(t *testing.T, url string) netip.AddrPort {
	t.Helper()
	return netip.MustParseAddrPort(strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://"))
}

// unreachable stands for the address the sandbox resolved: a domain match dials the name instead.
func unreachable(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), port)
}

func getVia(proxy, serverName string, useTLS bool) (string, error) {
	conn, err := net.DialTimeout("tcp", proxy, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var rw net.Conn = conn
	if useTLS {
		tc := tls.Client(conn, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		rw = tc
	}
	if _, err := fmt.Fprintf(rw, "GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", serverName); err != nil {
		return "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(rw), nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return string(body), err
}

func echoHost(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "saw "+r.Host+r.URL.Path)
}

func TestProxyTLSByServerName(t *testing.T) {
	server := httptest.NewTLSServer(http.HandlerFunc(echoHost))
	defer server.Close()
	port := addrPort(t, server.URL).Port()
	allowLocalhost := mustParse(t, Spec{AllowOut: []string{"localhost"}, DenyOut: []string{AllTraffic}})

	// Allowed by name: dialed as the proxy resolves localhost, not at the address the sandbox used.
	body, err := getVia(proxyFor(t, ClassTLS, allowLocalhost, unreachable(port)), "localhost", true)
	if err != nil || body != "saw localhost/x" {
		t.Fatalf("allowed name: %q %v", body, err)
	}
	// A name that resolves into a network never dialed by name grants nothing.
	if body, err := getVia(proxyFor(t, ClassTLS, allowLocalhost, unreachable(port), "127.0.0.0/8"), "localhost", true); err == nil {
		t.Fatalf("a name resolving to loopback was reached: %q", body)
	}
	// Another name is refused, even at an address that would be reached.
	if body, err := getVia(proxyFor(t, ClassTLS, allowLocalhost, addrPort(t, server.URL)), "other.test", true); err == nil {
		t.Fatalf("another name was reached: %q", body)
	}
	// No name at all (not TLS on 443): only addresses decide, and the bytes pass unchanged.
	plain := httptest.NewServer(http.HandlerFunc(echoHost))
	defer plain.Close()
	allowLoopback := mustParse(t, Spec{AllowOut: []string{"127.0.0.1"}, DenyOut: []string{AllTraffic}})
	if body, err := getVia(proxyFor(t, ClassTLS, allowLoopback, addrPort(t, plain.URL)), "x.test", false); err != nil || body != "saw x.test/x" {
		t.Fatalf("no server name, allowed address: %q %v", body, err)
	}
}

func TestProxyHTTPByHost(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(echoHost))
	defer server.Close()
	port := addrPort(t, server.URL).Port()
	policy := mustParse(t, Spec{AllowOut: []string{"*.localhost", "localhost"}, DenyOut: []string{AllTraffic}})
	if body, err := getVia(proxyFor(t, ClassHTTP, policy, unreachable(port)), "localhost", false); err != nil || body != "saw localhost/x" {
		t.Fatalf("allowed host: %q %v", body, err)
	}
	if body, err := getVia(proxyFor(t, ClassHTTP, policy, addrPort(t, server.URL)), "elsewhere.test", false); err == nil {
		t.Fatalf("another host was reached: %q", body)
	}
	// No policy for the source: closed whatever it asks.
	if body, err := getVia(proxyFor(t, ClassHTTP, nil, addrPort(t, server.URL)), "localhost", false); err == nil {
		t.Fatalf("an unknown source was served: %q", body)
	}
}

func TestProxyOtherPortsByAddressServerFirst(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-test\r\n")
			c.Close()
		}
	}()
	dst := netip.MustParseAddrPort(l.Addr().String())
	banner := func(proxy string) (string, error) {
		c, err := net.DialTimeout("tcp", proxy, 2*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	allowed := mustParse(t, Spec{AllowOut: []string{"127.0.0.1"}, DenyOut: []string{AllTraffic}})
	if got, err := banner(proxyFor(t, ClassOther, allowed, dst)); err != nil || got != "SSH-2.0-test\r\n" {
		t.Fatalf("server-first protocol: %q %v", got, err)
	}
	denied := mustParse(t, Spec{DenyOut: []string{"127.0.0.0/8"}})
	if got, _ := banner(proxyFor(t, ClassOther, denied, dst)); got != "" {
		t.Fatalf("a denied address answered: %q", got)
	}
}

func TestProxyCountsItsDecisions(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(echoHost))
	defer server.Close()
	m := NewMetrics()
	policy := mustParse(t, Spec{AllowOut: []string{"localhost"}, DenyOut: []string{AllTraffic}})
	proxy := proxyWith(t, m, ClassHTTP, policy, unreachable(addrPort(t, server.URL).Port()))
	_, _ = getVia(proxy, "localhost", false)
	_, _ = getVia(proxy, "other.test", false)
	_, _ = getVia(proxy, "other.test", false)
	count := func(verdict, match string) float64 {
		return testutil.ToFloat64(m.connections.WithLabelValues(verdict, match, "http"))
	}
	if count("allowed", "domain") != 1 || count("refused", "cidr") != 2 {
		t.Errorf("allowed %v, refused %v", count("allowed", "domain"), count("refused", "cidr"))
	}
}
