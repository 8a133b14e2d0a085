package egressagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// AnnotationEgress is the sandbox's egress on its Pod, as the operator writes it (Spec JSON).
	AnnotationEgress = "pod.cubeplex.ai/egress"
	// AnnotationEgressApplied is the agent's answer on the Pod: the Digest of the AnnotationEgress
	// it enforces, or "invalid: " and why it refused it (and then lets the sandbox reach nothing).
	AnnotationEgressApplied = "pod.cubeplex.ai/egress-applied"
	// AnnotationEgressCA is the certificate (PEM) of the CA the agent serves a sandbox's
	// intercepted connections with, for the sandbox to trust; set while it has rules.
	AnnotationEgressCA = "pod.cubeplex.ai/egress-ca"
	// LabelTemplate marks sandbox Pods, the only ones the agent reads.
	LabelTemplate = "pod.cubeplex.ai/template"
)

// Digest names an egress annotation's value in the agent's answer.
func Digest(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// Plan is what the node enforces for its Pods, and the answers the Pods still lack.
type Plan struct {
	Sandboxes map[netip.Addr]Policy
	Answers   []Answer
}

// Answer is an AnnotationEgressApplied value to write on a Pod.
type Answer struct {
	Namespace, Name, Value string
}

// denyAll is the policy of a sandbox whose annotation cannot be read: it fails closed.
var denyAll = Policy{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix(AllTraffic)}}

// PlanFor decides the node's policies from its sandbox Pods. A Pod is policed while it may run
// (not Succeeded or Failed) and has an address of its own; when two claim one address (a Pod
// deleted, its address given to a new one), the one not being deleted wins, else the newer.
// resolvers are allowed to a sandbox that may reach domains, so that it can look them up (E2B
// adds its nameserver the same way). rules says whether the agent applies rules: a policy with
// rules is refused by one that does not, so that its sandbox reaches nothing rather than go out
// without its headers.
func PlanFor(pods []*corev1.Pod, resolvers []netip.Prefix, rules bool) Plan {
	plan := Plan{Sandboxes: map[netip.Addr]Policy{}}
	owner := map[netip.Addr]*corev1.Pod{}
	for _, pod := range pods {
		raw, ok := pod.Annotations[AnnotationEgress]
		if !ok || pod.Spec.HostNetwork || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		addr, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			continue
		}
		if prev, taken := owner[addr]; taken && !newerClaim(pod, prev) {
			continue
		}
		owner[addr] = pod
		policy, err := ParseAnnotation(raw)
		answer := Digest(raw)
		switch {
		case err != nil:
			policy, answer = denyAll, "invalid: "+err.Error()
		case len(policy.Rules) > 0 && !rules:
			policy, answer = denyAll, "invalid: rules are not applied by this node's egress agent"
		case !addr.Is4():
			policy, answer = denyAll, fmt.Sprintf("invalid: the Pod's address %s is not IPv4", addr)
		}
		policy.Namespace, policy.PodUID = pod.Namespace, string(pod.UID)
		if len(policy.AllowDomains) > 0 {
			policy.AllowCIDRs = append(slices.Clone(policy.AllowCIDRs), resolvers...)
		}
		if addr.Is4() {
			plan.Sandboxes[addr] = policy
		}
		if pod.Annotations[AnnotationEgressApplied] != answer {
			plan.Answers = append(plan.Answers, Answer{pod.Namespace, pod.Name, answer})
		}
	}
	// A Pod that lost its address to another gets no answer: it is not enforced.
	plan.Answers = slices.DeleteFunc(plan.Answers, func(a Answer) bool {
		for _, pod := range owner {
			if pod.Namespace == a.Namespace && pod.Name == a.Name {
				return false
			}
		}
		return true
	})
	return plan
}

func newerClaim(pod, prev *corev1.Pod) bool {
	if (pod.DeletionTimestamp == nil) != (prev.DeletionTimestamp == nil) {
		return pod.DeletionTimestamp == nil
	}
	return prev.CreationTimestamp.Before(&pod.CreationTimestamp)
}

// Key is a canonical text of the policies, to tell whether a plan changes what is enforced.
func (p Plan) Key() string {
	addrs := make([]netip.Addr, 0, len(p.Sandboxes))
	for a := range p.Sandboxes {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var b strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&b, "%s %v\n", a, p.Sandboxes[a])
	}
	return b.String()
}
