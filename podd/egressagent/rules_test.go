package egressagent

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func rulesOf(headers map[string]map[string]string) map[string][]Rule {
	out := map[string][]Rule{}
	for domain, h := range headers {
		out[domain] = []Rule{{Transform: &Transform{Headers: h}}}
	}
	return out
}

func TestParseRulesOrdersAndReadsSecrets(t *testing.T) {
	got, err := parseRules(rulesOf(map[string]map[string]string{
		"API.example.com": {"Authorization": "Bearer ${e2b.secrets.Api_Key}", "X-Team": "a"},
		"*.example.com":   {"X-Both": "${e2b.secrets.one}-${e2b.secrets.two} ${literal}"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []HostRule{
		{Pattern: "*.example.com", Headers: []Header{
			{Name: "X-Both", Value: "${e2b.secrets.one}-${e2b.secrets.two} ${literal}", Secrets: []string{"one", "two"}},
		}},
		{Pattern: "api.example.com", Headers: []Header{
			{Name: "Authorization", Value: "Bearer ${e2b.secrets.Api_Key}", Secrets: []string{"api_key"}},
			{Name: "X-Team", Value: "a"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// A rule with no transform is a rule that sets nothing.
	got, err = parseRules(map[string][]Rule{"a.example": {{}}})
	if err != nil || len(got) != 1 || got[0].Headers != nil {
		t.Fatalf("a rule without a transform: %+v, %v", got, err)
	}
}

func TestParseRulesRefusals(t *testing.T) {
	many := map[string][]Rule{}
	for _, d := range strings.Split("a b c d e f g h i j k", " ") {
		many[d+".example"] = []Rule{{}}
	}
	headers := map[string]string{}
	for i := range 21 {
		headers["X-"+strings.Repeat("a", i+1)] = "v"
	}
	secrets := ""
	for i := range 33 {
		secrets += "${e2b.secrets.s" + strings.Repeat("x", i) + "}"
	}
	cases := []struct {
		name  string
		rules map[string][]Rule
		want  string
	}{
		{"eleven domains", many, "at most 10 domains"},
		{"a bare star", rulesOf(map[string]map[string]string{"*": {}}), `"*" is not a valid domain`},
		{"an address-like space", rulesOf(map[string]map[string]string{"a b": {}}), "not a valid domain"},
		{"a long domain", rulesOf(map[string]map[string]string{strings.Repeat("a", 60) + "." + strings.Repeat("b", 68): {}}), "not a valid domain"},
		{"the same domain twice", map[string][]Rule{"A.example": {{}}, "a.example": {{}}}, "the same domain"},
		{"two rules", map[string][]Rule{"a.example": {{}, {}}}, "at most 1 transform rule"},
		{"21 headers", rulesOf(map[string]map[string]string{"a.example": headers}), "at most 20 headers"},
		{"a bad name", rulesOf(map[string]map[string]string{"a.example": {"X Y": "v"}}), "not a valid header name"},
		{"a long name", rulesOf(map[string]map[string]string{"a.example": {strings.Repeat("x", 65): "v"}}), "not a valid header name"},
		{"Host", rulesOf(map[string]map[string]string{"a.example": {"host": "b.example"}}), "belongs to the connection"},
		{"a proxy header", rulesOf(map[string]map[string]string{"a.example": {"Proxy-Authorization": "x"}}), "belongs to the connection"},
		{"a line break", rulesOf(map[string]map[string]string{"a.example": {"X-A": "a\r\nX-B: b"}}), "not a valid header value"},
		{"a long value", rulesOf(map[string]map[string]string{"a.example": {"X-A": strings.Repeat("v", 2049)}}), "not a valid header value"},
		{"an unclosed placeholder", rulesOf(map[string]map[string]string{"a.example": {"X-A": "${e2b.secrets.key"}}), "not closed"},
		{"a nested placeholder", rulesOf(map[string]map[string]string{"a.example": {"X-A": "${e2b.secrets.${e2b.secrets.a}}"}}), "holds another"},
		{"an empty name", rulesOf(map[string]map[string]string{"a.example": {"X-A": "${e2b.secrets.}"}}), "1 to 128"},
		{"a bad name", rulesOf(map[string]map[string]string{"a.example": {"X-A": "${e2b.secrets.a.b}"}}), "letters, digits"},
		{"an identity token", rulesOf(map[string]map[string]string{"a.example": {"X-A": "${e2b.identity.tokens.aws}"}}), "not served by CubePod"},
		{"33 secrets", rulesOf(map[string]map[string]string{"a.example": {"X-A": secrets}}), "more than 32 secrets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseRules(c.rules); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestRuleForPrefersExactThenLongestWildcard(t *testing.T) {
	rules, err := parseRules(rulesOf(map[string]map[string]string{
		"api.example.com":   {"X-Rule": "exact"},
		"*.example.com":     {"X-Rule": "wide"},
		"*.eu.example.com":  {"X-Rule": "narrow"},
		"other.example.org": {"X-Rule": "other"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Rules: rules}
	for host, want := range map[string]string{
		"api.example.com":       "exact",
		"API.Example.com.":      "exact",
		"www.example.com":       "wide",
		"a.b.example.com":       "wide",
		"x.eu.example.com":      "narrow",
		"eu.example.com":        "wide",
		"example.com":           "",
		"other.example.org":     "other",
		"sub.other.example.org": "",
		"example.com.evil.net":  "",
	} {
		got := ""
		if r := p.RuleFor(host); r != nil {
			got = r.Headers[0].Value
		}
		if got != want {
			t.Errorf("%s: got rule %q, want %q", host, got, want)
		}
	}
}

func TestExpandReplacesSecretsOnly(t *testing.T) {
	values := map[string]string{"key": "s3cr3t", "team": "a-team"}
	lookup := func(name string) (string, error) {
		if v, ok := values[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("no secret %s", name)
	}
	got, err := Expand("Bearer ${e2b.secrets.KEY} for ${e2b.secrets.team}, ${kept} $", lookup)
	if err != nil || got != "Bearer s3cr3t for a-team, ${kept} $" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := Expand("${e2b.secrets.other}", lookup); err == nil || !strings.Contains(err.Error(), "no secret other") {
		t.Fatalf("a missing secret: %v", err)
	}
	if got, err := Expand("plain", lookup); err != nil || got != "plain" {
		t.Fatalf("no placeholder: %q %v", got, err)
	}
}
