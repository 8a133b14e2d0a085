package egressagent

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRefusesWhatE2BRefuses(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		err  string
	}{
		{Spec{DenyOut: []string{"example.com"}}, "invalid denied CIDR example.com"},
		{Spec{AllowOut: []string{"example.com"}}, "deny out is missing 0.0.0.0/0"},
		{Spec{AllowOut: []string{"example.com"}, DenyOut: []string{"1.2.3.4"}}, "deny out is missing 0.0.0.0/0"},
		{Spec{AllowOut: []string{"exa mple.com"}, DenyOut: []string{AllTraffic}}, "invalid allowed address exa mple.com"},
		{Spec{AllowOut: []string{"-bad.com"}, DenyOut: []string{AllTraffic}}, "invalid allowed address -bad.com"},
		{Spec{AllowOut: []string{"*.*.com"}, DenyOut: []string{AllTraffic}}, "invalid allowed address *.*.com"},
		{Spec{AllowOut: []string{"0.0.0.0"}}, "0.0.0.0: an unspecified address"},
		{Spec{DenyOut: []string{"0.0.0.0/8"}}, "0.0.0.0/8: an unspecified address"},
		{Spec{DenyOut: []string{"::/0"}}, "only IPv4"},
		{Spec{AllowOut: []string{"2001:db8::1"}}, "only IPv4"},
		{Spec{DenyOut: []string{"1.2.3.4/33"}}, "invalid denied CIDR 1.2.3.4/33"},
	} {
		if _, err := Parse(c.spec); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.err)
		}
	}
}

func TestParseAnnotation(t *testing.T) {
	p, err := ParseAnnotation(`{"allowOut":["A.Example.com.","*.b.test","8.8.8.8","10.1.2.3/16"],"denyOut":["0.0.0.0/0"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.AllowDomains, ","); got != "a.example.com,*.b.test" {
		t.Errorf("domains %s", got)
	}
	if got := p.AllowCIDRs; len(got) != 2 || got[0].String() != "8.8.8.8/32" || got[1].String() != "10.1.0.0/16" {
		t.Errorf("allowed CIDRs %v", got)
	}
	if _, err := ParseAnnotation(`{"allowOut":[],"headers":{}}`); err == nil {
		t.Error("an unknown field is refused")
	}
	if _, err := ParseAnnotation(`not json`); err == nil {
		t.Error("not JSON is refused")
	}
	if p, err := ParseAnnotation(`{}`); err != nil || len(p.AllowCIDRs)+len(p.DenyCIDRs)+len(p.AllowDomains) != 0 {
		t.Errorf("empty: %v %v", p, err)
	}
}

func TestVerdictInE2BsOrder(t *testing.T) {
	allowList, _ := Parse(Spec{AllowOut: []string{"a.test", "*.b.test", "198.19.0.11"}, DenyOut: []string{AllTraffic}})
	denyList, _ := Parse(Spec{AllowOut: []string{"198.19.0.10"}, DenyOut: []string{"198.19.0.0/24"}})
	everything, _ := Parse(Spec{AllowOut: []string{"*"}, DenyOut: []string{AllTraffic}})
	public := netip.MustParseAddr("198.19.0.10")
	other := netip.MustParseAddr("198.19.0.12")
	for _, c := range []struct {
		name   string
		policy Policy
		host   string
		ip     netip.Addr
		ok     bool
		match  Match
	}{
		{"no policy allows", Policy{}, "", public, true, MatchNone},
		{"an allowed domain", allowList, "A.test.", public, true, MatchDomain},
		{"a domain is not its subdomains", allowList, "x.a.test", public, false, MatchCIDR},
		{"a wildcard takes subdomains", allowList, "x.y.b.test", public, true, MatchDomain},
		{"a wildcard not its apex", allowList, "b.test", public, false, MatchCIDR},
		{"a suffix is not a subdomain", allowList, "evilb.test", public, false, MatchCIDR},
		{"an allowed address without a name", allowList, "", netip.MustParseAddr("198.19.0.11"), true, MatchCIDR},
		{"an allowed address under another name", allowList, "c.test", netip.MustParseAddr("198.19.0.11"), true, MatchCIDR},
		{"the address a domain resolves to grants nothing", allowList, "", public, false, MatchCIDR},
		{"allow beats deny", denyList, "", public, true, MatchCIDR},
		{"deny", denyList, "", other, false, MatchCIDR},
		{"outside the denied range", denyList, "", netip.MustParseAddr("198.20.0.1"), true, MatchNone},
		{"an IPv4-mapped address", denyList, "", netip.MustParseAddr("::ffff:198.19.0.12"), false, MatchCIDR},
		{"star allows any name", everything, "anything.example", other, true, MatchDomain},
		{"star needs a name", everything, "", other, false, MatchCIDR},
	} {
		ok, match := c.policy.Verdict(c.host, c.ip)
		if ok != c.ok || match != c.match {
			t.Errorf("%s: %v %s, want %v %s", c.name, ok, match, c.ok, c.match)
		}
	}
}
