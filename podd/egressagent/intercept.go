package egressagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Transforms apply rules: the proxy hands them a sandbox's allowed connection to a domain a rule
// names, and they serve it as that domain (TLS with a leaf of the sandbox's CA, or plain HTTP),
// set the rule's headers on each request, secrets resolved, and send it on to the domain as the
// node resolves it, verifying its certificate. The sandbox never holds the secrets; the domain
// sees them.
type Transforms struct {
	// Authority mints the certificates the sandbox is served.
	Authority *Authority
	// Secrets gives a namespace's secrets by name.
	Secrets func(namespace string) func(name string) (string, error)
	// RootCAs verify the domains' certificates (nil: the node's).
	RootCAs *x509.CertPool
}

// intercepted is one connection the proxy handed over, with what decided it.
type intercepted struct {
	conn   net.Conn
	tls    bool
	host   string // the name the connection is for (SNI, or the first request's Host)
	port   uint16
	policy Policy
	rule   *HostRule
	match  Match
}

// serve answers the connection's requests until it ends.
func (t *Transforms) serve(p *Proxy, c intercepted) {
	conn := c.conn
	if c.tls {
		server := tls.Server(conn, &tls.Config{
			MinVersion: tls.VersionTLS12,
			// HTTP/1.1 only: a client that speaks nothing else is refused at the handshake.
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return t.Authority.Leaf(c.policy.PodUID, c.host)
			},
		})
		_ = server.SetDeadline(time.Now().Add(10 * time.Second))
		if err := server.Handshake(); err != nil {
			p.logf("egress: %s (rules): TLS from the sandbox: %v", c.host, err)
			return
		}
		_ = server.SetDeadline(time.Time{})
		conn = server
	}
	scheme := "http"
	if c.tls {
		scheme = "https"
	}
	upstream := &http.Transport{
		DialContext: func(ctx context.Context, _, address string) (net.Conn, error) {
			return p.dialByName(ctx, address, func(ip netip.Addr) error {
				// Allowed by the address the sandbox dialed: the name's own addresses must be
				// allowed too.
				if c.match != MatchDomain {
					if ok, _ := c.policy.Verdict("", ip); !ok {
						return fmt.Errorf("%s resolves to %s, which the sandbox may not reach", c.host, ip)
					}
				}
				return nil
			})
		},
		TLSClientConfig:     &tls.Config{ServerName: c.host, RootCAs: t.RootCAs, MinVersion: tls.VersionTLS12},
		DisableCompression:  true,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	defer upstream.CloseIdleConnections()
	target := scheme + "://" + net.JoinHostPort(c.host, strconv.Itoa(int(c.port)))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = scheme, net.JoinHostPort(c.host, strconv.Itoa(int(c.port)))
			r.Out.Host = r.In.Host
			// The sandbox's own forwarding headers go on as it sent them; the proxy adds none.
			for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := r.In.Header[name]; ok {
					r.Out.Header[name] = v
				}
			}
		},
		Transport: upstream,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.logf("egress: %s (rules): %v", target, err)
			refuse(w, http.StatusBadGateway, fmt.Sprintf("egress: %s: %v", c.host, err))
		},
	}
	var handlers sync.WaitGroup
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		if name := hostname(r.Host); !strings.EqualFold(name, c.host) {
			// The rule, the certificate and the destination were chosen by the connection's
			// name: a request for another would take its headers elsewhere.
			refuse(w, http.StatusMisdirectedRequest, fmt.Sprintf("egress: this connection is for %s, not %s", c.host, name))
			return
		}
		secrets := t.Secrets(c.policy.Namespace)
		for _, h := range c.rule.Headers {
			value, err := Expand(h.Value, secrets)
			if err == nil && !httpguts.ValidHeaderFieldValue(value) {
				err = errors.New("a secret's value is not a valid header value")
			}
			if err != nil {
				p.logf("egress: %s (rules): header %s: %v", c.host, h.Name, err)
				refuse(w, http.StatusBadGateway, fmt.Sprintf("egress: %s: header %s: %v", c.host, h.Name, err))
				return
			}
			r.Header.Set(h.Name, value)
		}
		proxy.ServeHTTP(w, r)
	})
	listener := newOneConnListener(conn)
	server := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateClosed || state == http.StateHijacked {
				listener.Close()
			}
		},
	}
	_ = server.Serve(listener)
	// A hijacked connection (an upgrade) is still being served by its handler.
	handlers.Wait()
}

// refuse answers a request the proxy does not send on, in E2B's error shape.
func refuse(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": message})
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.TrimSuffix(h, ".")
	}
	return strings.TrimSuffix(hostport, ".")
}

// replayConn reads what the proxy peeked before the rest of the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func newReplayConn(conn net.Conn, peeked []byte) net.Conn {
	return &replayConn{Conn: conn, r: io.MultiReader(bytes.NewReader(peeked), conn)}
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands out one connection, then waits until it is closed.
type oneConnListener struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	stop sync.Once
}

func newOneConnListener(conn net.Conn) *oneConnListener {
	return &oneConnListener{conn: conn, done: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.stop.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
