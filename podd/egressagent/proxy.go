package egressagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PortClass is what the proxy reads from a connection before deciding it, by the port the
// sandbox dialed (E2B's three listeners).
type PortClass int

const (
	// ClassHTTP reads the first request's Host (port 80).
	ClassHTTP PortClass = iota
	// ClassTLS reads the ClientHello's server name (port 443).
	ClassTLS
	// ClassOther reads nothing, so that protocols where the server speaks first (SSH, SMTP) do not
	// stall: only addresses decide.
	ClassOther
)

func (c PortClass) String() string {
	return [...]string{"http", "tls", "other"}[c]
}

// Proxy serves the connections the node redirects from policed sandboxes.
type Proxy struct {
	// Policy gives the policy of the sandbox at a source address; false: not a sandbox the agent
	// polices, and the connection is closed.
	Policy func(src netip.Addr) (Policy, bool)
	// OriginalDestination is where the sandbox meant to connect (SO_ORIGINAL_DST by default).
	OriginalDestination func(net.Conn) (netip.AddrPort, error)
	// NeverByName are the networks a connection dialed by name must not reach: the cluster's own
	// and the private ranges, so that an allowed name that resolves inside them grants nothing.
	NeverByName []netip.Prefix
	// Resolver resolves allowed names (nil: the system's).
	Resolver *net.Resolver
	// Source is the address the proxy dials from (invalid: the kernel's choice), where the node
	// routes its sandboxes' traffic by source.
	Source netip.Addr
	// PeekTimeout bounds the wait for a Host or server name (0: five seconds).
	PeekTimeout time.Duration
	// Log is told each refusal (nil: the standard logger).
	Log func(format string, args ...any)
	// Metrics counts its decisions (nil: none).
	Metrics *Metrics
	// Transforms apply the rules of a connection's domain (nil: a connection a rule names is
	// closed, never sent on without its headers).
	Transforms *Transforms
}

// Serve accepts connections of one port class until the listener closes.
func (p *Proxy) Serve(l net.Listener, class PortClass) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go p.handle(conn, class)
	}
}

func (p *Proxy) handle(conn net.Conn, class PortClass) {
	defer conn.Close()
	src, err := addrOf(conn.RemoteAddr())
	if err != nil {
		return
	}
	policy, ok := p.Policy(src)
	if !ok {
		p.Metrics.decided(false, "unknown", class)
		p.logf("egress: %s is not a sandbox this node polices; closed", src)
		return
	}
	originalDst := p.OriginalDestination
	if originalDst == nil {
		originalDst = OriginalDestination
	}
	dst, err := originalDst(conn)
	if err != nil {
		p.logf("egress: %s: no original destination: %v", src, err)
		return
	}
	var host string
	var peeked []byte
	if class != ClassOther {
		timeout := p.PeekTimeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		_ = conn.SetReadDeadline(time.Now().Add(timeout))
		if class == ClassTLS {
			host, peeked = peekServerName(conn)
		} else {
			host, peeked = peekHost(conn)
		}
		_ = conn.SetReadDeadline(time.Time{})
	}
	allowed, match := policy.Verdict(host, dst.Addr())
	p.Metrics.decided(allowed, match, class)
	if !allowed {
		p.logf("egress: refused %s -> %s (host %q, by %s)", src, dst, host, match)
		return
	}
	if rule := policy.RuleFor(host); rule != nil && class != ClassOther {
		if p.Transforms == nil {
			p.logf("egress: %s -> %s (host %q): rules are not applied here; closed", src, dst, host)
			return
		}
		p.Transforms.serve(p, intercepted{conn: newReplayConn(conn, peeked), tls: class == ClassTLS,
			host: host, port: dst.Port(), policy: policy, rule: rule, match: match})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var upstream net.Conn
	if match == MatchDomain {
		upstream, err = p.dialByName(ctx, net.JoinHostPort(host, strconv.Itoa(int(dst.Port()))), nil)
	} else {
		upstream, err = p.dialer().DialContext(ctx, "tcp", dst.String())
	}
	cancel()
	if err != nil {
		p.logf("egress: %s -> %s (host %q): %v", src, dst, host, err)
		return
	}
	defer upstream.Close()
	if len(peeked) > 0 {
		if _, err := upstream.Write(peeked); err != nil {
			return
		}
	}
	splice(conn, upstream)
}

// dialByName connects to an allowed name as the proxy resolves it, never to what the sandbox
// resolved (its /etc/hosts is its own), and refuses addresses in NeverByName, or that allowed
// refuses (when given), before connecting.
func (p *Proxy) dialByName(ctx context.Context, address string, allowed func(netip.Addr) error) (net.Conn, error) {
	d := p.dialer()
	d.Resolver = p.Resolver
	d.ControlContext = func(_ context.Context, _, resolved string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(resolved)
		if err != nil {
			return err
		}
		for _, prefix := range p.NeverByName {
			if prefix.Contains(ap.Addr().Unmap()) {
				return fmt.Errorf("%s resolves to %s, inside %s", address, ap.Addr(), prefix)
			}
		}
		if allowed != nil {
			return allowed(ap.Addr().Unmap())
		}
		return nil
	}
	return d.DialContext(ctx, "tcp", address)
}

func (p *Proxy) dialer() *net.Dialer {
	d := &net.Dialer{}
	if p.Source.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: p.Source.AsSlice()}
	}
	return d
}

func (p *Proxy) logf(format string, args ...any) {
	if p.Log != nil {
		p.Log(format, args...)
		return
	}
	log.Printf(format, args...)
}

// splice copies both ways until both sides are done, passing on each half-close.
func splice(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// errPeeked stops the TLS handshake once the ClientHello is read.
var errPeeked = errors.New("peeked")

// peekServerName reads a TLS ClientHello's server name with crypto/tls's own parser; it returns
// every byte it read, to be sent on. No name (no SNI, or not TLS): "".
func peekServerName(conn net.Conn) (string, []byte) {
	var seen bytes.Buffer
	var name string
	ro := readOnlyConn{Conn: conn, r: io.TeeReader(conn, &seen)}
	_ = tls.Server(ro, &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		name = hello.ServerName
		return nil, errPeeked
	}}).Handshake()
	return name, seen.Bytes()
}

// peekHost reads the first HTTP request's head for its Host (without a port); it returns every
// byte it read, to be sent on. Not HTTP: "".
func peekHost(conn net.Conn) (string, []byte) {
	var seen bytes.Buffer
	req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(conn, &seen)))
	if err != nil {
		return "", seen.Bytes()
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host, seen.Bytes()
}

// readOnlyConn lets crypto/tls read a connection without writing to it.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c readOnlyConn) Write(b []byte) (int, error) { return 0, io.ErrClosedPipe }

func addrOf(a net.Addr) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}

// OriginalDestination is where a redirected IPv4 connection was headed, from conntrack
// (SO_ORIGINAL_DST).
func OriginalDestination(conn net.Conn) (netip.AddrPort, error) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var sockErr error
	err = raw.Control(func(fd uintptr) {
		// struct sockaddr_in fits the 16 bytes of an IPv6Mreq, the usual way to read it in Go.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			sockErr = err
			return
		}
		b := mreq.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), uint16(b[2])<<8|uint16(b[3]))
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	return dst, sockErr
}
