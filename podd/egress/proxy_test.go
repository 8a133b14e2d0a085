package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestAllowed(t *testing.T) {
	p := NewProxy([]string{"pypi.org", " *.GitHub.com ", ""}, 0)
	for host, want := range map[string]bool{
		"pypi.org": true, "PyPI.org.": true, "api.github.com": true, "a.b.github.com": true,
		"github.com": false, "evilpypi.org": false, "pypi.org.evil": false, "127.0.0.1": false,
	} {
		if got := p.Allowed(host); got != want {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
	if !NewProxy(nil, 0).Allowed("anything.example") {
		t.Error("no list: every host is allowed")
	}
}

func TestProxy(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "origin saw "+r.URL.Path+" proxy-auth="+r.Header.Get("Proxy-Authorization"))
	}))
	defer origin.Close()
	target, _ := url.Parse(origin.URL)
	proxy := httptest.NewServer(NewProxy([]string{"127.0.0.1"}, 0))
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)

	// A plain http:// request through the proxy, its Proxy-Authorization not passed on.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	req, _ := http.NewRequest("GET", origin.URL+"/a", nil)
	req.Header.Set("Proxy-Authorization", "Basic eDp5")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "origin saw /a proxy-auth=" {
		t.Fatalf("forwarded: %q", body)
	}

	// A tunnel, as HTTPS clients use it.
	conn, err := net.Dial("tcp", proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "CONNECT "+target.Host+" HTTP/1.1\r\nHost: "+target.Host+"\r\n\r\n"+
		"GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	r := bufio.NewReader(conn)
	established, _ := http.ReadResponse(r, nil)
	if established.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", established.StatusCode)
	}
	inner, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(inner.Body)
	if !strings.HasPrefix(string(body), "origin saw /tunnelled") {
		t.Fatalf("tunnelled: %q", body)
	}

	// Hosts outside the list, and requests that are not a proxy's.
	denied := NewProxy([]string{"pypi.org"}, 0)
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"GET", origin.URL + "/x", 403},
		{"CONNECT", target.Host, 403},
		{"GET", "/not-absolute", 400},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, c.target, nil)
		if c.method == "CONNECT" {
			req.Host = c.target
		}
		denied.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, rec.Code, c.status)
		}
	}
}
