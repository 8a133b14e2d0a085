package egress

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"cubepod.local/podd/internal/netnstest"
)

// inNetns re-runs the test in a network namespace of its own (netnstest), with lo up and a veth
// pair on 203.0.113.2/24, whose other addresses nobody answers.
func inNetns(t *testing.T) bool {
	t.Helper()
	if !netnstest.Enter(t) {
		return false
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"addr", "add", "203.0.113.2/24", "dev", "v0"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	return true
}

// dial connects to addr from a socket with the mark (0: none); nil when the SYN left (nobody
// answers, so the attempt runs out its time), else the error the rules caused.
func dial(addr string, mark uint32) error {
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	if mark != 0 {
		d.Control = markControl(mark)
	}
	conn, err := d.DialContext(context.Background(), "tcp", addr)
	if err == nil {
		conn.Close()
		return nil
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return nil
	}
	return err
}

func TestRulesLeaveOnlyTheSidecarsSocketsAWayOut(t *testing.T) {
	if !inNetns(t) {
		return
	}
	if err := dial("203.0.113.9:80", 0); err != nil {
		t.Fatalf("before the rules, an unmarked socket was refused: %v", err)
	}
	if err := Apply(DefaultMark); err != nil {
		t.Fatal(err)
	}
	// Twice: a sidecar's restart applies them again.
	if err := Apply(DefaultMark); err != nil {
		t.Fatal(err)
	}
	err := dial("203.0.113.9:80", 0)
	if !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("an unmarked socket: %v, want refused", err)
	}
	if err := dial("203.0.113.9:80", DefaultMark); err != nil {
		t.Fatalf("the sidecar's socket: %v, want let out", err)
	}
	if err := dial("203.0.113.9:80", DefaultMark+1); err == nil {
		t.Fatal("a socket with another mark was let out")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if c, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatalf("loopback: %v", err)
	} else {
		c.Close()
	}
}
