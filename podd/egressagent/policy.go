// Package egressagent is the node egress agent: what each sandbox on its node may reach, decided
// outside the sandbox (decision 0028). A sandbox's TCP to the internet is redirected in the
// node's network namespace to the agent's proxy, which matches the domain the sandbox names (TLS
// SNI, HTTP Host) and its destination address against the sandbox's policy with E2B's rules; its
// other traffic is decided by address in nftables.
package egressagent

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// AllTraffic is the denyOut entry that makes a policy an allow-list.
const AllTraffic = "0.0.0.0/0"

// Spec is a sandbox's egress as E2B's API spells it, the JSON of the Pod annotation the operator
// writes.
type Spec struct {
	AllowOut []string          `json:"allowOut,omitempty"`
	DenyOut  []string          `json:"denyOut,omitempty"`
	Rules    map[string][]Rule `json:"rules,omitempty"`
}

// Policy is a parsed Spec.
type Policy struct {
	AllowCIDRs   []netip.Prefix
	AllowDomains []string // lower case: "example.com", "*.example.com" or "*"
	DenyCIDRs    []netip.Prefix
	// Rules set headers on requests to their domains; they allow nothing by themselves.
	Rules []HostRule
	// Namespace and PodUID are the sandbox Pod's: where its rules' secrets are, whose CA its
	// intercepted connections are served with.
	Namespace, PodUID string
}

// Match says what decided a verdict.
type Match string

const (
	MatchNone   Match = "none"
	MatchDomain Match = "domain"
	MatchCIDR   Match = "cidr"
)

// ParseAnnotation reads the operator's annotation.
func ParseAnnotation(raw string) (Policy, error) {
	var s Spec
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Policy{}, fmt.Errorf("egress annotation: %w", err)
	}
	return Parse(s)
}

// Parse checks a Spec as E2B's API does: denyOut holds addresses and CIDRs only, allowOut also
// domains, and domains need 0.0.0.0/0 in denyOut (else they would allow nothing more).
func Parse(s Spec) (Policy, error) {
	var p Policy
	for _, entry := range s.DenyOut {
		prefix, isAddress, err := parseAddress(entry)
		if err != nil {
			return Policy{}, err
		}
		if !isAddress {
			return Policy{}, fmt.Errorf("invalid denied CIDR %s", entry)
		}
		p.DenyCIDRs = append(p.DenyCIDRs, prefix)
	}
	for _, entry := range s.AllowOut {
		prefix, isAddress, err := parseAddress(entry)
		if err != nil {
			return Policy{}, err
		}
		if isAddress {
			p.AllowCIDRs = append(p.AllowCIDRs, prefix)
			continue
		}
		if !validDomainPattern(entry) {
			return Policy{}, fmt.Errorf("invalid allowed address %s", entry)
		}
		p.AllowDomains = append(p.AllowDomains, strings.ToLower(strings.TrimSuffix(entry, ".")))
	}
	if len(p.AllowDomains) > 0 && !slices.Contains(s.DenyOut, AllTraffic) {
		return Policy{}, fmt.Errorf("allow out contains domains but deny out is missing %s (ALL_TRAFFIC)", AllTraffic)
	}
	rules, err := parseRules(s.Rules)
	if err != nil {
		return Policy{}, err
	}
	p.Rules = rules
	return p, nil
}

// parseAddress reads an IPv4 address or CIDR (a bare address is its own /32); false when s is
// neither, so maybe a domain. An unspecified address is refused but for 0.0.0.0/0 (E2B's
// IsSpecifiedIPOrCIDR), and so is IPv6, which sandboxes are not given.
func parseAddress(s string) (netip.Prefix, bool, error) {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, false, nil
		}
		prefix = netip.PrefixFrom(addr, addr.BitLen())
	}
	switch {
	case !prefix.Addr().Is4():
		return netip.Prefix{}, true, fmt.Errorf("%s: only IPv4 addresses and CIDRs are supported", s)
	case prefix.Addr().IsUnspecified() && s != AllTraffic:
		return netip.Prefix{}, true, fmt.Errorf("%s: an unspecified address matches nothing; 0.0.0.0/0 is all traffic", s)
	}
	return prefix.Masked(), true, nil
}

// validDomainPattern takes "*", a DNS name, or "*." before one.
func validDomainPattern(s string) bool {
	if s == "*" {
		return true
	}
	name := strings.TrimSuffix(strings.TrimPrefix(s, "*."), ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Verdict decides a connection to ip that named host ("" when it named none, or the port gives
// no name), in E2B's order: an allowed domain or CIDR allows; else a denied CIDR denies; else it
// is allowed.
func (p Policy) Verdict(host string, ip netip.Addr) (bool, Match) {
	if host != "" {
		for _, pattern := range p.AllowDomains {
			if DomainMatches(host, pattern) {
				return true, MatchDomain
			}
		}
	}
	ip = ip.Unmap()
	for _, prefix := range p.AllowCIDRs {
		if prefix.Contains(ip) {
			return true, MatchCIDR
		}
	}
	for _, prefix := range p.DenyCIDRs {
		if prefix.Contains(ip) {
			return false, MatchCIDR
		}
	}
	return true, MatchNone
}

// DomainMatches matches a host against a pattern: equal (any case), "*" for every host, or
// "*.example.com" for the names under example.com (not example.com itself).
func DomainMatches(host, pattern string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case pattern == "":
		return false
	case pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:])
	default:
		return host == pattern
	}
}
