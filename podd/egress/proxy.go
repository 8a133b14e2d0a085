package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Proxy is the egress sidecar: an HTTP proxy (CONNECT, and requests in absolute form) that
// reaches only the allowed hosts, from sockets that carry the mark the rules let out.
type Proxy struct {
	allow     []string
	dialer    *net.Dialer
	transport *http.Transport
}

// NewProxy reaches the hosts in allow ("example.com", or "*.example.com" for its subdomains;
// none: any host), marking its sockets with mark (0: none).
func NewProxy(allow []string, mark uint32) *Proxy {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if mark != 0 {
		d.Control = markControl(mark)
		// Its DNS queries leave through the same rules.
		d.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second, Control: markControl(mark)}).DialContext(ctx, network, address)
		}}
	}
	var clean []string
	for _, h := range allow {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			clean = append(clean, h)
		}
	}
	return &Proxy{
		allow:  clean,
		dialer: d,
		transport: &http.Transport{
			DialContext:         d.DialContext,
			Proxy:               nil,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// Allowed says whether the proxy may reach the host.
func (p *Proxy) Allowed(host string) bool {
	if len(p.allow) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range p.allow {
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

// hopByHop are the headers of one connection, never passed on (RFC 9110, 7.6.1).
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || (r.URL.Scheme != "http") {
		http.Error(w, "cubepod-egress: expected a proxy request (CONNECT, or an absolute http:// URL)", http.StatusBadRequest)
		return
	}
	if !p.Allowed(r.URL.Hostname()) {
		http.Error(w, "cubepod-egress: "+r.URL.Hostname()+" is not an allowed host", http.StatusForbidden)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	res, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "cubepod-egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for _, h := range hopByHop {
		res.Header.Del(h)
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	_, _ = io.Copy(w, res.Body)
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, "cubepod-egress: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if !p.Allowed(host) {
		http.Error(w, "cubepod-egress: "+host+" is not an allowed host", http.StatusForbidden)
		return
	}
	upstream, err := p.dialer.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, "cubepod-egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	_, _ = client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	var once sync.Once
	done := func() { once.Do(func() { client.Close(); upstream.Close() }) }
	go func() {
		defer done()
		// What the client sent after its CONNECT, already read into the buffer, goes first.
		_, _ = io.Copy(upstream, buffered)
	}()
	_, _ = io.Copy(client, upstream)
	done()
}
