package egressagent

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Rule is one of E2B's network rules for a domain: headers set on the sandbox's requests to it.
type Rule struct {
	Transform *Transform `json:"transform,omitempty"`
}

// Transform is what a rule changes in a request.
type Transform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// HostRule is a parsed rule: the domain pattern it applies to (lower case, "a.example.com" or
// "*.example.com") and the headers it sets, by name, each replacing any the sandbox sent.
type HostRule struct {
	Pattern string
	Headers []Header
}

// Header is one header a rule sets; its value may name secrets (${e2b.secrets.NAME}), resolved
// on the way out.
type Header struct {
	Name    string
	Value   string
	Secrets []string // the secret names in Value, lower case, in order
}

// E2B's API's limits on rules.
const (
	maxRuleDomains    = 10
	maxRuleDomainLen  = 128
	maxRuleHeaders    = 20
	maxHeaderNameLen  = 64
	maxHeaderValueLen = 2048
	maxRuleSecrets    = 32
	maxSecretNameLen  = 128
)

// unsettable are header names a proxy cannot set for a sandbox: the connection's own (the
// request's target, its framing, hop-by-hop). E2B's API does not name them; CubePod refuses them
// rather than send something else than asked.
var unsettable = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"upgrade": true, "te": true, "trailer": true, "keep-alive": true,
}

const (
	secretPrefix   = "${e2b.secrets."
	identityPrefix = "${e2b.identity.tokens."
)

// parseRules checks rules as E2B's API does (at most 10 domains, one rule each, 20 headers of
// valid names and values, well-formed placeholders, 32 secrets a domain) and orders them by
// pattern.
func parseRules(rules map[string][]Rule) ([]HostRule, error) {
	if len(rules) > maxRuleDomains {
		return nil, fmt.Errorf("network rules can have at most %d domains", maxRuleDomains)
	}
	seen := map[string]string{}
	var out []HostRule
	for domain, list := range rules {
		pattern := strings.ToLower(domain)
		if len(domain) > maxRuleDomainLen || !validRuleDomain(pattern) {
			return nil, fmt.Errorf("rule domain %q is not a valid domain name", domain)
		}
		if other, ok := seen[pattern]; ok {
			return nil, fmt.Errorf("rule domains %q and %q are the same domain", other, domain)
		}
		seen[pattern] = domain
		if len(list) > 1 {
			return nil, fmt.Errorf("domain %q can have at most 1 transform rule", domain)
		}
		rule := HostRule{Pattern: pattern}
		if len(list) == 1 && list[0].Transform != nil {
			headers, err := parseHeaders(domain, list[0].Transform.Headers)
			if err != nil {
				return nil, err
			}
			rule.Headers = headers
		}
		out = append(out, rule)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern < out[j].Pattern })
	return out, nil
}

func parseHeaders(domain string, headers map[string]string) ([]Header, error) {
	if len(headers) > maxRuleHeaders {
		return nil, fmt.Errorf("domain %q: a rule can set at most %d headers", domain, maxRuleHeaders)
	}
	secrets := map[string]bool{}
	var out []Header
	for name, value := range headers {
		switch {
		case len(name) > maxHeaderNameLen || !httpguts.ValidHeaderFieldName(name):
			return nil, fmt.Errorf("domain %q: %q is not a valid header name", domain, name)
		case unsettable[strings.ToLower(name)] || strings.HasPrefix(strings.ToLower(name), "proxy-"):
			return nil, fmt.Errorf("domain %q: header %s belongs to the connection and cannot be set", domain, name)
		case len(value) > maxHeaderValueLen || !httpguts.ValidHeaderFieldValue(value):
			return nil, fmt.Errorf("domain %q: the value of header %s is not a valid header value", domain, name)
		}
		names, err := secretNames(value)
		if err != nil {
			return nil, fmt.Errorf("domain %q: header %s: %w", domain, name, err)
		}
		for _, n := range names {
			secrets[n] = true
		}
		out = append(out, Header{Name: name, Value: value, Secrets: names})
	}
	if len(secrets) > maxRuleSecrets {
		return nil, fmt.Errorf("rule domain %q references more than %d secrets", domain, maxRuleSecrets)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// validRuleDomain takes a DNS name or "*." before one; a bare "*" is not a rule's domain.
func validRuleDomain(pattern string) bool {
	return pattern != "*" && validDomainPattern(pattern)
}

// secretNames are the names of a header value's secrets, in order.
func secretNames(value string) ([]string, error) {
	spans, err := placeholders(value)
	var names []string
	for _, s := range spans {
		names = append(names, s.name)
	}
	return names, err
}

// Expand replaces a header value's secrets by their values.
func Expand(value string, secret func(name string) (string, error)) (string, error) {
	spans, err := placeholders(value)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, s := range spans {
		v, err := secret(s.name)
		if err != nil {
			return "", err
		}
		b.WriteString(value[last:s.start])
		b.WriteString(v)
		last = s.end
	}
	b.WriteString(value[last:])
	return b.String(), nil
}

// span is a placeholder's place in a value, [start, end), and the secret it names.
type span struct {
	start, end int
	name       string
}

// placeholders reads the ${e2b.secrets.NAME} placeholders of a header value, left to right, in
// E2B's spelling (a name of letters, digits, '_' and '-', compared in lower case). Other ${...}
// text is the value's own; an unclosed or nested placeholder is malformed. E2B's workload identity
// tokens (${e2b.identity.tokens.NAME}) are not served here and are refused by name.
func placeholders(value string) ([]span, error) {
	var spans []span
	for cursor := 0; ; {
		start, prefix := nextPlaceholder(value[cursor:])
		if start < 0 {
			return spans, nil
		}
		start += cursor
		body := value[start+len(prefix):]
		end := strings.IndexByte(body, '}')
		if end < 0 {
			return nil, fmt.Errorf("a placeholder is not closed")
		}
		if nested, _ := nextPlaceholder(body[:end]); nested >= 0 {
			return nil, fmt.Errorf("a placeholder holds another")
		}
		if prefix == identityPrefix {
			return nil, fmt.Errorf("workload identity tokens (%s...}) are not served by CubePod", identityPrefix)
		}
		name, err := secretName(body[:end])
		if err != nil {
			return nil, err
		}
		cursor = start + len(prefix) + end + 1
		spans = append(spans, span{start: start, end: cursor, name: name})
	}
}

// nextPlaceholder finds the first placeholder prefix in s: its index (-1: none) and which.
func nextPlaceholder(s string) (int, string) {
	secret, identity := strings.Index(s, secretPrefix), strings.Index(s, identityPrefix)
	switch {
	case secret < 0 && identity < 0:
		return -1, ""
	case secret < 0 || (identity >= 0 && identity < secret):
		return identity, identityPrefix
	default:
		return secret, secretPrefix
	}
}

// secretName is a secret's name as E2B canonicalises it.
func secretName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || len(name) > maxSecretNameLen {
		return "", fmt.Errorf("a secret's name has 1 to %d characters", maxSecretNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("a secret's name has letters, digits, '_' and '-' only")
		}
	}
	return strings.ToLower(name), nil
}

// RuleFor is the rule for a host, nil when none applies: an exact domain first, else the longest
// wildcard whose names include the host (never its apex). Rules are not merged.
func (p Policy) RuleFor(host string) *HostRule {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	var best *HostRule
	for i := range p.Rules {
		r := &p.Rules[i]
		switch {
		case r.Pattern == host:
			return r
		case strings.HasPrefix(r.Pattern, "*.") && DomainMatches(host, r.Pattern) &&
			(best == nil || len(r.Pattern) > len(best.Pattern)):
			best = r
		}
	}
	return best
}
