package egressagent

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"

	"cubepod.local/podd/internal/netnstest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("CUBEPOD_EGRESS_TEST_CLIENT"); spec != "" {
		fmt.Print(runClient(spec))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runClient is what a sandbox does in the firewall test: "http ADDR", "udp ADDR" or "tcp ADDR".
func runClient(spec string) string {
	kind, addr, _ := strings.Cut(spec, " ")
	switch kind {
	case "http":
		c := http.Client{Timeout: 3 * time.Second}
		res, err := c.Get("http://" + addr + "/")
		if err != nil {
			return "error"
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	case "udp":
		c, err := net.Dial("udp", addr)
		if err != nil {
			return "error"
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return "error"
		}
		b := make([]byte, 64)
		n, err := c.Read(b)
		if err != nil {
			return "error"
		}
		return string(b[:n])
	case "hosted":
		// "hosted NAME ADDR": an HTTP request to ADDR naming NAME as its Host.
		name, target, _ := strings.Cut(addr, " ")
		c := http.Client{Timeout: 3 * time.Second}
		req, _ := http.NewRequest(http.MethodGet, "http://"+target+"/", nil)
		req.Host = name
		res, err := c.Do(req)
		if err != nil {
			return "error"
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	case "tcp":
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return "error"
		}
		c.Close()
		return "connected"
	}
	return "bad spec " + spec
}

func TestMergeRanges(t *testing.T) {
	ps := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	show := func(rs []addrRange) string {
		var parts []string
		for _, r := range rs {
			parts = append(parts, fmt.Sprintf("%s-%s", netip.AddrFrom4([4]byte(be32(r.from))), netip.AddrFrom4([4]byte(be32(r.to)))))
		}
		return strings.Join(parts, ",")
	}
	for _, c := range []struct {
		in   []netip.Prefix
		want string
	}{
		{ps("10.0.0.0/8", "10.1.0.0/16"), "10.0.0.0-10.255.255.255"},
		{ps("10.0.0.1/32", "10.0.0.0/32", "10.0.0.3/32"), "10.0.0.0-10.0.0.1,10.0.0.3-10.0.0.3"},
		{ps("192.168.0.0/16", "0.0.0.0/0"), "0.0.0.0-255.255.255.255"},
		{ps("255.255.255.255/32", "255.255.255.254/32"), "255.255.255.254-255.255.255.255"},
		{ps("10.0.0.5/24"), "10.0.0.0-10.0.0.255"},
		{nil, ""},
	} {
		if got := show(mergeRanges(c.in)); got != c.want {
			t.Errorf("%v: %s, want %s", c.in, got, c.want)
		}
	}
}

// TestFirewall runs in a network namespace of its own, the node, with a sandbox in a second one
// behind a veth pair and two hosts of the internet on its loopback interface; the sandbox's traffic
// meets the agent's table and proxy for real.
func TestFirewall(t *testing.T) {
	if !netnstest.Enter(t) {
		return
	}
	sandboxPid := setUpNode(t)
	sandbox := netip.MustParseAddr("10.99.0.2")
	run := func(spec string) string {
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(sandboxPid), "-n", "--",
			"env", "CUBEPOD_EGRESS_TEST_CLIENT="+spec, os.Args[0]).CombinedOutput()
		if err != nil {
			t.Fatalf("client %s: %v %s", spec, err, out)
		}
		return string(out)
	}

	// The internet: an HTTP server on port 80 and a UDP echo on 5353 of both hosts.
	http80, err := net.Listen("tcp", "0.0.0.0:80")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = http.Serve(http80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "host "+strings.Split(r.Host, ":")[0])
			if v := r.Header.Get("X-Rule"); v != "" {
				_, _ = io.WriteString(w, ", X-Rule "+v)
			}
		}))
	}()
	// One socket per host, so that each answers from its own address.
	for _, host := range []string{"203.0.113.10", "203.0.113.11"} {
		udp, err := net.ListenPacket("udp", host+":5353")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b := make([]byte, 64)
			for {
				n, from, err := udp.ReadFrom(b)
				if err != nil {
					return
				}
				_, _ = udp.WriteTo(append([]byte("echo "), b[:n]...), from)
			}
		}()
	}

	var mu sync.Mutex
	policies := map[netip.Addr]Policy{}
	var refusals []string
	ports := Ports{HTTP: 15080, TLS: 15443, Other: 15001}
	authority, err := LoadAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	proxy := &Proxy{
		Transforms: &Transforms{Authority: authority, Secrets: func(string) func(string) (string, error) {
			return func(string) (string, error) { return "from-a-secret", nil }
		}},
		Policy: func(src netip.Addr) (Policy, bool) {
			mu.Lock()
			defer mu.Unlock()
			p, ok := policies[src]
			return p, ok
		},
		Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, fmt.Sprintf(format, args...))
		},
	}
	for _, l := range []struct {
		port  uint16
		class PortClass
	}{{ports.HTTP, ClassHTTP}, {ports.TLS, ClassTLS}, {ports.Other, ClassOther}} {
		ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", l.port))
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = proxy.Serve(ln, l.class) }()
	}
	apply := func(spec *Spec) {
		t.Helper()
		mu.Lock()
		delete(policies, sandbox)
		if spec != nil {
			p, err := Parse(*spec)
			if err != nil {
				t.Fatal(err)
			}
			policies[sandbox] = p
		}
		rules := Ruleset{Ports: ports, Cluster: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}, Sandboxes: policies}
		mu.Unlock()
		conn, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		if err := rules.Apply(conn); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(spec, want string) {
		t.Helper()
		if got := run(spec); got != want {
			mu.Lock()
			defer mu.Unlock()
			t.Errorf("%s: %q, want %q (proxy said %q)", spec, got, want, refusals)
		}
	}

	// An allow-list with a domain: TCP through the proxy, UDP in the table.
	apply(&Spec{AllowOut: []string{"203.0.113.10", "a.test"}, DenyOut: []string{AllTraffic}})
	expect("http 203.0.113.10:80", "host 203.0.113.10")
	expect("http 203.0.113.11:80", "error")
	expect("udp 203.0.113.10:5353", "echo ping")
	expect("udp 203.0.113.11:5353", "error")
	// The cluster's networks are not redirected, and its policy holds there too.
	expect("tcp 10.99.0.1:80", "error")
	// The proxy takes nothing that the redirect did not send it.
	expect("tcp 10.99.0.1:15080", "error")
	mu.Lock()
	if len(refusals) != 1 || !strings.Contains(refusals[0], "refused 10.99.0.2 -> 203.0.113.11:80") {
		t.Errorf("the proxy refused %q", refusals)
	}
	mu.Unlock()

	// A change while running: now a deny-list of the other host, decided in the table alone:
	// refused before any handshake, and the proxy sees nothing.
	apply(&Spec{DenyOut: []string{"203.0.113.11/32"}})
	expect("http 203.0.113.10:80", "host 203.0.113.10")
	expect("tcp 203.0.113.11:80", "error")
	expect("udp 203.0.113.11:5353", "error")
	expect("tcp 10.99.0.1:80", "connected")
	expect("tcp 10.99.0.1:15080", "error")
	mu.Lock()
	if len(refusals) != 1 {
		t.Errorf("the proxy saw a sandbox without domains: %q", refusals)
	}
	mu.Unlock()

	// Rules alone: the sandbox's HTTP is redirected for them, and a request to a rule's name
	// goes to that name with the rule's header; the rest of its traffic is not the proxy's.
	apply(&Spec{Rules: map[string][]Rule{"localhost": {{Transform: &Transform{Headers: map[string]string{"X-Rule": "${e2b.secrets.key}"}}}}}})
	expect("hosted localhost 203.0.113.11:80", "host localhost, X-Rule from-a-secret")
	expect("http 203.0.113.11:80", "host 203.0.113.11")
	expect("udp 203.0.113.11:5353", "echo ping")

	// No policy: the sandbox is not redirected, and reaches both.
	apply(nil)
	expect("http 203.0.113.11:80", "host 203.0.113.11")
	expect("udp 203.0.113.11:5353", "echo ping")
	conn, _ := nftables.New()
	if err := Remove(conn); err != nil {
		t.Fatal(err)
	}
}

// setUpNode makes the namespace the node: the internet's hosts 203.0.113.10 and .11 on its loopback
// interface, and the sandbox (a process in a network namespace of its own, whose pid it returns)
// at 10.99.0.2 behind a veth pair, routed through the node at 10.99.0.1.
func setUpNode(t *testing.T) int {
	t.Helper()
	sleeper := exec.Command("unshare", "--net", "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pid := strconv.Itoa(sleeper.Process.Pid)
	// The child must have entered its namespace before its interface can be moved there.
	for i := 0; ; i++ {
		mine, _ := os.Readlink("/proc/self/ns/net")
		theirs, _ := os.Readlink("/proc/" + pid + "/ns/net")
		if theirs != "" && theirs != mine {
			break
		}
		if i > 100 {
			t.Fatal("the sandbox's namespace never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", "203.0.113.10/32", "dev", "lo"},
		{"ip", "addr", "add", "203.0.113.11/32", "dev", "lo"},
		{"ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", pid},
		{"ip", "addr", "add", "10.99.0.1/24", "dev", "v0"},
		{"ip", "link", "set", "v0", "up"},
		{"nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up"},
		{"nsenter", "-t", pid, "-n", "ip", "addr", "add", "10.99.0.2/24", "dev", "v1"},
		{"nsenter", "-t", pid, "-n", "ip", "link", "set", "v1", "up"},
		{"nsenter", "-t", pid, "-n", "ip", "route", "add", "default", "via", "10.99.0.1"},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	return sleeper.Process.Pid
}
